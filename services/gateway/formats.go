package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"switchyard/services"
	"switchyard/services/translate"
)

// Inbound API formats a client may speak.
const (
	InboundChat       = "openai-chat"
	InboundMessages   = "anthropic-messages"
	InboundResponses  = "openai-responses"
	InboundEmbeddings = "openai-embeddings"
)

// pipeline is how one (inbound format, upstream format) pair is served:
// the upstream path, the request body, the non-stream response and the
// stream translator.
type pipeline struct {
	path string
	body func(req *Request, model string) ([]byte, []translate.Warning, error)
	// convert turns a 2xx upstream body into the client's format; it returns
	// errEmpty for a body without content. model is what synthesised bodies
	// and chunks say in "model" (10-gateway-api §6.5): the upstream model id
	// that served, or the client's name under routing.echoRequestedModel.
	convert func(req *Request, model string, upstream []byte) ([]byte, translate.Usage, error)
	stream  func(req *Request, model string) streamAdapter
}

var errEmpty = errors.New("empty response")

// pipelineFor picks the pipeline; ok=false when the pair cannot be served
// (embeddings on an anthropic-format upstream).
//
// native says the upstream is Anthropic's own API, which honours the
// client's anthropic-beta (mid-conversation system messages pass through).
func pipelineFor(inbound string, upstream services.WireFormat, native bool, defaultMaxTokens int) (pipeline, bool) {
	switch {
	case inbound == InboundEmbeddings:
		if upstream != services.FormatOpenAI {
			return pipeline{}, false
		}
		return pipeline{path: "/embeddings", body: sameFormat, convert: passEmbeddings}, true
	case inbound == InboundChat && upstream == services.FormatOpenAI:
		return pipeline{path: "/chat/completions", body: sameFormat, convert: passChat, stream: func(*Request, string) streamAdapter { return newChatPassthrough() }}, true
	case inbound == InboundChat && upstream == services.FormatAnthropic:
		return pipeline{path: "/messages",
			body: func(req *Request, model string) ([]byte, []translate.Warning, error) {
				return translate.ChatToAnthropic(req.Body, model, defaultMaxTokens)
			},
			convert: func(req *Request, model string, b []byte) ([]byte, translate.Usage, error) {
				return translate.AnthropicToChatResponse(b, model)
			},
			stream: func(req *Request, model string) streamAdapter {
				s := translate.NewAnthropicToChatStream(model)
				s.IncludeUsage = translate.WantsUsageChunk(req.Body)
				return &translated{s: s, terminal: []byte("data: [DONE]\n\n"), keepalive: chatKeepalive}
			}}, true
	case inbound == InboundMessages && upstream == services.FormatAnthropic:
		// Static functions, not a closure over native: pick builds this
		// pipeline per target, and a closure would allocate every time.
		body := messagesBody
		if native {
			body = messagesBodyNative
		}
		return pipeline{path: "/messages", body: body, convert: passMessages,
			stream: func(*Request, string) streamAdapter { return newMessagesPassthrough() }}, true
	case inbound == InboundMessages && upstream == services.FormatOpenAI:
		return pipeline{path: "/chat/completions",
			body: func(req *Request, model string) ([]byte, []translate.Warning, error) {
				b, w, err := translate.AnthropicToChat(req.Body, model)
				if err == nil && req.Stream {
					b = withUsageChunk(b)
				}
				return b, w, err
			},
			convert: func(req *Request, model string, b []byte) ([]byte, translate.Usage, error) {
				return translate.ChatToAnthropicResponse(b, model)
			},
			stream: func(req *Request, model string) streamAdapter {
				return &translated{s: translate.NewChatToAnthropicStream(model), keepalive: pingKeepalive}
			}}, true
	case inbound == InboundResponses:
		p := pipeline{
			convert: func(req *Request, model string, b []byte) ([]byte, translate.Usage, error) {
				chat := b
				if upstream == services.FormatAnthropic {
					var err error
					if chat, _, err = translate.AnthropicToChatResponse(b, model); err != nil {
						return nil, translate.Usage{}, err
					}
				}
				out, u, _, err := translate.ChatToResponsesResponseWith(chat, translate.ResponseOptions{Model: model, RequestID: req.ID})
				return out, u, err
			},
			stream: func(req *Request, model string) streamAdapter {
				var s translate.Stream = translate.NewChatToResponsesStream(model, req.ID)
				if upstream == services.FormatAnthropic {
					s = translate.Compose(translate.NewAnthropicToChatStream(model), s)
				}
				return &translated{s: s, keepalive: chatKeepalive}
			}}
		p.path = "/chat/completions"
		p.body = func(req *Request, model string) ([]byte, []translate.Warning, error) {
			b, w, err := translate.ResponsesToChat(req.Body, model)
			if err == nil && req.Stream {
				b = withUsageChunk(b)
			}
			return b, w, err
		}
		if upstream == services.FormatAnthropic {
			p.path = "/messages"
			p.body = func(req *Request, model string) ([]byte, []translate.Warning, error) {
				chat, w1, err := translate.ResponsesToChat(req.Body, model)
				if err != nil {
					return nil, w1, err
				}
				var top map[string]json.RawMessage
				if err := json.Unmarshal(chat, &top); err != nil {
					return nil, w1, err
				}
				b, w2, err := translate.ChatToAnthropic(top, model, defaultMaxTokens)
				return b, append(w1, w2...), err
			}
		}
		return p, true
	}
	return pipeline{}, false
}

