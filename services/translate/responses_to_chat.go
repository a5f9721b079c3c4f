package translate

import (
	"encoding/json"
	"strings"
)

// Responses request shapes read by ResponsesToChat.

type respInItem struct {
	Type      string          `json:"type"`
	Role      string          `json:"role"`
	Content   json.RawMessage `json:"content"`
	ID        string          `json:"id"`
	CallID    string          `json:"call_id"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
	Output    json.RawMessage `json:"output"`
}

type respInPart struct {
	Type     string `json:"type"`
	Text     string `json:"text"`
	Refusal  string `json:"refusal"`
	ImageURL string `json:"image_url"`
	FileID   string `json:"file_id"`
	Detail   string `json:"detail"`
}

type respInTool struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
	Strict      *bool           `json:"strict"`
}

// responsesToChatHandled are the Responses fields §6.4 maps or drops
// silently; background is the caller's business (§5.3).
var responsesToChatHandled = map[string]bool{
	"model": true, "input": true, "instructions": true, "tools": true, "tool_choice": true,
	"max_output_tokens": true, "text": true, "reasoning": true, "temperature": true, "top_p": true,
	"parallel_tool_calls": true, "user": true, "prompt_cache_key": true, "stream": true,
	"store": true, "include": true, "truncation": true, "service_tier": true, "metadata": true,
	"background": true, "previous_response_id": true,
}

// ResponsesToChat translates an OpenAI Responses request into a chat
// request for model (10-gateway-api §6.4), catalogue flags at their
// defaults. `background` is ignored here: the caller signals it (§5.3). A
// non-empty previous_response_id yields an *UnsupportedError: only native
// targets can honour it.
func ResponsesToChat(body map[string]json.RawMessage, model string) ([]byte, []Warning, error) {
	return ResponsesToChatWith(body, model, Flags{})
}

// ResponsesToChatWith is ResponsesToChat for a provider with the given
// catalogue flags.
func ResponsesToChatWith(body map[string]json.RawMessage, model string, flags Flags) ([]byte, []Warning, error) {
	var w warnSet
	out := chatRequest{Model: model}

	if raw, ok := present(body, "previous_response_id"); ok {
		if id, _ := asString(raw); id != "" {
			return nil, nil, &UnsupportedError{Param: "previous_response_id", Message: "Only targets with a native Responses API can continue a stored response."}
		}
	}
	if err := responsesInputToChat(body, &out, &w); err != nil {
		return nil, nil, err
	}
	if err := responsesOptionsToChat(body, &out, &w, flags); err != nil {
		return nil, nil, err
	}
	if err := responsesToolsToChat(body, &out, &w); err != nil {
		return nil, nil, err
	}
	dropUnhandled(body, responsesToChatHandled, &w)
	b, err := marshal(out)
	if err != nil {
		return nil, nil, err
	}
	return b, w.list, nil
}

// responsesInputToChat turns instructions and input into chat messages.
func responsesInputToChat(body map[string]json.RawMessage, out *chatRequest, w *warnSet) error {
	if raw, ok := present(body, "instructions"); ok {
		s, isStr := asString(raw)
		if !isStr {
			return malformed("instructions")
		}
		if s != "" {
			out.Messages = append(out.Messages, chatMessage{Role: "system", Content: s})
		}
	}
	raw, ok := present(body, "input")
	if !ok {
		return malformed("input")
	}
	if s, isStr := asString(raw); isStr {
		out.Messages = append(out.Messages, chatMessage{Role: "user", Content: s})
	} else {
		var items []respInItem
		if json.Unmarshal(raw, &items) != nil {
			return malformed("input")
		}
		msgs, err := responsesItemsToChat(items, w)
		if err != nil {
			return err
		}
		out.Messages = append(out.Messages, msgs...)
	}
	if out.Messages == nil {
		out.Messages = []chatMessage{}
	}
	return nil
}

// responsesOptionsToChat carries over the generation options: token limit,
// text format, reasoning, sampling, tool parallelism, user, cache key and
// stream.
func responsesOptionsToChat(body map[string]json.RawMessage, out *chatRequest, w *warnSet, flags Flags) error {
	if raw, ok := present(body, "max_output_tokens"); ok {
		var n int64
		if json.Unmarshal(raw, &n) != nil || n <= 0 {
			return malformed("max_output_tokens")
		}
		out.setMaxTokens(n, flags)
	}
	if raw, ok := present(body, "text"); ok {
		if err := responsesTextToChat(raw, out, w); err != nil {
			return err
		}
	}
	if raw, ok := present(body, "reasoning"); ok {
		var r struct {
			Effort          string          `json:"effort"`
			Summary         json.RawMessage `json:"summary"`
			GenerateSummary json.RawMessage `json:"generate_summary"`
		}
		if json.Unmarshal(raw, &r) != nil {
			return malformed("reasoning")
		}
		out.ReasoningEffort = r.Effort
		if !isNull(r.Summary) || !isNull(r.GenerateSummary) {
			w.paramDropped("reasoning.summary")
		}
	}
	var err error
	if out.Temperature, err = floatField(body, "temperature"); err != nil {
		return err
	}
	if out.TopP, err = floatField(body, "top_p"); err != nil {
		return err
	}
	if raw, ok := present(body, "parallel_tool_calls"); ok {
		var p bool
		if json.Unmarshal(raw, &p) != nil {
			return malformed("parallel_tool_calls")
		}
		out.ParallelToolCalls = &p
	}
	if raw, ok := present(body, "user"); ok {
		out.User, _ = asString(raw)
	}
	if raw, ok := present(body, "prompt_cache_key"); ok {
		out.PromptCacheKey, _ = asString(raw)
	}
	if raw, ok := present(body, "stream"); ok {
		if json.Unmarshal(raw, &out.Stream) != nil {
			return malformed("stream")
		}
		if out.Stream {
			// The synthesised response.completed needs the usage.
			out.StreamOptions = &chatStreamOptions{IncludeUsage: true}
		}
	}
	return nil
}

func responsesItemsToChat(items []respInItem, w *warnSet) ([]chatMessage, error) {
	var out []chatMessage
	// lastAssistant is the index of an assistant message that consecutive
	// function_call items may join, or -1.
	lastAssistant := -1
	for _, it := range items {
		typ := it.Type
		if typ == "" && it.Role != "" {
			typ = "message"
		}
		switch typ {
		case "message":
			msg, keep, err := responsesMessageToChat(it, w)
			if err != nil {
				return nil, err
			}
			if !keep {
				continue
			}
			out = append(out, msg)
			lastAssistant = -1
			if msg.Role == "assistant" {
				lastAssistant = len(out) - 1
			}
		case "function_call":
			id := it.CallID
			if id == "" {
				id = it.ID
			}
			call := chatToolCall{ID: id, Type: "function", Function: chatFunctionCall{Name: it.Name, Arguments: rawArguments(it.Arguments)}}
			if lastAssistant < 0 {
				out = append(out, chatMessage{Role: "assistant"})
				lastAssistant = len(out) - 1
			}
			out[lastAssistant].ToolCalls = append(out[lastAssistant].ToolCalls, call)
		case "function_call_output":
			content, err := responsesOutputText(it.Output, w)
			if err != nil {
				return nil, err
			}
			out = append(out, chatMessage{Role: "tool", ToolCallID: it.CallID, Content: content})
			lastAssistant = -1
		case "reasoning":
			// Reasoning items only matter to the model that wrote them.
		default: // item_reference, custom_tool_call, web_search_call, …
			w.contentDropped(partKind(typ))
		}
	}
	// An assistant message that got only tool calls has content null.
	for i := range out {
		if out[i].Role == "assistant" && out[i].Content == "" && len(out[i].ToolCalls) > 0 {
			out[i].Content = nil
		}
	}
	return out, nil
}

func responsesMessageToChat(it respInItem, w *warnSet) (chatMessage, bool, error) {
	switch it.Role {
	case "user", "assistant", "system", "developer":
	default:
		return chatMessage{}, false, malformed("input[].role")
	}
	var parts []respInPart
	if s, ok := asString(it.Content); ok {
		parts = []respInPart{{Type: "input_text", Text: s}}
	} else if !isNull(it.Content) && json.Unmarshal(it.Content, &parts) != nil {
		return chatMessage{}, false, malformed("input[].content")
	}
	if it.Role != "user" {
		// Assistant, system and developer content is text only.
		var texts []string
		for _, p := range parts {
			switch p.Type {
			case "input_text", "output_text", "text":
				texts = append(texts, p.Text)
			case "refusal":
				texts = append(texts, p.Refusal)
			default:
				w.contentDropped(partKind(p.Type))
			}
		}
		text := strings.Join(texts, "")
		if text == "" && it.Role != "assistant" {
			return chatMessage{}, false, nil
		}
		return chatMessage{Role: it.Role, Content: text}, true, nil
	}
	var out []any
	for _, p := range parts {
		switch p.Type {
		case "input_text", "output_text", "text":
			out = append(out, chatTextPart{Type: "text", Text: p.Text})
		case "refusal":
			out = append(out, chatTextPart{Type: "text", Text: p.Refusal})
		case "input_image":
			if p.ImageURL == "" {
				w.contentDropped("input_image") // file_id images need OpenAI's file store
				continue
			}
			out = append(out, chatImagePart{Type: "image_url", ImageURL: chatImageURL{URL: p.ImageURL, Detail: p.Detail}})
		default: // input_file, input_audio, …
			w.contentDropped(partKind(p.Type))
		}
	}
	if len(out) == 0 {
		return chatMessage{}, false, nil
	}
	return chatMessage{Role: "user", Content: partsContent(out)}, true, nil
}

// responsesOutputText reads a function_call_output `output`: a string, or
// content parts of which the text ones are kept.
func responsesOutputText(raw json.RawMessage, w *warnSet) (string, error) {
	if isNull(raw) {
		return "", nil
	}
	if s, ok := asString(raw); ok {
		return s, nil
	}
	var parts []respInPart
	if json.Unmarshal(raw, &parts) != nil {
		return "", malformed("input[].output")
	}
	var texts []string
	for _, p := range parts {
		switch p.Type {
		case "input_text", "output_text", "text":
			texts = append(texts, p.Text)
		default:
			w.contentDropped(partKind(p.Type))
		}
	}
	return strings.Join(texts, ""), nil
}

func responsesTextToChat(raw json.RawMessage, out *chatRequest, w *warnSet) error {
	var t struct {
		Format *struct {
			Type        string          `json:"type"`
			Name        string          `json:"name"`
			Description string          `json:"description"`
			Schema      json.RawMessage `json:"schema"`
			Strict      *bool           `json:"strict"`
		} `json:"format"`
		Verbosity json.RawMessage `json:"verbosity"`
	}
	if json.Unmarshal(raw, &t) != nil {
		return malformed("text")
	}
	if f := t.Format; f != nil {
		switch f.Type {
		case "json_schema":
			out.ResponseFormat = &chatRespFormat{Type: "json_schema", JSONSchema: &chatJSONSchema{Name: f.Name, Description: f.Description, Schema: f.Schema, Strict: f.Strict}}
		case "json_object":
			out.ResponseFormat = &chatRespFormat{Type: "json_object"}
		case "text", "":
		default:
			w.paramDropped("text.format")
		}
	}
	if !isNull(t.Verbosity) {
		w.paramDropped("text.verbosity")
	}
	return nil
}

func responsesToolsToChat(body map[string]json.RawMessage, out *chatRequest, w *warnSet) error {
	if raw, ok := present(body, "tools"); ok {
		var tools []respInTool
		if json.Unmarshal(raw, &tools) != nil {
			return malformed("tools")
		}
		for _, t := range tools {
			if t.Type != "function" {
				w.paramDropped("tools." + partKind(t.Type))
				continue
			}
			params, _ := objectJSON(t.Parameters)
			out.Tools = append(out.Tools, chatTool{Type: "function",
				Function: chatFunctionDef{Name: t.Name, Description: t.Description, Parameters: params, Strict: t.Strict}})
		}
	}
	raw, ok := present(body, "tool_choice")
	if !ok {
		return nil
	}
	if s, isStr := asString(raw); isStr {
		out.ToolChoice = s
		return nil
	}
	var tc struct {
		Type string `json:"type"`
		Name string `json:"name"`
	}
	if json.Unmarshal(raw, &tc) != nil {
		return malformed("tool_choice")
	}
	if tc.Type == "function" && tc.Name != "" {
		out.ToolChoice = namedToolChoice(tc.Name)
	} else {
		w.paramDropped("tool_choice")
	}
	return nil
}
