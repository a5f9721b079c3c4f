package translate

import (
	"encoding/json"
	"sort"
	"strings"
)

// Anthropic request shapes written by ChatToAnthropic.

type anthropicRequest struct {
	Model         string        `json:"model"`
	System        string        `json:"system,omitempty"`
	Messages      []aMessage    `json:"messages"`
	MaxTokens     int64         `json:"max_tokens"`
	Metadata      *aMetadata    `json:"metadata,omitempty"`
	StopSequences []string      `json:"stop_sequences,omitempty"`
	Stream        bool          `json:"stream,omitempty"`
	Temperature   *float64      `json:"temperature,omitempty"`
	TopP          *float64      `json:"top_p,omitempty"`
	Thinking      *aThinkingCfg `json:"thinking,omitempty"`
	Tools         []aTool       `json:"tools,omitempty"`
	ToolChoice    *aToolChoice  `json:"tool_choice,omitempty"`
}

type aMessage struct {
	Role    string `json:"role"`
	Content []any  `json:"content"`
}

type aMetadata struct {
	UserID string `json:"user_id"`
}

type aThinkingCfg struct {
	Type         string `json:"type"`
	BudgetTokens int64  `json:"budget_tokens"`
}

type aTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"input_schema"`
}

type aToolChoice struct {
	Type                   string `json:"type"`
	Name                   string `json:"name,omitempty"`
	DisableParallelToolUse bool   `json:"disable_parallel_tool_use,omitempty"`
}

type aTextBlock struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

type aImageBlock struct {
	Type   string  `json:"type"`
	Source aSource `json:"source"`
}

type aSource struct {
	Type      string `json:"type"`
	MediaType string `json:"media_type,omitempty"`
	Data      string `json:"data,omitempty"`
	URL       string `json:"url,omitempty"`
}

type aToolUseBlock struct {
	Type  string          `json:"type"`
	ID    string          `json:"id"`
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input"`
}

type aToolResultBlock struct {
	Type      string `json:"type"`
	ToolUseID string `json:"tool_use_id"`
	Content   string `json:"content"`
}

type aThinkingBlock struct {
	Type      string `json:"type"`
	Thinking  string `json:"thinking"`
	Signature string `json:"signature"`
}

// Chat request shapes read by ChatToAnthropic.

type chatInMessage struct {
	Role       string           `json:"role"`
	Content    json.RawMessage  `json:"content"`
	ToolCalls  []chatInToolCall `json:"tool_calls"`
	ToolCallID string           `json:"tool_call_id"`
}

type chatInToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	} `json:"function"`
}

type chatInPart struct {
	Type     string          `json:"type"`
	Text     string          `json:"text"`
	Refusal  string          `json:"refusal"`
	ImageURL json.RawMessage `json:"image_url"`
}

type chatInTool struct {
	Type     string `json:"type"`
	Function *struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
	} `json:"function"`
}

// chatToAnthropicHandled are the top-level chat fields §6.2 maps (or
// consumes silently); every other present field is param_dropped.
var chatToAnthropicHandled = map[string]bool{
	"model": true, "messages": true, "n": true, "tools": true, "tool_choice": true,
	"parallel_tool_calls": true, "max_tokens": true, "max_completion_tokens": true,
	"temperature": true, "top_p": true, "stop": true, "user": true, "reasoning_effort": true,
	"stream": true, "stream_options": true, "prompt_cache_key": true,
}

// thinkingBudgets maps reasoning_effort to an Anthropic thinking budget;
// 0 means thinking stays off (silently).
var thinkingBudgets = map[string]int64{"none": 0, "minimal": 0, "low": 1024, "medium": 4096, "high": 16384}

// fallbackMaxTokens is translation.defaultMaxTokens' default.
const fallbackMaxTokens = 4096

// anthropicImageTypes are the media types Anthropic accepts for base64 images.
var anthropicImageTypes = map[string]bool{"image/jpeg": true, "image/png": true, "image/gif": true, "image/webp": true}

