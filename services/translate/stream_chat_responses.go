package translate

import (
	"bytes"
	"strconv"
	"time"
)

// respItem is one output item of a synthesised Responses stream.
type respItem struct {
	id     string
	done   bool
	isCall bool
	text   []byte    // message text
	call   *toolSlot // function call
}

func (it *respItem) render() any {
	status := "in_progress"
	if it.done {
		status = "completed"
	}
	if it.isCall {
		return respFunctionCall{ID: it.id, Type: "function_call", Status: status, Arguments: string(it.call.args), CallID: it.call.id, Name: it.call.name}
	}
	content := []respOutputText{}
	if it.done || len(it.text) > 0 {
		content = append(content, respOutputText{Type: "output_text", Text: string(it.text), Annotations: []any{}})
	}
	return respMessageItem{ID: it.id, Type: "message", Status: status, Role: "assistant", Content: content}
}

// ChatToResponsesStream synthesises an OpenAI Responses event stream from
// chat.completion.chunk payloads (10-gateway-api §6.7). Every frame is
// `event: <type>\ndata: <json>\n\n` with a sequence_number from 0; the
// stream ends with response.completed or response.incomplete and never
// uses [DONE]. It is not safe for concurrent use.
type ChatToResponsesStream struct {
	// Now stamps created_at at the first event; nil means time.Now.
	Now func() time.Time

	model     string
	requestID string
	ids       respIDs
	seq       int
	started   bool
	createdAt int64
	items     []*respItem
	open      *respItem
	messages  int
	tools     toolSlots
	finished  bool
	finish    string
	usage     Usage
	hasUsage  bool
	done      bool
}

var _ Stream = (*ChatToResponsesStream)(nil)

// NewChatToResponsesStream starts a translator whose response carries
// requestedModel as `model` (empty: the upstream chunk's model) and ids
// derived from requestID (req_…; empty: from the upstream chunk id).
func NewChatToResponsesStream(requestedModel, requestID string) *ChatToResponsesStream {
	return &ChatToResponsesStream{model: requestedModel, requestID: requestID}
}

// Feed translates one chat chunk payload (or `[DONE]`). The terminal
// response.completed / response.incomplete is held until usage is known (a
// usage chunk or [DONE]) and yields done. [DONE] before any finish_reason
// is ErrIncomplete.
func (s *ChatToResponsesStream) Feed(event string, data []byte) ([][]byte, bool, bool, error) {
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
		return s.end(nil), false, true, nil
	}
	var frames [][]byte
	if !s.started {
		frames = s.start(frames, ev.id, ev.model)
	}
	if ev.usage != nil {
		s.usage, s.hasUsage = *ev.usage, true
	}
	if !s.finished {
		if ev.text != "" {
			frames = s.appendText(frames, ev.text)
		}
		for _, d := range ev.tools {
			frames = s.appendTool(frames, d)
		}
		if ev.finish != nil {
			frames = s.closeOpen(frames)
			s.finished, s.finish = true, *ev.finish
		}
	}
	if s.finished && ev.usage != nil {
		return s.end(frames), ev.useful, true, nil
	}
	return frames, ev.useful, false, nil
}

func (s *ChatToResponsesStream) start(frames [][]byte, upstreamID, upstreamModel string) [][]byte {
	s.started = true
	now := time.Now
	if s.Now != nil {
		now = s.Now
	}
	s.createdAt = now().Unix()
	s.ids = newRespIDs(s.requestID, upstreamID)
	if s.model == "" {
		s.model = upstreamModel
	}
	obj := s.object("in_progress", nil)
	frames = append(frames, s.event("response.created", field{"response", obj}))
	return append(frames, s.event("response.in_progress", field{"response", obj}))
}

// event builds one frame: type and sequence_number first, then fields.
func (s *ChatToResponsesStream) event(typ string, fields ...field) []byte {
	o := make(object, 0, len(fields)+2)
	o = append(o, field{"type", typ}, field{"sequence_number", s.seq})
	s.seq++
	return eventFrame(typ, append(o, fields...))
}

func (s *ChatToResponsesStream) object(status string, usage *respUsage) respObject {
	output := make([]any, 0, len(s.items))
	for _, it := range s.items {
		output = append(output, it.render())
	}
	return respObject{ID: s.ids.response(), Object: "response", CreatedAt: s.createdAt, Status: status,
		Model: s.model, Output: output, Usage: usage}
}