// sameFormat forwards the client's fields with model replaced by the
// upstream model id; unknown fields travel unchanged.
func sameFormat(req *Request, model string) ([]byte, []translate.Warning, error) {
	b, err := requestBody(req, model)
	return b, nil, err
}

// encodeBody is json.Marshal of fields with "model" set to model: the keys
// sorted, each value compacted with <, >, & and U+2028/U+2029 escaped. The
// values are valid JSON (a parsed body's or json.Marshal's), and those
// already in that form, as a compact client body's are, are copied as they
// are instead of being scanned by the encoder.
func encodeBody(fields map[string]json.RawMessage, model string) ([]byte, error) {
	var keyArr [32]string
	keys := keyArr[:0]
	size := len(model) + 16
	for k, v := range fields {
		keys = append(keys, k)
		size += len(k) + len(v) + 4
	}
	if _, ok := fields["model"]; !ok {
		keys = append(keys, "model")
	}
	slices.Sort(keys)
	out := make([]byte, 1, size)
	out[0] = '{'
	for i, k := range keys {
		if i > 0 {
			out = append(out, ',')
		}
		out = appendJSONString(out, k)
		out = append(out, ':')
		if k == "model" {
			out = appendJSONString(out, model)
			continue
		}
		v := fields[k]
		if !compactJSON(v) {
			b, err := json.Marshal(v)
			if err != nil {
				return nil, err
			}
			v = b
		}
		out = append(out, v...)
	}
	return append(out, '}'), nil
}

// appendJSONString appends s as json.Marshal encodes a string.
func appendJSONString(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= utf8.RuneSelf || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			b, _ := json.Marshal(s)
			return append(dst, b...)
		}
	}
	return append(append(append(dst, '"'), s...), '"')
}

// compactJSON reports whether the valid JSON value v is exactly what
// json.Marshal makes of it as a json.RawMessage: no whitespace outside
// strings, no <, > or &, and no U+2028 or U+2029.
func compactJSON(v []byte) bool {
	if len(v) == 0 {
		return false
	}
	inString := false
	for i := 0; i < len(v); i++ {
		if !compactStop[v[i]] {
			continue
		}
		switch c := v[i]; c {
		case '<', '>', '&':
			return false
		case 0xE2: // U+2028 and U+2029 are E2 80 A8 and E2 80 A9
			if i+2 < len(v) && v[i+1] == 0x80 && v[i+2]&^1 == 0xA8 {
				return false
			}
		case '"':
			inString = !inString
		case '\\':
			i++ // an escape inside a string: skip the escaped byte
		default: // whitespace
			if !inString {
				return false
			}
		}
	}
	return true
}