// ChatToAnthropic translates an OpenAI chat completion request (its
// top-level fields as parsed by the gateway) into an Anthropic Messages body
// for model, per 10-gateway-api §6.2. defaultMaxTokens
// (translation.defaultMaxTokens; ≤ 0 means 4096) applies when the client
// set neither max_completion_tokens nor max_tokens. n > 1 yields an
// *UnsupportedError; ill-shaped fields an error wrapping ErrMalformed.
func ChatToAnthropic(body map[string]json.RawMessage, model string, defaultMaxTokens int) ([]byte, []Warning, error) {
	var w warnSet
	out := anthropicRequest{Model: model}

	if raw, ok := present(body, "n"); ok {
		var n float64
		if json.Unmarshal(raw, &n) != nil {
			return nil, nil, malformed("n")
		}
		if n > 1 {
			return nil, nil, &UnsupportedError{Param: "n", Message: "Anthropic targets return one choice; n greater than 1 cannot be served."}
		}
	}

	var msgs []chatInMessage
	if err := json.Unmarshal(body["messages"], &msgs); err != nil {
		return nil, nil, malformed("messages")
	}
	system, turns, err := chatMessagesToAnthropic(msgs, &w)
	if err != nil {
		return nil, nil, err
	}
	out.System = system
	out.Messages = turns

	if err := chatSamplingToAnthropic(body, &out, &w, defaultMaxTokens); err != nil {
		return nil, nil, err
	}
	if err := chatExtrasToAnthropic(body, &out); err != nil {
		return nil, nil, err
	}

	if err := chatToolsToAnthropic(body, &out, &w); err != nil {
		return nil, nil, err
	}

	dropUnhandled(body, chatToAnthropicHandled, &w)
	b, err := marshal(out)
	if err != nil {
		return nil, nil, err
	}
	return b, w.list, nil
}

// chatSamplingToAnthropic sets max_tokens (max_completion_tokens ??
// max_tokens ?? the default), the thinking budget of reasoning_effort and
// the sampling parameters Anthropic accepts with it.
func chatSamplingToAnthropic(body map[string]json.RawMessage, out *anthropicRequest, w *warnSet, defaultMaxTokens int) error {
	// max_completion_tokens ?? max_tokens ?? the default.
	out.MaxTokens = int64(defaultMaxTokens)
	if out.MaxTokens <= 0 {
		out.MaxTokens = fallbackMaxTokens
	}
	for _, k := range []string{"max_completion_tokens", "max_tokens"} {
		if raw, ok := present(body, k); ok {
			var n int64
			if json.Unmarshal(raw, &n) != nil || n <= 0 {
				return malformed(k)
			}
			out.MaxTokens = n
			break
		}
	}

	temp, err := floatField(body, "temperature")
	if err != nil {
		return err
	}
	topP, err := floatField(body, "top_p")
	if err != nil {
		return err
	}
	if raw, ok := present(body, "reasoning_effort"); ok {
		effort, _ := asString(raw)
		budget, known := thinkingBudgets[effort]
		switch {
		case !known:
			w.paramDropped("reasoning_effort")
		case budget > 0:
			if budget >= out.MaxTokens {
				budget = out.MaxTokens - 1
			}
			if budget < 1024 {
				w.paramDropped("reasoning_effort")
			} else {
				out.Thinking = &aThinkingCfg{Type: "enabled", BudgetTokens: budget}
			}
		}
	}
	if out.Thinking != nil {
		// Anthropic refuses sampling parameters while thinking.
		if temp != nil && *temp != 1 {
			w.paramDropped("temperature")
		}
		if topP != nil && *topP != 1 {
			w.paramDropped("top_p")
		}
		temp, topP = nil, nil
	} else if temp != nil && *temp > 1 {
		one := 1.0
		temp = &one
		w.add("param_clamped:temperature", "temperature above 1 was clamped to 1, the Anthropic maximum.")
	}
	out.Temperature, out.TopP = temp, topP
	return nil
}

