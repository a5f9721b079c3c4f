package translate

import (
	"encoding/json"
	"strings"
)

// Chat request shapes written by AnthropicToChat and ResponsesToChat.

type chatRequest struct {
	Model               string             `json:"model"`
	Messages            []chatMessage      `json:"messages"`
	MaxTokens           *int64             `json:"max_tokens,omitempty"`
	MaxCompletionTokens *int64             `json:"max_completion_tokens,omitempty"`
	Temperature         *float64           `json:"temperature,omitempty"`
	TopP                *float64           `json:"top_p,omitempty"`
	Stop                []string           `json:"stop,omitempty"`
	User                string             `json:"user,omitempty"`
	ReasoningEffort     string             `json:"reasoning_effort,omitempty"`
	ResponseFormat      *chatRespFormat    `json:"response_format,omitempty"`
	Tools               []chatTool         `json:"tools,omitempty"`
	ToolChoice          any                `json:"tool_choice,omitempty"`
	ParallelToolCalls   *bool              `json:"parallel_tool_calls,omitempty"`
	PromptCacheKey      string             `json:"prompt_cache_key,omitempty"`
	Stream              bool               `json:"stream,omitempty"`
	StreamOptions       *chatStreamOptions `json:"stream_options,omitempty"`
}

type chatStreamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

type chatMessage struct {
	Role       string         `json:"role"`
	Content    any            `json:"content"` // string, []any of parts, or nil (null)
	ToolCalls  []chatToolCall `json:"tool_calls,omitempty"`
	ToolCallID string         `json:"tool_call_id,omitempty"`
}

type chatToolCall struct {
	ID       string           `json:"id"`
	Type     string           `json:"type"`
	Function chatFunctionCall `json:"function"`
}

type chatFunctionCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

type chatTextPart struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

type chatImagePart struct {
	Type     string       `json:"type"`
	ImageURL chatImageURL `json:"image_url"`
}

type chatImageURL struct {
	URL    string `json:"url"`
	Detail string `json:"detail,omitempty"`
}

type chatTool struct {
	Type     string          `json:"type"`
	Function chatFunctionDef `json:"function"`
}

type chatFunctionDef struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
	Strict      *bool           `json:"strict,omitempty"`
}

type chatNamedToolChoice struct {
	Type     string `json:"type"`
	Function struct {
		Name string `json:"name"`
	} `json:"function"`
}

func namedToolChoice(name string) chatNamedToolChoice {
	c := chatNamedToolChoice{Type: "function"}
	c.Function.Name = name
	return c
}

type chatRespFormat struct {
	Type       string          `json:"type"`
	JSONSchema *chatJSONSchema `json:"json_schema,omitempty"`
}

type chatJSONSchema struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Schema      json.RawMessage `json:"schema,omitempty"`
	Strict      *bool           `json:"strict,omitempty"`
}

// setMaxTokens writes the token limit under the name the upstream wants.
func (r *chatRequest) setMaxTokens(n int64, flags Flags) {
	if flags.MaxCompletionTokens {
		r.MaxCompletionTokens = &n
	} else {
		r.MaxTokens = &n
	}
}

// partsContent is the chat `content` for parts: a lone text part becomes a
// plain string, which every openai-compatible upstream accepts.
func partsContent(parts []any) any {
	if len(parts) == 1 {
		if t, ok := parts[0].(chatTextPart); ok {
			return t.Text
		}
	}
	return parts
}

// Anthropic request shapes read by AnthropicToChat.

type aInBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	Source    *aInSource      `json:"source"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	IsError   bool            `json:"is_error"`
	Thinking  string          `json:"thinking"`
	Signature string          `json:"signature"`
}

type aInSource struct {
	Type      string `json:"type"`
	MediaType string `json:"media_type"`
	Data      string `json:"data"`
	URL       string `json:"url"`
}

type aInMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

type aInTool struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"`
}

var anthropicToChatHandled = map[string]bool{
	"model": true, "messages": true, "system": true, "max_tokens": true, "stop_sequences": true,
	"temperature": true, "top_p": true, "metadata": true, "thinking": true, "tools": true,
	"tool_choice": true, "stream": true, "cache_control": true,
}

// AnthropicToChat translates an Anthropic Messages request into an OpenAI
// chat request for model (10-gateway-api §6.3), with the catalogue flags at
// their defaults (max_tokens; thinking dropped). Use AnthropicToChatWith
// for a provider that sets maxCompletionTokens or reasoningEffort.
func AnthropicToChat(body map[string]json.RawMessage, model string) ([]byte, []Warning, error) {
	return AnthropicToChatWith(body, model, Flags{})
}

