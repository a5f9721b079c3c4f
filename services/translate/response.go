package translate

import (
	"encoding/json"
	"strconv"
	"strings"
)

// Chat response shapes.

type chatResponse struct {
	ID      string       `json:"id"`
	Object  string       `json:"object"`
	Created int64        `json:"created"`
	Model   string       `json:"model"`
	Choices []chatChoice `json:"choices"`
	Usage   *chatUsage   `json:"usage,omitempty"`
}

type chatChoice struct {
	Index        int            `json:"index"`
	Message      chatOutMessage `json:"message"`
	Logprobs     any            `json:"logprobs"`
	FinishReason string         `json:"finish_reason"`
}

type chatOutMessage struct {
	Role             string         `json:"role"`
	Content          *string        `json:"content"`
	ReasoningContent string         `json:"reasoning_content,omitempty"`
	ToolCalls        []chatToolCall `json:"tool_calls,omitempty"`
}

type chatUsage struct {
	PromptTokens            int64                  `json:"prompt_tokens"`
	CompletionTokens        int64                  `json:"completion_tokens"`
	TotalTokens             int64                  `json:"total_tokens"`
	PromptTokensDetails     *chatPromptDetails     `json:"prompt_tokens_details,omitempty"`
	CompletionTokensDetails *chatCompletionDetails `json:"completion_tokens_details,omitempty"`
}

type chatPromptDetails struct {
	CachedTokens int64 `json:"cached_tokens"`
}

type chatCompletionDetails struct {
	ReasoningTokens int64 `json:"reasoning_tokens"`
}