// chatExtrasToAnthropic sets the stop sequences, the user id and stream.
func chatExtrasToAnthropic(body map[string]json.RawMessage, out *anthropicRequest) error {
	if raw, ok := present(body, "stop"); ok {
		if s, isStr := asString(raw); isStr {
			if s != "" {
				out.StopSequences = []string{s}
			}
		} else {
			var list []string
			if json.Unmarshal(raw, &list) != nil {
				return malformed("stop")
			}
			for _, s := range list {
				if s != "" {
					out.StopSequences = append(out.StopSequences, s)
				}
			}
		}
	}
	if raw, ok := present(body, "user"); ok {
		if u, _ := asString(raw); u != "" {
			out.Metadata = &aMetadata{UserID: u}
		}
	}
	if raw, ok := present(body, "stream"); ok {
		if json.Unmarshal(raw, &out.Stream) != nil {
			return malformed("stream")
		}
	}
	return nil
}

// dropUnhandled signals every present top-level field not in handled, in
// lexical order so the warning list is deterministic.
func dropUnhandled(body map[string]json.RawMessage, handled map[string]bool, w *warnSet) {
	var keys []string
	for k, v := range body {
		if !handled[k] && !isNull(v) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		w.paramDropped(k)
	}
}

func floatField(body map[string]json.RawMessage, key string) (*float64, error) {
	raw, ok := present(body, key)
	if !ok {
		return nil, nil
	}
	var f float64
	if json.Unmarshal(raw, &f) != nil {
		return nil, malformed(key)
	}
	return &f, nil
}

// aTurn is one Anthropic message being assembled. Tool results are kept
// apart because they must open their user turn.
type aTurn struct {
	role    string
	results []aToolResultBlock
	blocks  []any
	toolIDs []string // tool_use ids issued by an assistant turn
}

// turnBuilder assembles Anthropic turns from chat messages: consecutive
// same-role messages merge, and each tool result joins the user turn right
// after the assistant turn that issued its tool_use.
type turnBuilder struct {
	system   []string
	turns    []*aTurn
	issuedAt map[string]int // tool_use id → index of the issuing assistant turn
	answered map[string]bool
	w        *warnSet
}

// chatMessagesToAnthropic splits chat messages into the system text (all
// system and developer messages, in order) and Anthropic turns.
func chatMessagesToAnthropic(msgs []chatInMessage, w *warnSet) (string, []aMessage, error) {
	b := &turnBuilder{issuedAt: map[string]int{}, answered: map[string]bool{}, w: w}
	for _, m := range msgs {
		if err := b.add(m); err != nil {
			return "", nil, err
		}
	}
	return strings.Join(b.system, "\n\n"), b.messages(), nil
}

// turn is the open turn of role, or a new one.
func (b *turnBuilder) turn(role string) *aTurn {
	if n := len(b.turns); n > 0 && b.turns[n-1].role == role {
		return b.turns[n-1]
	}
	t := &aTurn{role: role}
	b.turns = append(b.turns, t)
	return t
}

// add takes one chat message.
func (b *turnBuilder) add(m chatInMessage) error {
	switch m.Role {
	case "system", "developer":
		text, err := chatTextOnly(m.Content, b.w)
		if err != nil {
			return err
		}
		if text != "" {
			b.system = append(b.system, text)
		}
	case "user":
		blocks, err := chatUserBlocks(m.Content, b.w)
		if err != nil {
			return err
		}
		if len(blocks) > 0 {
			t := b.turn("user")
			t.blocks = append(t.blocks, blocks...)
		}
	case "assistant":
		return b.addAssistant(m)
	case "tool":
		return b.addToolResult(m)
	default:
		return malformed("messages[].role")
	}
	return nil
}

// addAssistant takes an assistant message: its text and its tool calls as
// tool_use blocks.
func (b *turnBuilder) addAssistant(m chatInMessage) error {
	text, err := chatTextOnly(m.Content, b.w)
	if err != nil {
		return err
	}
	var blocks []any
	if text != "" {
		blocks = append(blocks, aTextBlock{Type: "text", Text: text})
	}
	var ids []string
	for _, tc := range m.ToolCalls {
		id := sanitizeID(tc.ID)
		blocks = append(blocks, aToolUseBlock{Type: "tool_use", ID: id, Name: tc.Function.Name,
			Input: toolArgsObject(rawArguments(tc.Function.Arguments), b.w)})
		ids = append(ids, id)
	}
	if len(blocks) == 0 {
		return nil
	}
	t := b.turn("assistant")
	t.blocks = append(t.blocks, blocks...)
	for _, id := range ids {
		if _, dup := b.issuedAt[id]; !dup {
			t.toolIDs = append(t.toolIDs, id)
		}
		b.issuedAt[id] = len(b.turns) - 1
	}
	return nil
}

