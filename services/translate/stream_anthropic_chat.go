package translate

import (
	"bytes"
	"encoding/json"
	"time"
)

// Chat chunk shapes.

type chatChunk struct {
	ID      string        `json:"id"`
	Object  string        `json:"object"`
	Created int64         `json:"created"`
	Model   string        `json:"model"`
	Choices []chunkChoice `json:"choices"`
	Usage   *chatUsage    `json:"usage,omitempty"`
}

type chunkChoice struct {
	Index        int        `json:"index"`
	Delta        chunkDelta `json:"delta"`
	Logprobs     any        `json:"logprobs"`
	FinishReason *string    `json:"finish_reason"`
}

type chunkDelta struct {
	Role             string          `json:"role,omitempty"`
	Content          *string         `json:"content,omitempty"`
	ReasoningContent *string         `json:"reasoning_content,omitempty"`
	ToolCalls        []chunkToolCall `json:"tool_calls,omitempty"`
}

type chunkToolCall struct {
	Index    int           `json:"index"`
	ID       string        `json:"id,omitempty"`
	Type     string        `json:"type,omitempty"`
	Function chunkFunction `json:"function"`
}

type chunkFunction struct {
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments"`
}

// aStreamEvent is one Anthropic stream event.
type aStreamEvent struct {
	Type         string       `json:"type"`
	Message      *aInResponse `json:"message"`
	Index        int          `json:"index"`
	ContentBlock *aInBlock    `json:"content_block"`
	Delta        *struct {
		Type        string  `json:"type"`
		Text        string  `json:"text"`
		PartialJSON string  `json:"partial_json"`
		Thinking    string  `json:"thinking"`
		StopReason  *string `json:"stop_reason"`
	} `json:"delta"`
	Usage *aInUsage `json:"usage"`
	Error *struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
}

// aBlockState remembers what an open Anthropic content block became.
type aBlockState struct {
	kind      string // text, thinking, tool_use, other
	toolIndex int    // chat tool_calls index of a tool_use block
	input     json.RawMessage
	gotDelta  bool
}

// AnthropicToChatStream translates an Anthropic event stream into OpenAI
// chat.completion.chunk frames (10-gateway-api §6.6). Set the exported
// fields before the first Feed. It is not safe for concurrent use.
type AnthropicToChatStream struct {
	// IncludeUsage emits the usage-only chunk (`choices: []`) before the
	// end. The gateway sets it from the client's
	// stream_options.include_usage; it defaults to true so that a chained
	// translator (Compose) always learns the usage.
	IncludeUsage bool
	// Now stamps `created` at the first event; nil means time.Now.
	Now func() time.Time

	model      string
	id         string
	created    int64
	started    bool
	blocks     map[int]*aBlockState
	tools      int
	usage      aInUsage
	stopReason string
	finishSent bool
	done       bool
}

var _ Stream = (*AnthropicToChatStream)(nil)

// NewAnthropicToChatStream starts a translator whose chunks carry
// requestedModel as `model` (empty: the upstream's model from message_start).
func NewAnthropicToChatStream(requestedModel string) *AnthropicToChatStream {
	return &AnthropicToChatStream{IncludeUsage: true, model: requestedModel, blocks: map[int]*aBlockState{}}
}

// Feed translates one Anthropic event. The event type is read from the
// payload's `type` (Anthropic repeats it there), else from event.
// message_stop yields done; the gateway then writes `data: [DONE]`.
func (s *AnthropicToChatStream) Feed(event string, data []byte) ([][]byte, bool, bool, error) {
	if s.done {
		return nil, false, true, nil
	}
	data = bytes.TrimSpace(data)
	if len(data) == 0 {
		return nil, false, false, nil
	}
	var ev aStreamEvent
	if err := json.Unmarshal(data, &ev); err != nil {
		return nil, false, false, malformed("anthropic stream event")
	}
	typ := ev.Type
	if typ == "" {
		typ = event
	}
	if !s.started {
		s.started = true
		now := time.Now
		if s.Now != nil {
			now = s.Now
		}
		s.created = now().Unix()
	}
	switch typ {
	case "message_start":
		if m := ev.Message; m != nil {
			s.id = m.ID
			if s.model == "" {
				s.model = m.Model
			}
			s.usage = m.Usage
		}
		empty := ""
		return [][]byte{s.chunk(chunkDelta{Role: "assistant", Content: &empty}, nil)}, false, false, nil
	case "content_block_start":
		return s.blockStart(&ev), true, false, nil
	case "content_block_delta":
		return s.blockDelta(&ev), true, false, nil
	case "content_block_stop":
		// Some compatible upstreams put the whole input into
		// content_block_start and send no deltas; relay it once here.
		var frames [][]byte
		if st := s.blocks[ev.Index]; st != nil && st.kind == "tool_use" && !st.gotDelta && st.input != nil {
			frames = append(frames, s.toolArgs(st.toolIndex, string(st.input)))
		}
		delete(s.blocks, ev.Index)
		return frames, false, false, nil
	case "message_delta":
		frames, useful := s.messageDelta(&ev)
		return frames, useful, false, nil
	case "message_stop":
		return s.messageStop(), false, true, nil
	case "error":
		e := &UpstreamError{Type: "error", Message: "the upstream reported an error"}
		if ev.Error != nil {
			e.Type, e.Message = ev.Error.Type, ev.Error.Message
		}
		return nil, false, false, e
	}
	// ping and event types added after this was written carry nothing.
	return nil, false, false, nil
}

