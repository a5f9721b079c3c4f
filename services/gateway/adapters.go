package gateway

import (
	"bytes"
	"encoding/json"
	"errors"

	"switchyard/services"
	"switchyard/services/translate"
)

// streamAdapter turns upstream SSE payloads into client frames for one
// (inbound, upstream) format pair, and says which events are useful
// (10-gateway-api §7.2) and when the stream is complete.
//
// Feed must not keep data after it returns, and the frames it returns are
// only valid until its next call: the relay writes them at once or copies
// the ones it holds back.
type streamAdapter interface {
	Feed(event string, data []byte) (frames [][]byte, useful, done bool, err error)
	// End is called when the upstream body ended without a terminal event.
	End() (frames [][]byte, done bool, err error)
	Terminal() []byte
	ErrorFrame(e *services.GatewayError) []byte
	Keepalive() []byte
	Usage() translate.Usage
}

var (
	chatKeepalive = []byte(": keepalive\n\n")
	pingKeepalive = []byte("event: ping\ndata: {\"type\":\"ping\"}\n\n")
)

// errIncomplete: the upstream ended without a finish reason after content.
var errIncomplete = errors.New("the upstream stream ended before completion")

// chatPassthrough relays OpenAI chat chunks unchanged.
type chatPassthrough struct {
	finished bool
	useful   bool
	usage    translate.Usage
	frame    []byte    // reused by every Feed
	frames   [1][]byte // the slice Feed returns
}

func newChatPassthrough() *chatPassthrough { return &chatPassthrough{} }

func (a *chatPassthrough) Feed(_ string, data []byte) ([][]byte, bool, bool, error) {
	if bytes.Equal(data, []byte("[DONE]")) {
		if !a.finished {
			if !a.useful {
				return nil, false, false, errEmpty
			}
			return nil, false, false, errIncomplete
		}
		return nil, false, true, nil
	}
	f, err := readChunk(data)
	if err != nil {
		return nil, false, false, err
	}
	if f.usage != nil {
		a.usage = f.usage.counts()
	}
	if f.finished {
		a.finished = true
	}
	a.useful = a.useful || f.useful
	a.frame = append(append(append(a.frame[:0], "data: "...), data...), '\n', '\n')
	a.frames[0] = a.frame
	return a.frames[:], f.useful, false, nil
}

// chunkFacts is what the relay takes from one chat.completion.chunk.
type chunkFacts struct {
	useful, finished bool
	usage            *usage
}

// readChunk reads a chunk as json.Unmarshal into chunkProbe would:
// translate.ErrMalformed for a chunk that does not decode, an
// *translate.UpstreamError for an error object. Plain chunks are read by
// scanChunk without decoding them; anything it does not handle is decoded.
func readChunk(data []byte) (chunkFacts, error) {
	if !validJSON(data) {
		return chunkFacts{}, translate.ErrMalformed
	}
	f, rawUsage, rawErr, ok := scanChunk(data)
	if !ok {
		var probe chunkProbe
		if err := json.Unmarshal(data, &probe); err != nil {
			return chunkFacts{}, translate.ErrMalformed
		}
		f = chunkFacts{useful: probe.useful(), finished: probe.finished(), usage: probe.Usage}
		rawErr = probe.Error
	} else if rawUsage != nil {
		var err error
		if f.usage, err = readUsage(rawUsage); err != nil {
			return chunkFacts{}, translate.ErrMalformed
		}
	}
	if len(rawErr) > 0 && string(rawErr) != "null" {
		code, typ, msg := parseUpstreamError(append(append([]byte(`{"error":`), rawErr...), '}'))
		return chunkFacts{}, &translate.UpstreamError{Code: code, Type: typ, Message: msg}
	}
	return f, nil
}