// addToolResult takes a tool message; a result for no issued (or an already
// answered) tool_use is dropped with a warning.
func (b *turnBuilder) addToolResult(m chatInMessage) error {
	id := sanitizeID(m.ToolCallID)
	at, issued := b.issuedAt[id]
	if !issued || b.answered[id] {
		b.w.contentDropped("orphan_tool_result")
		return nil
	}
	content, err := chatTextOnly(m.Content, b.w)
	if err != nil {
		return err
	}
	b.answered[id] = true
	// The result belongs to the user turn right after the issuing
	// assistant turn; Anthropic rejects it anywhere else.
	var t *aTurn
	if at+1 < len(b.turns) {
		t = b.turns[at+1]
	} else {
		t = b.turn("user")
	}
	t.results = append(t.results, aToolResultBlock{Type: "tool_result", ToolUseID: id, Content: content})
	return nil
}

// messages closes the turns: every tool_use needs a result in the next user
// turn, and a missing one gets an empty result (silently, §6.2).
func (b *turnBuilder) messages() []aMessage {
	out := []aMessage{}
	for i := 0; i < len(b.turns); i++ {
		t := b.turns[i]
		if t.role == "assistant" && len(t.toolIDs) > 0 {
			if i+1 == len(b.turns) {
				b.turns = append(b.turns, &aTurn{role: "user"})
			}
			next := b.turns[i+1]
			have := map[string]bool{}
			for _, r := range next.results {
				have[r.ToolUseID] = true
			}
			for _, id := range t.toolIDs {
				if !have[id] {
					next.results = append(next.results, aToolResultBlock{Type: "tool_result", ToolUseID: id, Content: ""})
				}
			}
		}
		content := make([]any, 0, len(t.results)+len(t.blocks))
		for _, r := range t.results {
			content = append(content, r)
		}
		content = append(content, t.blocks...)
		out = append(out, aMessage{Role: t.role, Content: content})
	}
	return out
}

// chatParts decodes chat `content`: a string becomes one text part.
func chatParts(raw json.RawMessage) ([]chatInPart, error) {
	if isNull(raw) {
		return nil, nil
	}
	if s, ok := asString(raw); ok {
		if s == "" {
			return nil, nil
		}
		return []chatInPart{{Type: "text", Text: s}}, nil
	}
	var parts []chatInPart
	if json.Unmarshal(raw, &parts) != nil {
		return nil, malformed("messages[].content")
	}
	return parts, nil
}

// chatTextOnly reads content that can only carry text (system, developer,
// assistant and tool messages): text and refusal parts joined, others dropped.
func chatTextOnly(raw json.RawMessage, w *warnSet) (string, error) {
	parts, err := chatParts(raw)
	if err != nil {
		return "", err
	}
	var texts []string
	for _, p := range parts {
		text := p.Text
		switch p.Type {
		case "text":
		case "refusal":
			text = p.Refusal
		default:
			w.contentDropped(partKind(p.Type))
			continue
		}
		if text != "" {
			texts = append(texts, text)
		}
	}
	return strings.Join(texts, "\n\n"), nil
}

func partKind(t string) string {
	if t == "" {
		return "unknown"
	}
	return t
}

func chatUserBlocks(raw json.RawMessage, w *warnSet) ([]any, error) {
	parts, err := chatParts(raw)
	if err != nil {
		return nil, err
	}
	var blocks []any
	for _, p := range parts {
		switch p.Type {
		case "text":
			if p.Text != "" {
				blocks = append(blocks, aTextBlock{Type: "text", Text: p.Text})
			}
		case "image_url":
			if b, ok := anthropicImage(imageURLOf(p.ImageURL)); ok {
				blocks = append(blocks, b)
			} else {
				w.contentDropped("image")
			}
		default: // input_audio, file, anything newer
			w.contentDropped(partKind(p.Type))
		}
	}
	return blocks, nil
}

// imageURLOf reads `image_url` as {url, detail} or a bare string.
func imageURLOf(raw json.RawMessage) string {
	if s, ok := asString(raw); ok {
		return s
	}
	var o struct {
		URL string `json:"url"`
	}
	_ = json.Unmarshal(raw, &o)
	return o.URL
}

