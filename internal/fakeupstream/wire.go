package fakeupstream

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"regexp"
	"strings"
	"unicode/utf8"
)

// DefaultContent is the assistant text when neither the step nor the server sets one.
const DefaultContent = "Hello from fake upstream"

// DefaultEvents is the number of content events when neither the step nor the server sets one.
const DefaultEvents = 20

// DefaultEmbeddingDims is the vector length when the request does not ask for "dimensions".
const DefaultEmbeddingDims = 8

// nonceRE finds the marker the stream client writes into the last user message. Body text
// survives the gateway's format translation, headers might not.
var nonceRE = regexp.MustCompile(`sy-nonce:([0-9a-fA-F]+)`)

// request is what the fake needs from a request body; everything else is ignored.
type request struct {
	model        string
	stream       bool
	includeUsage bool
	text         string   // all prompt text, for input tokens
	lastUser     string   // the last user message's text, for the nonce
	inputs       []string // embeddings inputs, each as text
	dims         int
	base64       bool
	tools        []string // names of the tools offered
	toolResult   string   // text of the last tool result carried, "" when none
	hasResult    bool
}

type wireBody struct {
	Model         string `json:"model"`
	Stream        bool   `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	System   json.RawMessage `json:"system"`
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
	Input          json.RawMessage `json:"input"`
	Dimensions     int             `json:"dimensions"`
	EncodingFormat string          `json:"encoding_format"`
	Tools          []struct {
		Name     string `json:"name"`
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	} `json:"tools"`
}

// parseRequest reads the fields the fake acts on. A body that is not a JSON object is an error.
func parseRequest(body []byte) (request, error) {
	var b wireBody
	if err := json.Unmarshal(body, &b); err != nil {
		return request{}, err
	}
	r := request{model: b.Model, stream: b.Stream, dims: b.Dimensions, base64: b.EncodingFormat == "base64"}
	r.includeUsage = b.StreamOptions != nil && b.StreamOptions.IncludeUsage
	var all strings.Builder
	all.WriteString(contentText(b.System))
	for _, m := range b.Messages {
		t := contentText(m.Content)
		all.WriteString(t)
		if m.Role == "user" {
			r.lastUser = t
		}
		if m.Role == "tool" {
			r.toolResult, r.hasResult = t, true
		}
		if res, ok := toolResultText(m.Content); ok {
			r.toolResult, r.hasResult = res, true
		}
	}
	for _, t := range b.Tools {
		if t.Function.Name != "" {
			r.tools = append(r.tools, t.Function.Name)
		} else if t.Name != "" {
			r.tools = append(r.tools, t.Name)
		}
	}
	r.text = all.String()
	if len(b.Input) > 0 {
		r.inputs = embeddingInputs(b.Input)
		if r.lastUser == "" {
			r.lastUser = strings.Join(r.inputs, "\n")
		}
		r.text += strings.Join(r.inputs, "")
	}
	return r, nil
}

// contentText flattens a message content: a string, or an array of parts with a "text" field
// (OpenAI text/input_text parts, Anthropic text blocks, tool_result blocks with string content).
func contentText(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Text    string          `json:"text"`
		Content json.RawMessage `json:"content"`
	}
	if json.Unmarshal(raw, &parts) != nil {
		return ""
	}
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Text)
		if len(p.Content) > 0 {
			b.WriteString(contentText(p.Content))
		}
	}
	return b.String()
}

// toolResultText finds Anthropic tool_result blocks in a content array and
// returns the last one's text.
func toolResultText(raw json.RawMessage) (string, bool) {
	var parts []struct {
		Type    string          `json:"type"`
		Content json.RawMessage `json:"content"`
	}
	if len(raw) == 0 || raw[0] != '[' || json.Unmarshal(raw, &parts) != nil {
		return "", false
	}
	text, found := "", false
	for _, p := range parts {
		if p.Type == "tool_result" {
			text, found = contentText(p.Content), true
		}
	}
	return text, found
}

// embeddingInputs accepts every shape of OpenAI's "input": a string, strings, a token array or
// token arrays (the latter two kept as their JSON text, which is all hashing needs).
func embeddingInputs(raw json.RawMessage) []string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return []string{s}
	}
	var ss []string
	if json.Unmarshal(raw, &ss) == nil {
		return ss
	}
	var tokens []int
	if json.Unmarshal(raw, &tokens) == nil {
		return []string{string(raw)}
	}
	var many []json.RawMessage
	if json.Unmarshal(raw, &many) == nil {
		out := make([]string, len(many))
		for i, m := range many {
			out[i] = string(bytes.TrimSpace(m))
		}
		return out
	}
	return []string{string(raw)}
}

// Tokens is the fake's tokenizer: one token per four characters, at least one. Usage is a pure
// function of text length and events sent, so tests can compute the figures they expect.
func Tokens(text string) int {
	return max(1, (utf8.RuneCountInString(text)+3)/4)
}

// SplitContent splits text into n pieces of nearly equal rune length, the content events of a
// stream. When text has fewer runes than n it is repeated (space-separated) until it has enough,
// so a step always sends exactly n content events.
func SplitContent(text string, n int) []string {
	if n <= 0 {
		n = 1
	}
	if text == "" {
		text = DefaultContent
	}
	runes := []rune(text)
	for len(runes) < n {
		runes = append(append(runes, ' '), []rune(text)...)
	}
	out := make([]string, n)
	base, extra := len(runes)/n, len(runes)%n
	pos := 0
	for i := range out {
		size := base
		if i < extra {
			size++
		}
		out[i] = string(runes[pos : pos+size])
		pos += size
	}
	return out
}

// Embedding returns the fake's vector for input: dims floats drawn from a PCG seeded by the
// input's SHA-256, normalized to unit length. Same input, same vector, in every process.
func Embedding(input string, dims int) []float64 {
	if dims <= 0 {
		dims = DefaultEmbeddingDims
	}
	sum := sha256.Sum256([]byte(input))
	rng := rand.New(rand.NewPCG(binary.LittleEndian.Uint64(sum[:8]), binary.LittleEndian.Uint64(sum[8:16])))
	v := make([]float64, dims)
	var norm float64
	for i := range v {
		v[i] = rng.Float64()*2 - 1
		norm += v[i] * v[i]
	}
	norm = math.Sqrt(norm)
	for i := range v {
		v[i] = math.Round(v[i]/norm*1e6) / 1e6
	}
	return v
}

func embeddingBase64(v []float64) string {
	buf := make([]byte, 4*len(v))
	for i, f := range v {
		binary.LittleEndian.PutUint32(buf[4*i:], math.Float32bits(float32(f)))
	}
	return base64.StdEncoding.EncodeToString(buf)
}

// --- OpenAI shapes ---

type openAIErrorBody struct {
	Error openAIErrorObj `json:"error"`
}

type openAIErrorObj struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

type openAIUsage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens,omitempty"`
	TotalTokens      int `json:"total_tokens"`
}