// AnthropicToChatWith is AnthropicToChat for a provider with the given
// catalogue flags.
func AnthropicToChatWith(body map[string]json.RawMessage, model string, flags Flags) ([]byte, []Warning, error) {
	var w warnSet
	out := chatRequest{Model: model}

	if raw, ok := present(body, "system"); ok {
		text, err := anthropicTextOnly(raw, "system", &w)
		if err != nil {
			return nil, nil, err
		}
		if text != "" {
			out.Messages = append(out.Messages, chatMessage{Role: "system", Content: text})
		}
	}
	var msgs []aInMessage
	if err := json.Unmarshal(body["messages"], &msgs); err != nil {
		return nil, nil, malformed("messages")
	}
	for _, m := range msgs {
		cm, err := anthropicMessageToChat(m, &w)
		if err != nil {
			return nil, nil, err
		}
		out.Messages = append(out.Messages, cm...)
	}
	if out.Messages == nil {
		out.Messages = []chatMessage{}
	}

	if raw, ok := present(body, "max_tokens"); ok {
		var n int64
		if json.Unmarshal(raw, &n) != nil || n <= 0 {
			return nil, nil, malformed("max_tokens")
		}
		out.setMaxTokens(n, flags)
	}
	if raw, ok := present(body, "stop_sequences"); ok {
		var stops []string
		if json.Unmarshal(raw, &stops) != nil {
			return nil, nil, malformed("stop_sequences")
		}
		if len(stops) > 4 {
			stops = stops[:4]
			w.paramDropped("stop_sequences")
		}
		out.Stop = stops
	}
	var err error
	if out.Temperature, err = floatField(body, "temperature"); err != nil {
		return nil, nil, err
	}
	if out.TopP, err = floatField(body, "top_p"); err != nil {
		return nil, nil, err
	}
	if raw, ok := present(body, "metadata"); ok {
		var md struct {
			UserID string `json:"user_id"`
		}
		_ = json.Unmarshal(raw, &md) // user_id is the only field Anthropic defines
		out.User = md.UserID
	}
	if raw, ok := present(body, "thinking"); ok {
		var th struct {
			Type         string `json:"type"`
			BudgetTokens int64  `json:"budget_tokens"`
		}
		if json.Unmarshal(raw, &th) != nil {
			return nil, nil, malformed("thinking")
		}
		if th.Type != "disabled" {
			if !flags.ReasoningEffort {
				w.paramDropped("thinking")
			} else {
				out.ReasoningEffort = effortForBudget(th.Type, th.BudgetTokens)
			}
		}
	}
	if raw, ok := present(body, "stream"); ok {
		if json.Unmarshal(raw, &out.Stream) != nil {
			return nil, nil, malformed("stream")
		}
		if out.Stream {
			out.StreamOptions = &chatStreamOptions{IncludeUsage: true}
		}
	}
	if err := anthropicToolsToChat(body, &out, &w); err != nil {
		return nil, nil, err
	}
	dropUnhandled(body, anthropicToChatHandled, &w)
	b, err := marshal(out)
	if err != nil {
		return nil, nil, err
	}
	return b, w.list, nil
}

// effortForBudget maps an Anthropic thinking budget to reasoning_effort.
// Budget-less kinds (adaptive thinking) get medium.
func effortForBudget(kind string, b int64) string {
	switch {
	case kind != "enabled":
		return "medium"
	case b < 2048:
		return "low"
	case b < 8192:
		return "medium"
	}
	return "high"
}

// anthropicBlocks decodes Anthropic `content`: a string becomes one text block.
func anthropicBlocks(raw json.RawMessage, what string) ([]aInBlock, bool, error) {
	if isNull(raw) {
		return nil, false, nil
	}
	if s, ok := asString(raw); ok {
		return []aInBlock{{Type: "text", Text: s}}, true, nil
	}
	var blocks []aInBlock
	if json.Unmarshal(raw, &blocks) != nil {
		return nil, false, malformed(what)
	}
	return blocks, false, nil
}

// anthropicTextOnly reads `system` or tool_result content: text blocks
// joined with a blank line; images and others are dropped.
func anthropicTextOnly(raw json.RawMessage, what string, w *warnSet) (string, error) {
	blocks, _, err := anthropicBlocks(raw, what)
	if err != nil {
		return "", err
	}
	var texts []string
	for _, b := range blocks {
		switch b.Type {
		case "text":
			if b.Text != "" {
				texts = append(texts, b.Text)
			}
		case "image":
			if what == "tool_result" {
				w.contentDropped("image_in_tool_result")
			} else {
				w.contentDropped("image")
			}
		default:
			w.contentDropped(partKind(b.Type))
		}
	}
	return strings.Join(texts, "\n\n"), nil
}