// chatInUsage is a chat `usage` as upstreams send it.
type chatInUsage struct {
	PromptTokens        int64 `json:"prompt_tokens"`
	CompletionTokens    int64 `json:"completion_tokens"`
	PromptTokensDetails *struct {
		CachedTokens int64 `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
	CompletionTokensDetails *struct {
		ReasoningTokens int64 `json:"reasoning_tokens"`
	} `json:"completion_tokens_details"`
}

func (u *chatInUsage) usage() Usage {
	if u == nil {
		return Usage{}
	}
	out := Usage{PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens}
	if u.PromptTokensDetails != nil {
		out.CachedTokens = u.PromptTokensDetails.CachedTokens
	}
	if u.CompletionTokensDetails != nil {
		out.ReasoningTokens = u.CompletionTokensDetails.ReasoningTokens
	}
	return out
}

// aInUsage is an Anthropic `usage`.
type aInUsage struct {
	InputTokens              int64 `json:"input_tokens"`
	OutputTokens             int64 `json:"output_tokens"`
	CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
	CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
}

// usage applies §6.5 Anthropic→chat: P = I+R+C, Q = O, K = R.
func (u aInUsage) usage() Usage {
	return Usage{
		PromptTokens:     u.InputTokens + u.CacheReadInputTokens + u.CacheCreationInputTokens,
		CompletionTokens: u.OutputTokens,
		CachedTokens:     u.CacheReadInputTokens,
		CacheWriteTokens: u.CacheCreationInputTokens,
	}
}

// chatUsageOf renders u as a chat `usage`.
func chatUsageOf(u Usage) *chatUsage {
	out := &chatUsage{PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens,
		TotalTokens: u.PromptTokens + u.CompletionTokens, PromptTokensDetails: &chatPromptDetails{CachedTokens: u.CachedTokens}}
	if u.ReasoningTokens > 0 {
		out.CompletionTokensDetails = &chatCompletionDetails{ReasoningTokens: u.ReasoningTokens}
	}
	return out
}

// anthropicUsageOf applies §6.5 chat→Anthropic: I = P−K, O = Q, R = K, C = 0.
func anthropicUsageOf(u Usage) object {
	in := u.PromptTokens - u.CachedTokens
	if in < 0 {
		in = 0
	}
	return object{{"input_tokens", in}, {"output_tokens", u.CompletionTokens},
		{"cache_read_input_tokens", u.CachedTokens}, {"cache_creation_input_tokens", int64(0)}}
}

// aInResponse is an Anthropic `message` (or error body).
type aInResponse struct {
	ID         string     `json:"id"`
	Type       string     `json:"type"`
	Model      string     `json:"model"`
	Content    []aInBlock `json:"content"`
	StopReason *string    `json:"stop_reason"`
	Usage      aInUsage   `json:"usage"`
	Error      *struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
}

// AnthropicToChatResponse translates a non-stream Anthropic `message` into
// an OpenAI `chat.completion` (10-gateway-api §6.5). requestedModel is
// written into `model` (empty keeps the upstream's); `created` is now.
func AnthropicToChatResponse(upstream []byte, requestedModel string) ([]byte, Usage, error) {
	b, u, _, err := AnthropicToChatResponseWith(upstream, ResponseOptions{Model: requestedModel})
	return b, u, err
}

// AnthropicToChatResponseWith is AnthropicToChatResponse with all options;
// it never produces warnings today but keeps the shape of its siblings.
func AnthropicToChatResponseWith(upstream []byte, o ResponseOptions) ([]byte, Usage, []Warning, error) {
	var in aInResponse
	if err := json.Unmarshal(upstream, &in); err != nil {
		return nil, Usage{}, nil, malformed("anthropic message")
	}
	if in.Type == "error" && in.Error != nil {
		return nil, Usage{}, nil, &UpstreamError{Type: in.Error.Type, Message: in.Error.Message}
	}
	if in.Type != "message" && in.Content == nil {
		return nil, Usage{}, nil, malformed("anthropic message")
	}
	var text, reasoning strings.Builder
	var calls []chatToolCall
	for _, b := range in.Content {
		switch b.Type {
		case "text":
			text.WriteString(b.Text)
		case "thinking":
			reasoning.WriteString(b.Thinking)
		case "tool_use":
			args := "{}"
			if obj, ok := objectJSON(b.Input); ok {
				args = string(obj)
			}
			calls = append(calls, chatToolCall{ID: b.ID, Type: "function", Function: chatFunctionCall{Name: b.Name, Arguments: args}})
		}
	}
	msg := chatOutMessage{Role: "assistant", ReasoningContent: reasoning.String(), ToolCalls: calls}
	if s := text.String(); s != "" || len(calls) == 0 {
		msg.Content = &s
	}
	stop := ""
	if in.StopReason != nil {
		stop = *in.StopReason
	}
	u := in.Usage.usage()
	out := chatResponse{ID: in.ID, Object: "chat.completion", Created: unixNow(o.Created), Model: pick(o.Model, in.Model),
		Choices: []chatChoice{{Index: 0, Message: msg, FinishReason: anthropicToFinish(stop)}},
		Usage:   chatUsageOf(u)}
	b, err := marshal(out)
	return b, u, nil, err
}

func pick(preferred, fallback string) string {
	if preferred != "" {
		return preferred
	}
	return fallback
}

// chatInResponse is a chat.completion as upstreams send it.
type chatInResponse struct {
	ID      string `json:"id"`
	Model   string `json:"model"`
	Choices []struct {
		Message struct {
			Content          json.RawMessage  `json:"content"`
			ReasoningContent json.RawMessage  `json:"reasoning_content"`
			Reasoning        json.RawMessage  `json:"reasoning"`
			Refusal          json.RawMessage  `json:"refusal"`
			ToolCalls        []chatInToolCall `json:"tool_calls"`
		} `json:"message"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *chatInUsage `json:"usage"`
	Error *chatInError `json:"error"`
}

// chatInError is an OpenAI error object.
type chatInError struct {
	Message string          `json:"message"`
	Type    string          `json:"type"`
	Code    json.RawMessage `json:"code"`
}

func (e *chatInError) upstream() *UpstreamError {
	code, ok := asString(e.Code)
	if !ok && !isNull(e.Code) {
		code = strings.TrimSpace(string(e.Code))
	}
	return &UpstreamError{Type: e.Type, Code: code, Message: e.Message}
}

// chatResult is what the translators need from one chat completion.
type chatResult struct {
	id, model string
	text      string
	reasoning string
	calls     []chatToolCall
	finish    string
	usage     Usage
}

func parseChatResponse(upstream []byte) (chatResult, error) {
	var in chatInResponse
	if err := json.Unmarshal(upstream, &in); err != nil {
		return chatResult{}, malformed("chat completion")
	}
	if in.Error != nil {
		return chatResult{}, in.Error.upstream()
	}
	if len(in.Choices) == 0 {
		return chatResult{}, malformed("chat completion without choices")
	}
	c := in.Choices[0]
	res := chatResult{id: in.ID, model: in.Model, usage: in.Usage.usage()}
	if c.FinishReason != nil {
		res.finish = *c.FinishReason
	}
	res.text = chatContentText(c.Message.Content)
	if res.text == "" {
		res.text, _ = asString(c.Message.Refusal)
	}
	res.reasoning, _ = asString(c.Message.ReasoningContent)
	if res.reasoning == "" {
		res.reasoning, _ = asString(c.Message.Reasoning)
	}
	for i, tc := range c.Message.ToolCalls {
		id := tc.ID
		if id == "" {
			id = "call_" + strconv.Itoa(i)
		}
		res.calls = append(res.calls, chatToolCall{ID: id, Type: "function",
			Function: chatFunctionCall{Name: tc.Function.Name, Arguments: rawArguments(tc.Function.Arguments)}})
	}
	return res, nil
}

// chatContentText reads response `content`: a string or text parts.
func chatContentText(raw json.RawMessage) string {
	if s, ok := asString(raw); ok {
		return s
	}
	var parts []chatInPart
	if json.Unmarshal(raw, &parts) != nil {
		return ""
	}
	var b strings.Builder
	for _, p := range parts {
		if p.Type == "text" {
			b.WriteString(p.Text)
		}
	}
	return b.String()
}

// ChatToAnthropicResponse translates a non-stream chat.completion into an
// Anthropic `message` (10-gateway-api §6.5). requestedModel is written into
// `model` (empty keeps the upstream's). A tool_args_repaired warning can
// only be seen through ChatToAnthropicResponseWith.
func ChatToAnthropicResponse(upstream []byte, requestedModel string) ([]byte, Usage, error) {
	b, u, _, err := ChatToAnthropicResponseWith(upstream, ResponseOptions{Model: requestedModel})
	return b, u, err
}

// ChatToAnthropicResponseWith is ChatToAnthropicResponse with all options
// and the warnings of the translation (tool_args_repaired).
func ChatToAnthropicResponseWith(upstream []byte, o ResponseOptions) ([]byte, Usage, []Warning, error) {
	res, err := parseChatResponse(upstream)
	if err != nil {
		return nil, Usage{}, nil, err
	}
	var w warnSet
	content := []any{}
	if res.reasoning != "" {
		content = append(content, aThinkingBlock{Type: "thinking", Thinking: res.reasoning, Signature: ""})
	}
	if res.text != "" {
		content = append(content, aTextBlock{Type: "text", Text: res.text})
	}
	for _, c := range res.calls {
		content = append(content, aToolUseBlock{Type: "tool_use", ID: c.ID, Name: c.Function.Name, Input: toolArgsObject(c.Function.Arguments, &w)})
	}
	out := object{
		{"id", "msg_" + res.id},
		{"type", "message"},
		{"role", "assistant"},
		{"model", pick(o.Model, res.model)},
		{"content", content},
		{"stop_reason", finishToAnthropic(res.finish)},
		{"stop_sequence", nil},
		{"usage", anthropicUsageOf(res.usage)},
	}
	b, err := marshal(out)
	return b, res.usage, w.list, err
}

// Responses object shapes (10-gateway-api §6.7).

type respObject struct {
	ID                string          `json:"id"`
	Object            string          `json:"object"`
	CreatedAt         int64           `json:"created_at"`
	Status            string          `json:"status"`
	Background        bool            `json:"background"`
	Error             *respError      `json:"error"`
	IncompleteDetails *respIncomplete `json:"incomplete_details"`
	Model             string          `json:"model"`
	Output            []any           `json:"output"`
	Usage             *respUsage      `json:"usage"`
}

type respError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

type respIncomplete struct {
	Reason string `json:"reason"`
}

type respMessageItem struct {
	ID      string           `json:"id"`
	Type    string           `json:"type"`
	Status  string           `json:"status"`
	Role    string           `json:"role"`
	Content []respOutputText `json:"content"`
}

type respOutputText struct {
	Type        string `json:"type"`
	Text        string `json:"text"`
	Annotations []any  `json:"annotations"`
}

type respFunctionCall struct {
	ID        string `json:"id"`
	Type      string `json:"type"`
	Status    string `json:"status"`
	Arguments string `json:"arguments"`
	CallID    string `json:"call_id"`
	Name      string `json:"name"`
}

type respUsage struct {
	InputTokens        int64 `json:"input_tokens"`
	InputTokensDetails struct {
		CachedTokens int64 `json:"cached_tokens"`
	} `json:"input_tokens_details"`
	OutputTokens        int64 `json:"output_tokens"`
	OutputTokensDetails struct {
		ReasoningTokens int64 `json:"reasoning_tokens"`
	} `json:"output_tokens_details"`
	TotalTokens int64 `json:"total_tokens"`
}

func respUsageOf(u Usage) *respUsage {
	r := &respUsage{InputTokens: u.PromptTokens, OutputTokens: u.CompletionTokens, TotalTokens: u.PromptTokens + u.CompletionTokens}
	r.InputTokensDetails.CachedTokens = u.CachedTokens
	r.OutputTokensDetails.ReasoningTokens = u.ReasoningTokens
	return r
}

// respStatus maps a chat finish reason to a Responses status.
func respStatus(finish string) (string, *respIncomplete) {
	switch finish {
	case "length":
		return "incomplete", &respIncomplete{Reason: "max_output_tokens"}
	case "content_filter":
		return "incomplete", &respIncomplete{Reason: "content_filter"}
	}
	return "completed", nil
}

// respIDs names a synthesised response and its items after the request id
// (or, without one, the upstream id).
type respIDs struct{ suffix string }

func newRespIDs(requestID, upstreamID string) respIDs {
	if requestID != "" {
		return respIDs{suffix: idSuffix(requestID)}
	}
	return respIDs{suffix: idSuffix(upstreamID)}
}

func (r respIDs) response() string { return "resp_" + r.suffix }
func (r respIDs) message(n int) string {
	if n == 0 {
		return "msg_" + r.suffix
	}
	return "msg_" + r.suffix + "_" + strconv.Itoa(n)
}
func (r respIDs) call(n int) string { return "fc_" + r.suffix + "_" + strconv.Itoa(n) }

// ChatToResponsesResponseWith is ChatToResponsesResponse with all options.
func ChatToResponsesResponseWith(upstream []byte, o ResponseOptions) ([]byte, Usage, []Warning, error) {
	res, err := parseChatResponse(upstream)
	if err != nil {
		return nil, Usage{}, nil, err
	}
	ids := newRespIDs(o.RequestID, res.id)
	output := []any{}
	if res.text != "" {
		output = append(output, respMessageItem{ID: ids.message(0), Type: "message", Status: "completed", Role: "assistant",
			Content: []respOutputText{{Type: "output_text", Text: res.text, Annotations: []any{}}}})
	}
	for i, c := range res.calls {
		output = append(output, respFunctionCall{ID: ids.call(i), Type: "function_call", Status: "completed",
			Arguments: c.Function.Arguments, CallID: c.ID, Name: c.Function.Name})
	}
	status, incomplete := respStatus(res.finish)
	out := respObject{ID: ids.response(), Object: "response", CreatedAt: unixNow(o.Created), Status: status,
		IncompleteDetails: incomplete, Model: pick(o.Model, res.model), Output: output, Usage: respUsageOf(res.usage)}
	b, err := marshal(out)
	return b, res.usage, nil, err
}