// blockStart opens a content block; a tool_use block announces its call.
func (s *AnthropicToChatStream) blockStart(ev *aStreamEvent) [][]byte {
	var frames [][]byte
	st := &aBlockState{kind: "other"}
	if b := ev.ContentBlock; b != nil {
		switch b.Type {
		case "text", "thinking":
			st.kind = b.Type
		case "tool_use":
			st.kind = "tool_use"
			st.toolIndex = s.tools
			s.tools++
			if obj, ok := objectJSON(b.Input); ok && string(obj) != "{}" {
				st.input = obj
			}
			frames = append(frames, s.chunk(chunkDelta{ToolCalls: []chunkToolCall{{Index: st.toolIndex, ID: b.ID, Type: "function",
				Function: chunkFunction{Name: b.Name, Arguments: ""}}}}, nil))
		}
	}
	s.blocks[ev.Index] = st
	return frames
}

// blockDelta relays text, thinking and tool-argument deltas of an open block.
func (s *AnthropicToChatStream) blockDelta(ev *aStreamEvent) [][]byte {
	st := s.blocks[ev.Index]
	if st == nil || ev.Delta == nil {
		return nil
	}
	d := ev.Delta
	switch d.Type {
	case "text_delta":
		if d.Text != "" {
			text := d.Text
			return [][]byte{s.chunk(chunkDelta{Content: &text}, nil)}
		}
	case "thinking_delta":
		if d.Thinking != "" {
			th := d.Thinking
			return [][]byte{s.chunk(chunkDelta{ReasoningContent: &th}, nil)}
		}
	case "input_json_delta":
		if st.kind == "tool_use" && d.PartialJSON != "" {
			st.gotDelta = true
			return [][]byte{s.toolArgs(st.toolIndex, d.PartialJSON)}
		}
	}
	return nil
}

// messageDelta takes the usage counts and, with a stop reason, sends the
// finish chunk once; useful reports whether the event was more than usage.
func (s *AnthropicToChatStream) messageDelta(ev *aStreamEvent) (frames [][]byte, useful bool) {
	if u := ev.Usage; u != nil {
		s.usage.OutputTokens = u.OutputTokens
		// Newer upstreams repeat the (final) input counts here.
		if u.InputTokens > 0 {
			s.usage.InputTokens = u.InputTokens
		}
		if u.CacheReadInputTokens > 0 {
			s.usage.CacheReadInputTokens = u.CacheReadInputTokens
		}
		if u.CacheCreationInputTokens > 0 {
			s.usage.CacheCreationInputTokens = u.CacheCreationInputTokens
		}
	}
	if ev.Delta == nil || ev.Delta.StopReason == nil {
		return nil, false
	}
	if s.finishSent {
		return nil, true
	}
	s.stopReason = *ev.Delta.StopReason
	return [][]byte{s.finish()}, true
}

// messageStop ends the stream: the finish chunk if none went yet, then the
// usage-only chunk when the client asked for usage.
func (s *AnthropicToChatStream) messageStop() [][]byte {
	var frames [][]byte
	if !s.finishSent {
		frames = append(frames, s.finish())
	}
	if s.IncludeUsage {
		c := s.base()
		c.Choices = []chunkChoice{}
		c.Usage = chatUsageOf(s.usage.usage())
		frames = append(frames, dataFrame(c))
	}
	s.done = true
	return frames
}

func (s *AnthropicToChatStream) finish() []byte {
	s.finishSent = true
	reason := anthropicToFinish(s.stopReason)
	return s.chunk(chunkDelta{}, &reason)
}

func (s *AnthropicToChatStream) toolArgs(index int, args string) []byte {
	return s.chunk(chunkDelta{ToolCalls: []chunkToolCall{{Index: index, Function: chunkFunction{Arguments: args}}}}, nil)
}

func (s *AnthropicToChatStream) base() chatChunk {
	return chatChunk{ID: s.id, Object: "chat.completion.chunk", Created: s.created, Model: s.model}
}

func (s *AnthropicToChatStream) chunk(d chunkDelta, finish *string) []byte {
	c := s.base()
	c.Choices = []chunkChoice{{Index: 0, Delta: d, FinishReason: finish}}
	return dataFrame(c)
}

// Usage returns the usage reported so far (§6.5 Anthropic→chat).
func (s *AnthropicToChatStream) Usage() Usage { return s.usage.usage() }

// ErrorFrame is the chat in-band error frame of §7.4.
func (s *AnthropicToChatStream) ErrorFrame(code, message, errType string) []byte {
	return chatErrorFrame(code, message, errType)
}

func chatErrorFrame(code, message, errType string) []byte {
	if errType == "" {
		errType = "server_error"
	}
	return dataFrame(object{{"error", object{{"message", message}, {"type", errType}, {"code", code}, {"param", nil}}}})
}

// dataFrame is `data: <json>\n\n`.
func dataFrame(v any) []byte {
	b := mustJSON(v)
	f := make([]byte, 0, len(b)+8)
	f = append(f, "data: "...)
	f = append(f, b...)
	return append(f, '\n', '\n')
}

// eventFrame is `event: <name>\ndata: <json>\n\n`.
func eventFrame(name string, v any) []byte {
	b := mustJSON(v)
	f := make([]byte, 0, len(b)+len(name)+16)
	f = append(f, "event: "...)
	f = append(f, name...)
	f = append(f, "\ndata: "...)
	f = append(f, b...)
	return append(f, '\n', '\n')
}