type openAICompletion struct {
	ID                string             `json:"id"`
	Object            string             `json:"object"`
	Created           int64              `json:"created"`
	Model             string             `json:"model"`
	SystemFingerprint string             `json:"system_fingerprint"`
	Choices           []openAIChoice     `json:"choices"`
	Usage             openAIUsageWithout `json:"usage"`
}

// openAIUsageWithout always writes completion_tokens, even when 0.
type openAIUsageWithout struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

type openAIChoice struct {
	Index        int             `json:"index"`
	Message      openAIMessage   `json:"message"`
	Logprobs     json.RawMessage `json:"logprobs"`
	FinishReason string          `json:"finish_reason"`
}

type openAIMessage struct {
	Role      string           `json:"role"`
	Content   *string          `json:"content"`
	Refusal   *string          `json:"refusal"`
	ToolCalls []openAIToolCall `json:"tool_calls,omitempty"`
}

type openAIToolCall struct {
	Index    *int   `json:"index,omitempty"`
	ID       string `json:"id,omitempty"`
	Type     string `json:"type,omitempty"`
	Function struct {
		Name      string `json:"name,omitempty"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type openAIChunk struct {
	ID                string              `json:"id"`
	Object            string              `json:"object"`
	Created           int64               `json:"created"`
	Model             string              `json:"model"`
	SystemFingerprint string              `json:"system_fingerprint"`
	Choices           []openAIChunkChoice `json:"choices"`
	// Usage is the literal null on every chunk when the client asked for usage, and the figures
	// on the last one, exactly as OpenAI does; absent otherwise.
	Usage json.RawMessage `json:"usage,omitempty"`
}

type openAIChunkChoice struct {
	Index        int             `json:"index"`
	Delta        openAIDelta     `json:"delta"`
	Logprobs     json.RawMessage `json:"logprobs"`
	FinishReason *string         `json:"finish_reason"`
}

type openAIDelta struct {
	Role      string           `json:"role,omitempty"`
	Content   *string          `json:"content,omitempty"`
	ToolCalls []openAIToolCall `json:"tool_calls,omitempty"`
}

type openAIModelList struct {
	Object string        `json:"object"`
	Data   []openAIModel `json:"data"`
}

type openAIModel struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
}

type openAIEmbeddings struct {
	Object string            `json:"object"`
	Data   []openAIEmbedding `json:"data"`
	Model  string            `json:"model"`
	Usage  openAIUsage       `json:"usage"`
}

type openAIEmbedding struct {
	Object    string `json:"object"`
	Index     int    `json:"index"`
	Embedding any    `json:"embedding"`
}

// --- Anthropic shapes ---

type anthropicErrorBody struct {
	Type  string            `json:"type"`
	Error anthropicErrorObj `json:"error"`
}

type anthropicErrorObj struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

type anthropicUsage struct {
	InputTokens  int `json:"input_tokens"`
	OutputTokens int `json:"output_tokens"`
}

type anthropicMessage struct {
	ID           string         `json:"id"`
	Type         string         `json:"type"`
	Role         string         `json:"role"`
	Model        string         `json:"model"`
	Content      []any          `json:"content"`
	StopReason   *string        `json:"stop_reason"`
	StopSequence *string        `json:"stop_sequence"`
	Usage        anthropicUsage `json:"usage"`
}

type anthropicBlock struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

type anthropicToolUse struct {
	Type  string          `json:"type"`
	ID    string          `json:"id"`
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input"`
}

type anthropicJSONDelta struct {
	Type        string `json:"type"`
	PartialJSON string `json:"partial_json"`
}

type anthropicModelList struct {
	Data    []anthropicModel `json:"data"`
	HasMore bool             `json:"has_more"`
	FirstID *string          `json:"first_id"`
	LastID  *string          `json:"last_id"`
}

type anthropicModel struct {
	Type        string `json:"type"`
	ID          string `json:"id"`
	DisplayName string `json:"display_name"`
	CreatedAt   string `json:"created_at"`
}

// sseEvent is one server-sent event; name is empty for OpenAI, which uses data lines only.
type sseEvent struct {
	name string
	data []byte
}

func (e sseEvent) bytes() []byte {
	var b bytes.Buffer
	if e.name != "" {
		fmt.Fprintf(&b, "event: %s\n", e.name)
	}
	b.WriteString("data: ")
	b.Write(e.data)
	b.WriteString("\n\n")
	return b.Bytes()
}

// truncated is the event with its JSON cut in half: what a malformed chunk looks like on the wire.
func (e sseEvent) truncated() sseEvent {
	return sseEvent{name: e.name, data: e.data[:len(e.data)/2]}
}

// streamPlan is a stream split into the parts faults care about: the preamble carries no useful
// byte (role delta; message_start, content_block_start, ping), content events do, the trailer
// ends the stream with usage and the success marker.
type streamPlan struct {
	preamble, content, trailer []sseEvent
	errorEvent                 sseEvent
}

type streamParams struct {
	id, model     string
	created       int64
	chunks        []string
	usage         Usage // OutputTokens = len(chunks)
	includeUsage  bool
	finishReason  string
	errType, eMsg string
	// tool, when set, makes the content events a tool call whose arguments
	// are the chunks.
	tool *toolAnswer
}

// toolAnswer is the tool call a stream or body carries.
type toolAnswer struct{ id, name, args string }

func openAIStream(p streamParams) streamPlan {
	var usageNull json.RawMessage
	if p.includeUsage {
		usageNull = json.RawMessage("null")
	}
	chunk := func(delta openAIDelta, finish *string) sseEvent {
		return sseEvent{data: mustJSON(openAIChunk{ID: p.id, Object: "chat.completion.chunk", Created: p.created, Model: p.model,
			SystemFingerprint: "fp_fake", Choices: []openAIChunkChoice{{Delta: delta, Logprobs: json.RawMessage("null"), FinishReason: finish}},
			Usage: usageNull})}
	}
	empty := ""
	var plan streamPlan
	plan.preamble = []sseEvent{chunk(openAIDelta{Role: "assistant", Content: &empty}, nil)}
	for i, c := range p.chunks {
		if p.tool != nil {
			tc := openAIToolCall{Index: new(int)}
			if i == 0 {
				tc.ID, tc.Type, tc.Function.Name = p.tool.id, "function", p.tool.name
			}
			tc.Function.Arguments = c
			plan.content = append(plan.content, chunk(openAIDelta{ToolCalls: []openAIToolCall{tc}}, nil))
			continue
		}
		plan.content = append(plan.content, chunk(openAIDelta{Content: &c}, nil))
	}
	finish := p.finishReason
	if finish == "" {
		finish = "stop"
	}
	plan.trailer = []sseEvent{chunk(openAIDelta{}, &finish)}
	if p.includeUsage {
		u := mustJSON(openAIUsageWithout{PromptTokens: p.usage.InputTokens, CompletionTokens: p.usage.OutputTokens,
			TotalTokens: p.usage.InputTokens + p.usage.OutputTokens})
		plan.trailer = append(plan.trailer, sseEvent{data: mustJSON(openAIChunk{ID: p.id, Object: "chat.completion.chunk",
			Created: p.created, Model: p.model, SystemFingerprint: "fp_fake", Choices: []openAIChunkChoice{}, Usage: u})})
	}
	plan.trailer = append(plan.trailer, sseEvent{data: []byte("[DONE]")})
	typ, msg := p.errType, p.eMsg
	if typ == "" {
		typ = "server_error"
	}
	if msg == "" {
		msg = "The server had an error while processing your request. Sorry about that!"
	}
	plan.errorEvent = sseEvent{data: mustJSON(openAIErrorBody{Error: openAIErrorObj{Message: msg, Type: typ}})}
	return plan
}

// Anthropic stream events, as structs so that "type" comes first as on the real wire.
type (
	anthropicMessageStart struct {
		Type    string           `json:"type"`
		Message anthropicMessage `json:"message"`
	}
	anthropicBlockStart struct {
		Type         string `json:"type"`
		Index        int    `json:"index"`
		ContentBlock any    `json:"content_block"`
	}
	anthropicTyped struct {
		Type string `json:"type"`
	}
	anthropicBlockDelta struct {
		Type  string `json:"type"`
		Index int    `json:"index"`
		Delta any    `json:"delta"`
	}
	anthropicBlockStop struct {
		Type  string `json:"type"`
		Index int    `json:"index"`
	}
	anthropicMessageDelta struct {
		Type  string `json:"type"`
		Delta struct {
			StopReason   string  `json:"stop_reason"`
			StopSequence *string `json:"stop_sequence"`
		} `json:"delta"`
		Usage struct {
			OutputTokens int `json:"output_tokens"`
		} `json:"usage"`
	}
)

func anthropicStream(p streamParams) streamPlan {
	ev := func(name string, v any) sseEvent { return sseEvent{name: name, data: mustJSON(v)} }
	var plan streamPlan
	// message_start reports output_tokens 1, as the real API does; the final figure is the
	// cumulative one in message_delta, and a gateway that adds the two is wrong.
	start := anthropicMessage{ID: p.id, Type: "message", Role: "assistant", Model: p.model, Content: []any{},
		Usage: anthropicUsage{InputTokens: p.usage.InputTokens, OutputTokens: 1}}
	var block any = anthropicBlock{Type: "text"}
	if p.tool != nil {
		block = anthropicToolUse{Type: "tool_use", ID: p.tool.id, Name: p.tool.name, Input: json.RawMessage("{}")}
	}
	plan.preamble = []sseEvent{
		ev("message_start", anthropicMessageStart{Type: "message_start", Message: start}),
		ev("content_block_start", anthropicBlockStart{Type: "content_block_start", ContentBlock: block}),
		ev("ping", anthropicTyped{Type: "ping"}),
	}
	for _, c := range p.chunks {
		var delta any = anthropicBlock{Type: "text_delta", Text: c}
		if p.tool != nil {
			delta = anthropicJSONDelta{Type: "input_json_delta", PartialJSON: c}
		}
		plan.content = append(plan.content, ev("content_block_delta", anthropicBlockDelta{Type: "content_block_delta", Delta: delta}))
	}
	md := anthropicMessageDelta{Type: "message_delta"}
	md.Delta.StopReason = p.finishReason
	if md.Delta.StopReason == "" {
		md.Delta.StopReason = "end_turn"
	}
	md.Usage.OutputTokens = p.usage.OutputTokens
	plan.trailer = []sseEvent{
		ev("content_block_stop", anthropicBlockStop{Type: "content_block_stop"}),
		ev("message_delta", md),
		ev("message_stop", anthropicTyped{Type: "message_stop"}),
	}
	typ, msg := p.errType, p.eMsg
	if typ == "" {
		typ = "overloaded_error"
	}
	if msg == "" {
		msg = "Overloaded"
	}
	plan.errorEvent = ev("error", anthropicErrorBody{Type: "error", Error: anthropicErrorObj{Type: typ, Message: msg}})
	return plan
}

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// mustJSON marshals values whose types are fixed in this package and cannot fail.
func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("fakeupstream: marshal %T: %v", v, err))
	}
	return b
}