func (s *ChatToResponsesStream) appendText(frames [][]byte, text string) [][]byte {
	if s.open == nil || s.open.isCall {
		frames = s.closeOpen(frames)
		it := &respItem{id: s.ids.message(s.messages)}
		s.messages++
		s.items = append(s.items, it)
		s.open = it
		idx := len(s.items) - 1
		frames = append(frames, s.event("response.output_item.added", field{"output_index", idx}, field{"item", it.render()}))
		frames = append(frames, s.event("response.content_part.added", field{"item_id", it.id}, field{"output_index", idx},
			field{"content_index", 0}, field{"part", respOutputText{Type: "output_text", Text: "", Annotations: []any{}}}))
	}
	s.open.text = append(s.open.text, text...)
	return append(frames, s.event("response.output_text.delta", field{"item_id", s.open.id}, field{"output_index", len(s.items) - 1},
		field{"content_index", 0}, field{"delta", text}, field{"logprobs", []any{}}))
}

func (s *ChatToResponsesStream) appendTool(frames [][]byte, d toolDelta) [][]byte {
	slot, isNew := s.tools.lookup(d)
	if isNew {
		frames = s.closeOpen(frames)
		if slot.id == "" {
			slot.id = "call_" + s.ids.suffix + "_" + strconv.Itoa(slot.n)
		}
		it := &respItem{id: s.ids.call(slot.n), isCall: true, call: slot}
		s.items = append(s.items, it)
		slot.block = len(s.items) - 1
		s.open = it
		frames = append(frames, s.event("response.output_item.added", field{"output_index", slot.block}, field{"item", it.render()}))
	}
	if d.args == "" {
		return frames
	}
	slot.args = append(slot.args, d.args...)
	return append(frames, s.event("response.function_call_arguments.delta", field{"item_id", s.items[slot.block].id},
		field{"output_index", slot.block}, field{"delta", d.args}))
}

// closeOpen finishes the open item with its .done events.
func (s *ChatToResponsesStream) closeOpen(frames [][]byte) [][]byte {
	it := s.open
	if it == nil {
		return frames
	}
	s.open = nil
	it.done = true
	idx := -1
	for i, x := range s.items {
		if x == it {
			idx = i
		}
	}
	if it.isCall {
		frames = append(frames, s.event("response.function_call_arguments.done", field{"item_id", it.id}, field{"output_index", idx},
			field{"name", it.call.name}, field{"arguments", string(it.call.args)}))
	} else {
		text := string(it.text)
		frames = append(frames, s.event("response.output_text.done", field{"item_id", it.id}, field{"output_index", idx},
			field{"content_index", 0}, field{"text", text}, field{"logprobs", []any{}}))
		frames = append(frames, s.event("response.content_part.done", field{"item_id", it.id}, field{"output_index", idx},
			field{"content_index", 0}, field{"part", respOutputText{Type: "output_text", Text: text, Annotations: []any{}}}))
	}
	return append(frames, s.event("response.output_item.done", field{"output_index", idx}, field{"item", it.render()}))
}

// end writes response.completed or response.incomplete with the full object.
func (s *ChatToResponsesStream) end(frames [][]byte) [][]byte {
	s.done = true
	status, incomplete := respStatus(s.finish)
	obj := s.object(status, respUsageOf(s.usage))
	obj.IncompleteDetails = incomplete
	return append(frames, s.event("response."+status, field{"response", obj}))
}

// Usage returns the usage reported so far.
func (s *ChatToResponsesStream) Usage() Usage { return s.usage }

// ErrorFrame is the Responses in-band failure of §7.4: response.failed
// carrying the object so far with status failed. errType is not part of
// the Responses error object and is ignored.
func (s *ChatToResponsesStream) ErrorFrame(code, message, errType string) []byte {
	if !s.started {
		now := time.Now
		if s.Now != nil {
			now = s.Now
		}
		s.createdAt = now().Unix()
		s.ids = newRespIDs(s.requestID, "")
	}
	s.done = true
	obj := s.object("failed", nil)
	if s.hasUsage {
		obj.Usage = respUsageOf(s.usage)
	}
	obj.Error = &respError{Code: code, Message: message}
	return s.event("response.failed", field{"response", obj})
}