// scanChunk reads a valid JSON chunk of the usual shape by scanning its
// bytes: an object whose "choices" is null or an array of objects (or
// nulls) with "delta" and "finish_reason", deltas with string or null
// "content", "reasoning_content" and "reasoning" and any "tool_calls".
// It returns the raw "usage" object (nil when absent or null) and the raw
// "error" value. ok is false, and the chunk must be decoded, for anything
// else: another type where those fields are, a repeated field, or a key
// with escapes, non-ASCII bytes or another case that the decoder's
// case-insensitive matching could take for one of them.
func scanChunk(data []byte) (f chunkFacts, rawUsage, rawErr []byte, ok bool) {
	top, ok := objectAt(data, 0)
	if !ok {
		return f, nil, nil, false
	}
	var seen [3]bool
	for top.next() {
		var v []byte
		switch k := fieldOf(top.key, "choices", "usage", "error"); k {
		case -1:
			continue
		case -2:
			return f, nil, nil, false
		default:
			if seen[k] {
				return f, nil, nil, false
			}
			seen[k] = true
			v = top.val
			switch k {
			case 0:
				if !scanChoices(v, &f) {
					return f, nil, nil, false
				}
			case 1:
				switch v[0] {
				case 'n':
				case '{':
					rawUsage = v
				default:
					return f, nil, nil, false
				}
			case 2:
				rawErr = v
			}
		}
	}
	return f, rawUsage, rawErr, true
}

// scanChoices reads a "choices" value into f; false when it is not null or
// an array of plain choices.
func scanChoices(v []byte, f *chunkFacts) bool {
	if v[0] == 'n' {
		return true
	}
	arr, ok := arrayAt(v, 0)
	if !ok {
		return false
	}
	for arr.next() {
		el := arr.val
		if el[0] == 'n' {
			continue
		}
		choice, ok := objectAt(el, 0)
		if !ok {
			return false
		}
		var seen [2]bool
		for choice.next() {
			k := fieldOf(choice.key, "delta", "finish_reason")
			switch {
			case k == -1:
				continue
			case k == -2 || seen[k]:
				return false
			}
			seen[k] = true
			cv := choice.val
			if k == 1 {
				switch cv[0] {
				case 'n':
				case '"':
					f.finished, f.useful = true, true
				default:
					return false
				}
				continue
			}
			if cv[0] == 'n' {
				continue
			}
			delta, ok := objectAt(cv, 0)
			if !ok {
				return false
			}
			var dseen [4]bool
			for delta.next() {
				k := fieldOf(delta.key, "content", "tool_calls", "reasoning_content", "reasoning")
				switch {
				case k == -1:
					continue
				case k == -2 || dseen[k]:
					return false
				}
				dseen[k] = true
				dv := delta.val
				if k == 1 { // tool_calls: any value
					if string(dv) != "null" {
						f.useful = true
					}
					continue
				}
				switch dv[0] {
				case 'n':
				case '"':
					if len(dv) > 2 { // a non-empty string
						f.useful = true
					}
				default:
					return false
				}
			}
		}
	}
	return true
}

func (a *chatPassthrough) End() ([][]byte, bool, error) {
	switch {
	case a.finished:
		return nil, true, nil
	case !a.useful:
		return nil, false, errEmpty
	}
	return nil, false, errIncomplete
}

func (a *chatPassthrough) Terminal() []byte  { return []byte("data: [DONE]\n\n") }
func (a *chatPassthrough) Keepalive() []byte { return chatKeepalive }
func (a *chatPassthrough) Usage() translate.Usage {
	return a.usage
}

func (a *chatPassthrough) ErrorFrame(e *services.GatewayError) []byte {
	b, _ := json.Marshal(map[string]any{"error": map[string]any{"message": e.Message, "type": errType(e), "code": e.Code, "param": nil}})
	return append(append([]byte("data: "), b...), '\n', '\n')
}

// messagesPassthrough relays Anthropic events unchanged.
type messagesPassthrough struct {
	useful bool
	usage  translate.Usage
}

func newMessagesPassthrough() *messagesPassthrough { return &messagesPassthrough{} }