// compactStop marks the bytes compactJSON looks at.
var compactStop = func() (t [256]bool) {
	for _, c := range []byte("<>&\xE2\"\\ \t\n\r") {
		t[c] = true
	}
	return t
}()

// withUsageChunk asks an OpenAI-format upstream for the final usage chunk,
// which the translated client stream needs.
func withUsageChunk(b []byte) []byte {
	var top map[string]json.RawMessage
	if json.Unmarshal(b, &top) != nil {
		return b
	}
	top["stream_options"] = json.RawMessage(`{"include_usage":true}`)
	out, err := json.Marshal(top)
	if err != nil {
		return b
	}
	return out
}

func passChat(_ *Request, _ string, b []byte) ([]byte, translate.Usage, error) {
	choices, rawUsage, rawErr, ok := scanResponse(b)
	var u *usage
	switch {
	case !ok:
		var probe struct {
			Choices json.RawMessage `json:"choices"`
			Usage   *usage          `json:"usage"`
			Error   json.RawMessage `json:"error"`
		}
		if json.Unmarshal(b, &probe) != nil {
			return nil, translate.Usage{}, errEmpty
		}
		choices, u, rawErr = probe.Choices, probe.Usage, probe.Error
	case rawUsage != nil:
		var err error
		if u, err = readUsage(rawUsage); err != nil {
			return nil, translate.Usage{}, errEmpty
		}
	}
	if len(rawErr) > 0 && string(rawErr) != "null" {
		return nil, translate.Usage{}, &translate.UpstreamError{Message: "error object in a 200 response"}
	}
	if len(choices) == 0 || bytes.Equal(choices, []byte("[]")) {
		return nil, translate.Usage{}, errEmpty
	}
	return b, u.counts(), nil
}

// readUsage decodes a "usage" object as json.Unmarshal into usage would:
// plain token counts are read by scanning, anything else is decoded.
func readUsage(raw []byte) (*usage, error) {
	var u usage
	if scanUsage(raw, &u) {
		return &u, nil
	}
	u = usage{}
	if err := json.Unmarshal(raw, &u); err != nil {
		return nil, err
	}
	return &u, nil
}

// scanUsage reads a valid usage object whose counts are integers or null
// and whose details are objects or null; false for anything else (other
// types, repeated fields, keys the decoder might match otherwise).
func scanUsage(raw []byte, u *usage) bool {
	it, ok := objectAt(raw, 0)
	if !ok {
		return false
	}
	var seen [4]bool
	for it.next() {
		k := fieldOf(it.key, "prompt_tokens", "completion_tokens", "prompt_tokens_details", "completion_tokens_details")
		switch {
		case k == -1:
			continue
		case k == -2 || seen[k]:
			return false
		}
		seen[k] = true
		v := it.val
		switch k {
		case 0, 1:
			n, ok := tokenCount(v)
			if !ok {
				return false
			}
			if k == 0 {
				u.PromptTokens = n
			} else {
				u.CompletionTokens = n
			}
		case 2, 3:
			if v[0] == 'n' {
				continue
			}
			name := "cached_tokens"
			if k == 3 {
				name = "reasoning_tokens"
			}
			d, ok := objectAt(v, 0)
			if !ok {
				return false
			}
			var n int64
			found := false
			for d.next() {
				switch fieldOf(d.key, name) {
				case -1:
					continue
				case -2:
					return false
				}
				if found {
					return false
				}
				found = true
				if n, ok = tokenCount(d.val); !ok {
					return false
				}
			}
			if k == 2 {
				u.PromptTokensDetails = &struct {
					CachedTokens int64 `json:"cached_tokens"`
				}{n}
			} else {
				u.CompletionTokensDetails = &struct {
					ReasoningTokens int64 `json:"reasoning_tokens"`
				}{n}
			}
		}
	}
	return true
}

// tokenCount reads a count as the decoder reads an int64: null is 0; false
// for any other value that is not an integer in range.
func tokenCount(v []byte) (int64, bool) {
	if v[0] == 'n' {
		return 0, true
	}
	n, err := strconv.ParseInt(string(v), 10, 64)
	return n, err == nil
}

