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
	var probe chunkProbe
	if err := json.Unmarshal(data, &probe); err != nil {
		return nil, false, false, translate.ErrMalformed
	}
	if len(probe.Error) > 0 && string(probe.Error) != "null" {
		code, typ, msg := parseUpstreamError(append(append([]byte(`{"error":`), probe.Error...), '}'))
		return nil, false, false, &translate.UpstreamError{Code: code, Type: typ, Message: msg}
	}
	if probe.Usage != nil {
		a.usage = probe.Usage.counts()
	}
	if probe.finished() {
		a.finished = true
	}
	useful := probe.useful()
	a.useful = a.useful || useful
	frame := make([]byte, 0, len(data)+8)
	frame = append(append(append(frame, "data: "...), data...), '\n', '\n')
	return [][]byte{frame}, useful, false, nil
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