// anthropicImage maps a chat image URL to an Anthropic image block.
func anthropicImage(url string) (aImageBlock, bool) {
	if rest, ok := strings.CutPrefix(url, "data:"); ok {
		meta, data, ok := strings.Cut(rest, ",")
		if !ok || data == "" {
			return aImageBlock{}, false
		}
		params := strings.Split(meta, ";")
		mime := strings.ToLower(strings.TrimSpace(params[0]))
		if mime == "image/jpg" {
			mime = "image/jpeg"
		}
		base64 := false
		for _, p := range params[1:] {
			if strings.EqualFold(strings.TrimSpace(p), "base64") {
				base64 = true
			}
		}
		if !base64 || !anthropicImageTypes[mime] {
			return aImageBlock{}, false
		}
		return aImageBlock{Type: "image", Source: aSource{Type: "base64", MediaType: mime, Data: data}}, true
	}
	lower := strings.ToLower(url)
	if strings.HasPrefix(lower, "https://") || strings.HasPrefix(lower, "http://") {
		return aImageBlock{Type: "image", Source: aSource{Type: "url", URL: url}}, true
	}
	return aImageBlock{}, false
}

// chatToolsToAnthropic maps tools, tool_choice and parallel_tool_calls.
func chatToolsToAnthropic(body map[string]json.RawMessage, out *anthropicRequest, w *warnSet) error {
	if raw, ok := present(body, "tools"); ok {
		var tools []chatInTool
		if json.Unmarshal(raw, &tools) != nil {
			return malformed("tools")
		}
		for _, t := range tools {
			if (t.Type != "function" && t.Type != "") || t.Function == nil {
				w.paramDropped("tools." + partKind(t.Type))
				continue
			}
			out.Tools = append(out.Tools, aTool{Name: t.Function.Name, Description: t.Function.Description,
				InputSchema: inputSchema(t.Function.Parameters)})
		}
	}
	parallelOff := false
	if raw, ok := present(body, "parallel_tool_calls"); ok {
		var p bool
		if json.Unmarshal(raw, &p) != nil {
			return malformed("parallel_tool_calls")
		}
		parallelOff = !p
	}
	var choice *aToolChoice
	if raw, ok := present(body, "tool_choice"); ok {
		if s, isStr := asString(raw); isStr {
			switch s {
			case "auto":
				choice = &aToolChoice{Type: "auto"}
			case "none":
				choice = &aToolChoice{Type: "none"}
			case "required":
				choice = &aToolChoice{Type: "any"}
			default:
				w.paramDropped("tool_choice")
			}
		} else {
			var o struct {
				Type     string `json:"type"`
				Function struct {
					Name string `json:"name"`
				} `json:"function"`
			}
			if json.Unmarshal(raw, &o) != nil {
				return malformed("tool_choice")
			}
			if o.Type == "function" && o.Function.Name != "" {
				choice = &aToolChoice{Type: "tool", Name: o.Function.Name}
			} else {
				w.paramDropped("tool_choice")
			}
		}
	}
	if len(out.Tools) == 0 {
		// Without tools Anthropic refuses tool_choice; it would mean nothing anyway.
		return nil
	}
	if parallelOff {
		if choice == nil {
			choice = &aToolChoice{Type: "auto"}
		}
		if choice.Type != "none" {
			choice.DisableParallelToolUse = true
		}
	}
	out.ToolChoice = choice
	return nil
}

// inputSchema turns chat `parameters` into an Anthropic input_schema: an
// object schema, `{"type":"object","properties":{}}` when absent.
func inputSchema(params json.RawMessage) json.RawMessage {
	obj, ok := objectJSON(params)
	if !ok {
		return json.RawMessage(`{"type":"object","properties":{}}`)
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(obj, &m) != nil {
		return json.RawMessage(`{"type":"object","properties":{}}`)
	}
	if _, has := m["type"]; has {
		return obj
	}
	// `{}` is a common "no parameters" schema; Anthropic insists on a type.
	m["type"] = json.RawMessage(`"object"`)
	return mustJSON(m)
}