func (a *messagesPassthrough) Feed(event string, data []byte) ([][]byte, bool, bool, error) {
	var ev struct {
		Type    string `json:"type"`
		Message *struct {
			Usage struct {
				InputTokens int64 `json:"input_tokens"`
				CacheRead   int64 `json:"cache_read_input_tokens"`
				CacheWrite  int64 `json:"cache_creation_input_tokens"`
			} `json:"usage"`
		} `json:"message"`
		Delta *struct {
			StopReason *string `json:"stop_reason"`
		} `json:"delta"`
		Usage *struct {
			OutputTokens int64 `json:"output_tokens"`
		} `json:"usage"`
		Error *struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(data, &ev); err != nil {
		return nil, false, false, translate.ErrMalformed
	}
	if ev.Type == "" {
		ev.Type = event
	}
	useful, done := false, false
	switch ev.Type {
	case "error":
		msg := ""
		typ := ""
		if ev.Error != nil {
			msg, typ = ev.Error.Message, ev.Error.Type
		}
		return nil, false, false, &translate.UpstreamError{Type: typ, Message: Sanitize(msg)}
	case "ping":
		return nil, false, false, nil
	case "message_start":
		if ev.Message != nil {
			a.usage.PromptTokens = ev.Message.Usage.InputTokens
			a.usage.CachedTokens = ev.Message.Usage.CacheRead
			a.usage.CacheWriteTokens = ev.Message.Usage.CacheWrite
		}
	case "content_block_start", "content_block_delta":
		useful = true
	case "message_delta":
		useful = ev.Delta != nil && ev.Delta.StopReason != nil
		if ev.Usage != nil {
			a.usage.CompletionTokens = ev.Usage.OutputTokens
		}
	case "message_stop":
		done = true
	}
	a.useful = a.useful || useful
	frame := make([]byte, 0, len(data)+len(ev.Type)+16)
	frame = append(append(append(append(append(frame, "event: "...), ev.Type...), "\ndata: "...), data...), '\n', '\n')
	return [][]byte{frame}, useful, done, nil
}

func (a *messagesPassthrough) End() ([][]byte, bool, error) {
	if !a.useful {
		return nil, false, errEmpty
	}
	return nil, false, errIncomplete
}

func (a *messagesPassthrough) Terminal() []byte       { return nil }
func (a *messagesPassthrough) Keepalive() []byte      { return pingKeepalive }
func (a *messagesPassthrough) Usage() translate.Usage { return a.usage }
func (a *messagesPassthrough) ErrorFrame(e *services.GatewayError) []byte {
	b, _ := json.Marshal(map[string]any{"type": "error", "error": map[string]any{"type": e.AnthropicType(), "message": e.Message, "code": e.Code}})
	return append(append([]byte("event: error\ndata: "), b...), '\n', '\n')
}

// translated wraps a translate.Stream between two formats.
type translated struct {
	s         translate.Stream
	useful    bool
	done      bool
	terminal  []byte
	keepalive []byte
}

func (a *translated) Feed(event string, data []byte) ([][]byte, bool, bool, error) {
	frames, useful, done, err := a.s.Feed(event, data)
	if err != nil {
		if errors.Is(err, translate.ErrIncomplete) {
			if !a.useful {
				return nil, false, false, errEmpty
			}
			return nil, false, false, errIncomplete
		}
		return nil, false, false, err
	}
	a.useful = a.useful || useful
	a.done = a.done || done
	return frames, useful, done, nil
}

func (a *translated) End() ([][]byte, bool, error) {
	if a.done {
		return nil, true, nil
	}
	// An OpenAI-format upstream may end its body right after the finish chunk.
	frames, _, done, err := a.s.Feed("", []byte("[DONE]"))
	if err == nil && done {
		return frames, true, nil
	}
	if !a.useful {
		return nil, false, errEmpty
	}
	return nil, false, errIncomplete
}

func (a *translated) Terminal() []byte       { return a.terminal }
func (a *translated) Keepalive() []byte      { return a.keepalive }
func (a *translated) Usage() translate.Usage { return a.s.Usage() }
func (a *translated) ErrorFrame(e *services.GatewayError) []byte {
	return a.s.ErrorFrame(e.Code, e.Message, errType(e))
}