// scanResponse reads the raw "choices", "usage" (nil when absent or null)
// and "error" values of a chat completion without decoding it. ok is
// false, and the body must be decoded, when it is not a valid JSON object,
// "usage" is neither an object nor null, or a key repeats one of them or
// might match one in the decoder's case-insensitive way.
func scanResponse(b []byte) (choices, rawUsage, rawErr []byte, ok bool) {
	if !validJSON(b) {
		return nil, nil, nil, false
	}
	it, ok := objectAt(b, 0)
	if !ok {
		return nil, nil, nil, false
	}
	var seen [3]bool
	for it.next() {
		k := fieldOf(it.key, "choices", "usage", "error")
		switch {
		case k == -1:
			continue
		case k == -2 || seen[k]:
			return nil, nil, nil, false
		}
		seen[k] = true
		switch v := it.val; k {
		case 0:
			choices = v
		case 1:
			switch v[0] {
			case 'n':
			case '{':
				rawUsage = v
			default:
				return nil, nil, nil, false
			}
		case 2:
			rawErr = v
		}
	}
	return choices, rawUsage, rawErr, true
}

func passMessages(_ *Request, _ string, b []byte) ([]byte, translate.Usage, error) {
	var probe struct {
		Type    string          `json:"type"`
		Content json.RawMessage `json:"content"`
		Usage   *struct {
			InputTokens  int64 `json:"input_tokens"`
			OutputTokens int64 `json:"output_tokens"`
			CacheRead    int64 `json:"cache_read_input_tokens"`
			CacheWrite   int64 `json:"cache_creation_input_tokens"`
		} `json:"usage"`
	}
	if json.Unmarshal(b, &probe) != nil {
		return nil, translate.Usage{}, errEmpty
	}
	if probe.Type == "error" {
		return nil, translate.Usage{}, &translate.UpstreamError{Message: "error object in a 200 response"}
	}
	if probe.Type != "message" {
		return nil, translate.Usage{}, errEmpty
	}
	var u translate.Usage
	if probe.Usage != nil {
		u = translate.Usage{PromptTokens: probe.Usage.InputTokens, CompletionTokens: probe.Usage.OutputTokens,
			CachedTokens: probe.Usage.CacheRead, CacheWriteTokens: probe.Usage.CacheWrite}
	}
	return b, u, nil
}

func passEmbeddings(_ *Request, _ string, b []byte) ([]byte, translate.Usage, error) {
	var probe struct {
		Data  json.RawMessage `json:"data"`
		Usage *usage          `json:"usage"`
	}
	if json.Unmarshal(b, &probe) != nil || len(probe.Data) == 0 {
		return nil, translate.Usage{}, errEmpty
	}
	return b, probe.Usage.counts(), nil
}

func (u *usage) counts() translate.Usage {
	if u == nil {
		return translate.Usage{}
	}
	out := translate.Usage{PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens}
	if u.PromptTokensDetails != nil {
		out.CachedTokens = u.PromptTokensDetails.CachedTokens
	}
	if u.CompletionTokensDetails != nil {
		out.ReasoningTokens = u.CompletionTokensDetails.ReasoningTokens
	}
	return out
}

var _ = fmt.Sprintf

// warningText joins request warnings and translation losses for
// X-Switchyard-Warning.
func warningText(pre []string, ws []translate.Warning) string {
	all := append([]string(nil), pre...)
	for _, w := range ws {
		all = append(all, w.Code)
	}
	return strings.Join(all, ", ")
}

// MidConversationSystemBeta is the anthropic-beta value under which
// Anthropic's API accepts role "system" entries inside messages (sent by
// Claude Code for model ids it does not know).
const MidConversationSystemBeta = "mid-conversation-system-2026-04-07"

// hasBeta reports whether a comma-separated anthropic-beta header names beta.
func hasBeta(header, beta string) bool {
	for header != "" {
		var v string
		v, header, _ = strings.Cut(header, ",")
		if strings.TrimSpace(v) == beta {
			return true
		}
	}
	return false
}

