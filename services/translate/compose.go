package translate

import "bytes"

// composed chains two translators through the chat hub (§6.1), e.g.
// Anthropic events → chat chunks → Responses events.
type composed struct {
	first, second Stream
	done          bool
}

// Compose returns a Stream that feeds every frame first emits into second.
// useful is first's verdict (it reads the upstream); done is second's.
// When first reports done, second is fed `[DONE]`. first must emit the
// usage its successor needs: NewAnthropicToChatStream does by default.
func Compose(first, second Stream) Stream {
	return &composed{first: first, second: second}
}

func (c *composed) Feed(event string, data []byte) ([][]byte, bool, bool, error) {
	if c.done {
		return nil, false, true, nil
	}
	mid, useful, firstDone, err := c.first.Feed(event, data)
	if err != nil {
		return nil, useful, false, err
	}
	var out [][]byte
	feed := func(ev string, payload []byte) error {
		frames, _, done, err := c.second.Feed(ev, payload)
		out = append(out, frames...)
		if done {
			c.done = true
		}
		return err
	}
	for _, f := range mid {
		ev, payload := parseFrame(f)
		if err := feed(ev, payload); err != nil {
			return out, useful, false, err
		}
	}
	if firstDone && !c.done {
		if err := feed("", []byte("[DONE]")); err != nil {
			return out, useful, false, err
		}
	}
	return out, useful, c.done, nil
}

func (c *composed) ErrorFrame(code, message, errType string) []byte {
	return c.second.ErrorFrame(code, message, errType)
}

func (c *composed) Usage() Usage { return c.first.Usage() }

// parseFrame splits one SSE frame built by this package into its event
// name and data payload.
func parseFrame(f []byte) (string, []byte) {
	var event string
	var data [][]byte
	for _, line := range bytes.Split(f, []byte("\n")) {
		switch {
		case bytes.HasPrefix(line, []byte("event: ")):
			event = string(line[len("event: "):])
		case bytes.HasPrefix(line, []byte("data: ")):
			data = append(data, line[len("data: "):])
		}
	}
	return event, bytes.Join(data, []byte("\n"))
}