func anthropicMessageToChat(m aInMessage, w *warnSet) ([]chatMessage, error) {
	blocks, isString, err := anthropicBlocks(m.Content, "messages[].content")
	if err != nil {
		return nil, err
	}
	switch m.Role {
	case "user":
		if isString {
			return []chatMessage{{Role: "user", Content: blocks[0].Text}}, nil
		}
		var out []chatMessage
		var parts []any
		for _, b := range blocks {
			switch b.Type {
			case "tool_result":
				content, err := anthropicTextOnly(b.Content, "tool_result", w)
				if err != nil {
					return nil, err
				}
				if b.IsError {
					content = "Error: " + content
				}
				out = append(out, chatMessage{Role: "tool", ToolCallID: b.ToolUseID, Content: content})
			case "text":
				parts = append(parts, chatTextPart{Type: "text", Text: b.Text})
			case "image":
				if url, ok := anthropicImageURL(b.Source); ok {
					parts = append(parts, chatImagePart{Type: "image_url", ImageURL: chatImageURL{URL: url}})
				} else {
					w.contentDropped("image")
				}
			case "thinking", "redacted_thinking":
				w.contentDropped("thinking")
			default: // document, search_result, container_upload, …
				w.contentDropped(partKind(b.Type))
			}
		}
		if len(parts) > 0 {
			out = append(out, chatMessage{Role: "user", Content: partsContent(parts)})
		}
		return out, nil
	case "assistant":
		var text strings.Builder
		var calls []chatToolCall
		for _, b := range blocks {
			switch b.Type {
			case "text":
				text.WriteString(b.Text)
			case "tool_use":
				args := "{}"
				if obj, ok := objectJSON(b.Input); ok {
					args = string(obj)
				}
				calls = append(calls, chatToolCall{ID: b.ID, Type: "function", Function: chatFunctionCall{Name: b.Name, Arguments: args}})
			case "thinking", "redacted_thinking":
				w.contentDropped("thinking")
			default:
				w.contentDropped(partKind(b.Type))
			}
		}
		msg := chatMessage{Role: "assistant", ToolCalls: calls}
		switch {
		case text.Len() > 0:
			msg.Content = text.String()
		case len(calls) == 0:
			if isString {
				msg.Content = ""
				return []chatMessage{msg}, nil
			}
			return nil, nil // nothing left after drops
		}
		return []chatMessage{msg}, nil
	case "system":
		// A mid-conversation system message (Anthropic beta
		// mid-conversation-system-2026-04-07) stays at its position.
		text, err := anthropicTextOnly(m.Content, "messages[].content", w)
		if err != nil {
			return nil, err
		}
		if text == "" {
			return nil, nil
		}
		return []chatMessage{{Role: "system", Content: text}}, nil
	}
	return nil, malformed("messages[].role")
}

// anthropicImageURL turns an image source into a chat image URL.
func anthropicImageURL(src *aInSource) (string, bool) {
	if src == nil {
		return "", false
	}
	switch src.Type {
	case "base64":
		if src.MediaType == "" || src.Data == "" {
			return "", false
		}
		return "data:" + src.MediaType + ";base64," + src.Data, true
	case "url":
		return src.URL, src.URL != ""
	}
	return "", false
}

func anthropicToolsToChat(body map[string]json.RawMessage, out *chatRequest, w *warnSet) error {
	if raw, ok := present(body, "tools"); ok {
		var tools []aInTool
		if json.Unmarshal(raw, &tools) != nil {
			return malformed("tools")
		}
		for _, t := range tools {
			if t.Type != "" && t.Type != "custom" {
				w.paramDropped("tools." + t.Type)
				continue
			}
			params, ok := objectJSON(t.InputSchema)
			if !ok {
				params = json.RawMessage(`{"type":"object","properties":{}}`)
			}
			out.Tools = append(out.Tools, chatTool{Type: "function",
				Function: chatFunctionDef{Name: t.Name, Description: t.Description, Parameters: params}})
		}
	}
	raw, ok := present(body, "tool_choice")
	if !ok || len(out.Tools) == 0 {
		// Without tools chat upstreams refuse tool_choice and parallel_tool_calls.
		return nil
	}
	var tc struct {
		Type                   string `json:"type"`
		Name                   string `json:"name"`
		DisableParallelToolUse bool   `json:"disable_parallel_tool_use"`
	}
	if json.Unmarshal(raw, &tc) != nil {
		return malformed("tool_choice")
	}
	switch tc.Type {
	case "auto":
		out.ToolChoice = "auto"
	case "any":
		out.ToolChoice = "required"
	case "none":
		out.ToolChoice = "none"
	case "tool":
		out.ToolChoice = namedToolChoice(tc.Name)
	default:
		w.paramDropped("tool_choice")
	}
	if tc.DisableParallelToolUse {
		f := false
		out.ParallelToolCalls = &f
	}
	return nil
}
