package translate

import (
	"bytes"
	"encoding/json"
	"strconv"
)

// chatInChunk is a chat.completion.chunk as upstreams send it.
type chatInChunk struct {
	ID      string `json:"id"`
	Model   string `json:"model"`
	Choices []struct {
		Index int `json:"index"`
		Delta struct {
			Content          json.RawMessage   `json:"content"`
			ReasoningContent json.RawMessage   `json:"reasoning_content"`
			Reasoning        json.RawMessage   `json:"reasoning"`
			ToolCalls        []chatInChunkTool `json:"tool_calls"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *chatInUsage `json:"usage"`
	Error *chatInError `json:"error"`
}

type chatInChunkTool struct {
	Index    *int   `json:"index"`
	ID       string `json:"id"`
	Function struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	} `json:"function"`
}

// chunkEvent is what the chat-consuming translators read from one chunk:
// choice 0 only (n > 1 is never sent to a translated path).
type chunkEvent struct {
	doneMarker bool // the `[DONE]` sentinel
	id, model  string
	text       string
	reasoning  string
	tools      []toolDelta
	finish     *string
	usage      *Usage
	useful     bool // §7.2 for chat
}

type toolDelta struct {
	index int
	id    string
	name  string
	args  string
}

func parseChunk(data []byte) (chunkEvent, error) {
	data = bytes.TrimSpace(data)
	if string(data) == "[DONE]" {
		return chunkEvent{doneMarker: true}, nil
	}
	var c chatInChunk
	if err := json.Unmarshal(data, &c); err != nil {
		return chunkEvent{}, malformed("chat stream chunk")
	}
	if c.Error != nil {
		return chunkEvent{}, c.Error.upstream()
	}
	ev := chunkEvent{id: c.ID, model: c.Model}
	if c.Usage != nil {
		u := c.Usage.usage()
		ev.usage = &u
	}
	for _, ch := range c.Choices {
		if ch.Index != 0 {
			continue
		}
		d := ch.Delta
		ev.text, _ = asString(d.Content)
		ev.reasoning, _ = asString(d.ReasoningContent)
		if ev.reasoning == "" {
			ev.reasoning, _ = asString(d.Reasoning)
		}
		for i, tc := range d.ToolCalls {
			idx := i
			if tc.Index != nil {
				idx = *tc.Index
			}
			ev.tools = append(ev.tools, toolDelta{index: idx, id: tc.ID, name: tc.Function.Name, args: rawArguments(tc.Function.Arguments)})
		}
		ev.finish = ch.FinishReason
		ev.useful = ev.text != "" || ev.reasoning != "" || len(d.ToolCalls) > 0 || ch.FinishReason != nil
		break
	}
	return ev, nil
}

// toolSlots maps chat tool_calls indexes to the translator's own slots. A
// new id on a known index opens a new slot: some upstreams send every call
// with index 0.
type toolSlots struct {
	byIndex map[int]*toolSlot
	count   int
}

type toolSlot struct {
	n     int    // order of appearance, from 0
	block int    // Anthropic block index or Responses output index
	id    string // call id as sent to the client
	name  string
	args  []byte
}

// lookup returns the slot for d and whether it was just opened.
func (t *toolSlots) lookup(d toolDelta) (*toolSlot, bool) {
	if t.byIndex == nil {
		t.byIndex = map[int]*toolSlot{}
	}
	if s := t.byIndex[d.index]; s != nil && (d.id == "" || d.id == s.id) {
		return s, false
	}
	s := &toolSlot{n: t.count, id: d.id, name: d.name}
	t.count++
	t.byIndex[d.index] = s
	return s, true
}

// ChatToAnthropicStream translates chat.completion.chunk payloads into an
// Anthropic event stream (10-gateway-api §6.6). It is not safe for
// concurrent use.
type ChatToAnthropicStream struct {
	model    string
	started  bool
	msgID    string
	open     int    // index of the open content block, -1 when none
	openKind string // text, thinking, tool_use
	next     int    // next content block index
	tools    toolSlots
	finished bool
	finish   string
	usage    Usage
	done     bool
}

var _ Stream = (*ChatToAnthropicStream)(nil)

// NewChatToAnthropicStream starts a translator whose message carries
// requestedModel as `model` (empty: the upstream chunk's model).
func NewChatToAnthropicStream(requestedModel string) *ChatToAnthropicStream {
	return &ChatToAnthropicStream{model: requestedModel, open: -1}
}

// Feed translates one chat chunk payload (or `[DONE]`). The terminal
// message_delta is held until usage is known (a usage chunk or [DONE]);
// message_stop yields done, after which the gateway writes nothing more.
// [DONE] before any finish_reason is ErrIncomplete.
func (s *ChatToAnthropicStream) Feed(event string, data []byte) ([][]byte, bool, bool, error) {
	if s.done {
		return nil, false, true, nil
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, false, false, nil
	}
	ev, err := parseChunk(data)
	if err != nil {
		return nil, false, false, err
	}
	if ev.doneMarker {
		if !s.finished {
			return nil, false, false, ErrIncomplete
		}
		return s.end(), false, true, nil
	}
	var frames [][]byte
	if !s.started {
		s.started = true
		s.msgID = "msg_" + ev.id
		if s.model == "" {
			s.model = ev.model
		}
		frames = append(frames, eventFrame("message_start", object{{"type", "message_start"}, {"message", object{
			{"id", s.msgID}, {"type", "message"}, {"role", "assistant"}, {"model", s.model},
			{"content", []any{}}, {"stop_reason", nil}, {"stop_sequence", nil},
			{"usage", object{{"input_tokens", 0}, {"output_tokens", 0}}},
		}}}))
	}
	if ev.usage != nil {
		s.usage = *ev.usage
	}
	if !s.finished {
		if ev.reasoning != "" {
			frames = s.openBlock(frames, "thinking", object{{"type", "thinking"}, {"thinking", ""}, {"signature", ""}})
			frames = append(frames, s.delta(s.open, object{{"type", "thinking_delta"}, {"thinking", ev.reasoning}}))
		}
		if ev.text != "" {
			frames = s.openBlock(frames, "text", object{{"type", "text"}, {"text", ""}})
			frames = append(frames, s.delta(s.open, object{{"type", "text_delta"}, {"text", ev.text}}))
		}
		for _, d := range ev.tools {
			slot, isNew := s.tools.lookup(d)
			if isNew {
				if slot.id == "" {
					slot.id = "toolu_" + idSuffix(s.msgID) + "_" + strconv.Itoa(slot.n)
				}
				frames = s.closeBlock(frames)
				slot.block = s.next
				s.next++
				s.open, s.openKind = slot.block, "tool_use"
				frames = append(frames, eventFrame("content_block_start", object{{"type", "content_block_start"}, {"index", slot.block},
					{"content_block", object{{"type", "tool_use"}, {"id", slot.id}, {"name", slot.name}, {"input", object{}}}}}))
			}
			if d.args != "" {
				frames = append(frames, s.delta(slot.block, object{{"type", "input_json_delta"}, {"partial_json", d.args}}))
			}
		}
		if ev.finish != nil {
			frames = s.closeBlock(frames)
			s.finished, s.finish = true, *ev.finish
		}
	}
	if s.finished && ev.usage != nil {
		frames = append(frames, s.end()...)
		return frames, ev.useful, true, nil
	}
	return frames, ev.useful, false, nil
}

// openBlock makes a block of kind the open one, closing another kind.
func (s *ChatToAnthropicStream) openBlock(frames [][]byte, kind string, start object) [][]byte {
	if s.open >= 0 && s.openKind == kind {
		return frames
	}
	frames = s.closeBlock(frames)
	s.open, s.openKind = s.next, kind
	s.next++
	return append(frames, eventFrame("content_block_start", object{{"type", "content_block_start"}, {"index", s.open}, {"content_block", start}}))
}

func (s *ChatToAnthropicStream) closeBlock(frames [][]byte) [][]byte {
	if s.open < 0 {
		return frames
	}
	frames = append(frames, eventFrame("content_block_stop", object{{"type", "content_block_stop"}, {"index", s.open}}))
	s.open, s.openKind = -1, ""
	return frames
}

func (s *ChatToAnthropicStream) delta(index int, d object) []byte {
	return eventFrame("content_block_delta", object{{"type", "content_block_delta"}, {"index", index}, {"delta", d}})
}

// end writes message_delta with the stop reason and usage, then message_stop.
func (s *ChatToAnthropicStream) end() [][]byte {
	s.done = true
	in := s.usage.PromptTokens - s.usage.CachedTokens
	if in < 0 {
		in = 0
	}
	usage := object{{"input_tokens", in}, {"output_tokens", s.usage.CompletionTokens}}
	if s.usage.CachedTokens > 0 {
		usage = append(usage, field{"cache_read_input_tokens", s.usage.CachedTokens})
	}
	return [][]byte{
		eventFrame("message_delta", object{{"type", "message_delta"},
			{"delta", object{{"stop_reason", finishToAnthropic(s.finish)}, {"stop_sequence", nil}}}, {"usage", usage}}),
		eventFrame("message_stop", object{{"type", "message_stop"}}),
	}
}

// Usage returns the usage reported so far.
func (s *ChatToAnthropicStream) Usage() Usage { return s.usage }

// ErrorFrame is the Anthropic in-band error event of §7.4. An empty
// errType becomes api_error.
func (s *ChatToAnthropicStream) ErrorFrame(code, message, errType string) []byte {
	if errType == "" {
		errType = "api_error"
	}
	return eventFrame("error", object{{"type", "error"}, {"error", object{{"type", errType}, {"message", message}, {"code", code}}}})
}