// nativeAnthropic says the provider is Anthropic's own API (API key or
// Claude Code OAuth), the one upstream known to honour the client's betas.
func nativeAnthropic(p services.Provider) bool {
	return p.ID == "anthropic" || p.ID == "claude-code"
}

// HasSystemEntries reports whether an Anthropic "messages" array holds a
// role "system" entry (a mid-conversation system message). It scans
// without decoding; the handler sets Request.MidSystem from it.
func HasSystemEntries(messages []byte) bool {
	arr, ok := arrayAt(messages, 0)
	for ok && arr.next() {
		role, found := memberValue(arr.val, "role")
		switch {
		case !found:
		case string(role) == `"system"`: // compared in place, no allocation
			return true
		case bytes.IndexByte(role, '\\') >= 0: // an escaped spelling: decode it
			if s, isString := decodeString(role); isString && s == "system" {
				return true
			}
		}
	}
	return false
}

// messagesBody is the messages→anthropic body for a compatible node:
// mid-conversation system entries are folded (10-gateway-api §5.2).
func messagesBody(req *Request, model string) ([]byte, []translate.Warning, error) {
	if req.MidSystem {
		return foldedMessages(req, model)
	}
	return sameFormat(req, model)
}

// messagesBodyNative is messagesBody for Anthropic's own API, which keeps
// them when the client's anthropic-beta names the beta.
func messagesBodyNative(req *Request, model string) ([]byte, []translate.Warning, error) {
	if req.MidSystem && !hasBeta(req.AnthropicBeta, MidConversationSystemBeta) {
		return foldedMessages(req, model)
	}
	return sameFormat(req, model)
}

// foldedMessages is the messages→anthropic body for an upstream that may
// not know mid-conversation system messages (10-gateway-api §5.2): every
// role "system" entry is removed from messages and its text appended, in
// order, to the top-level system as text blocks; warning system_folded.
func foldedMessages(req *Request, model string) ([]byte, []translate.Warning, error) {
	var msgs []json.RawMessage
	if err := json.Unmarshal(req.Body["messages"], &msgs); err != nil {
		return nil, nil, err
	}
	var system []json.RawMessage
	if raw, ok := req.Body["system"]; ok && string(raw) != "null" {
		blocks, err := textBlocks(raw)
		if err != nil {
			return nil, nil, err
		}
		system = append(system, blocks...)
	}
	kept := make([]json.RawMessage, 0, len(msgs))
	for _, m := range msgs {
		var probe struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		}
		if err := json.Unmarshal(m, &probe); err != nil {
			return nil, nil, err
		}
		if probe.Role != "system" {
			kept = append(kept, m)
			continue
		}
		blocks, err := textBlocks(probe.Content)
		if err != nil {
			return nil, nil, err
		}
		system = append(system, blocks...)
	}
	fields := make(map[string]json.RawMessage, len(req.Body))
	for k, v := range req.Body {
		fields[k] = v
	}
	var err error
	if fields["messages"], err = json.Marshal(kept); err != nil {
		return nil, nil, err
	}
	if len(system) > 0 {
		if fields["system"], err = json.Marshal(system); err != nil {
			return nil, nil, err
		}
	}
	b, err := encodeBody(fields, model)
	return b, []translate.Warning{{Code: "system_folded", Message: "Mid-conversation system messages were folded into the top-level system prompt."}}, err
}

// textBlocks reads Anthropic content (a string or blocks) as text blocks;
// a string becomes one block, blocks are kept as sent (cache_control too).
func textBlocks(raw json.RawMessage) ([]json.RawMessage, error) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		if s == "" {
			return nil, nil
		}
		b, err := json.Marshal(map[string]string{"type": "text", "text": s})
		return []json.RawMessage{b}, err
	}
	var blocks []json.RawMessage
	if err := json.Unmarshal(raw, &blocks); err != nil {
		return nil, err
	}
	return blocks, nil
}
