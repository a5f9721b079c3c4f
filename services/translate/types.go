package translate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Warning is one loss signalled to the client (10-gateway-api §6.8).
type Warning struct {
	// Code is the token for X-Switchyard-Warning and the request log,
	// e.g. "param_dropped:logprobs" or "tool_args_repaired".
	Code string
	// Message says in one English sentence what was lost.
	Message string
}

// Usage is the token accounting of one response, in the request log's terms
// (10-gateway-api §11): promptTokens, completionTokens, cachedTokens,
// cacheWriteTokens, reasoningTokens. PromptTokens includes cached and
// cache-write tokens (chat semantics, §6.5).
type Usage struct {
	PromptTokens     int64
	CompletionTokens int64
	CachedTokens     int64
	CacheWriteTokens int64
	ReasoningTokens  int64
}

// UnsupportedError means the request asks for something the target format
// cannot do at all (e.g. n > 1 towards Anthropic). The gateway treats the
// target as incompatible; with none left it answers 400
// unsupported_parameter with Param as `param`.
type UnsupportedError struct {
	Param   string
	Message string
}

// Error names the parameter and why it cannot be served.
func (e *UnsupportedError) Error() string {
	return "translate: unsupported parameter " + e.Param + ": " + e.Message
}

// UpstreamError is an error the upstream reported inside a body or stream
// (an Anthropic `error` event or a chat chunk carrying `error`). Type and
// Code are the upstream's own values, Message is unsanitised upstream text:
// the gateway sanitises it (10-gateway-api §9.4) before showing it.
type UpstreamError struct {
	Type    string
	Code    string
	Message string
}

// Error includes the upstream's type and message.
func (e *UpstreamError) Error() string {
	return "translate: upstream error " + e.Type + ": " + e.Message
}

// ErrMalformed is wrapped by every error about a body or event that is not
// the JSON shape its format requires.
var ErrMalformed = errors.New("malformed body")

// ErrIncomplete means a chat stream ended ([DONE]) without a finish reason:
// not a clean completion (10-gateway-api §7.4).
var ErrIncomplete = errors.New("translate: the upstream stream ended without a finish reason")

// Flags are the catalogue flags translation reads (10-gateway-api §6.1). The
// zero value is the catalogue default (all false).
type Flags struct {
	// MaxCompletionTokens sends max_completion_tokens instead of max_tokens.
	MaxCompletionTokens bool
	// ReasoningEffort means the upstream accepts reasoning_effort.
	ReasoningEffort bool
}

// ResponseOptions carry what a synthesised response needs besides the
// upstream body.
type ResponseOptions struct {
	// Model is written into `model`: the upstream model id that served, or
	// the client's name when routing.echoRequestedModel is on. Empty keeps
	// the upstream body's own `model`.
	Model string
	// RequestID is Switchyard's request id (req_<ULID>); its suffix names
	// synthesised Responses ids (resp_…, msg_…, fc_…). Empty derives them
	// from the upstream id.
	RequestID string
	// Created is when the first upstream byte arrived; zero means now.
	Created time.Time
}

// Stream is an incremental stream translator: fed one upstream SSE event at
// a time (event name, possibly empty, and the joined data payload), it
// returns the client frames to write, complete with their SSE framing.
//
// useful reports whether the upstream event is useful in the sense of
// 10-gateway-api §7.2 (judged on the upstream format). done reports that the
// client's terminal frame was produced (chat clients still need the
// gateway's `data: [DONE]`); later events are ignored. err is an
// *UpstreamError for an upstream error event, ErrIncomplete, or wraps
// ErrMalformed; the stream is then failed and the gateway writes ErrorFrame.
type Stream interface {
	Feed(event string, data []byte) (frames [][]byte, useful bool, done bool, err error)
	// ErrorFrame is the in-band error frame of §7.4 in the client's format.
	ErrorFrame(code, message, errType string) []byte
	// Usage is the usage seen so far, in request-log terms.
	Usage() Usage
}

// warnSet collects warnings, duplicates removed, in order of first occurrence.
type warnSet struct {
	list []Warning
	seen map[string]bool
}

func (w *warnSet) add(code, msg string) {
	if w.seen == nil {
		w.seen = map[string]bool{}
	}
	if w.seen[code] {
		return
	}
	w.seen[code] = true
	w.list = append(w.list, Warning{Code: code, Message: msg})
}

func (w *warnSet) paramDropped(field string) {
	w.add("param_dropped:"+field, "The parameter "+field+" is not supported by the target format and was dropped.")
}

func (w *warnSet) contentDropped(kind string) {
	w.add("content_dropped:"+kind, "Content of kind "+kind+" is not supported by the target format and was dropped.")
}

func (w *warnSet) toolArgsRepaired() {
	w.add("tool_args_repaired", "Tool call arguments that were not a JSON object were replaced by {}.")
}

func malformed(what string) error {
	return fmt.Errorf("translate: %s: %w", what, ErrMalformed)
}

// present returns the raw value of key unless it is absent or null.
func present(body map[string]json.RawMessage, key string) (json.RawMessage, bool) {
	raw, ok := body[key]
	if !ok || isNull(raw) {
		return nil, false
	}
	return raw, true
}

func isNull(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) == 0 || string(t) == "null"
}

// asString decodes raw as a JSON string.
func asString(raw json.RawMessage) (string, bool) {
	var s string
	if len(raw) == 0 || json.Unmarshal(raw, &s) != nil {
		return "", false
	}
	return s, true
}

// firstByte is the first non-space byte of raw, or 0.
func firstByte(raw json.RawMessage) byte {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 {
		return 0
	}
	return t[0]
}

// objectJSON returns raw compacted when it is a JSON object.
func objectJSON(raw []byte) (json.RawMessage, bool) {
	if firstByte(raw) != '{' || !json.Valid(raw) {
		return nil, false
	}
	var buf bytes.Buffer
	if json.Compact(&buf, raw) != nil {
		return nil, false
	}
	return buf.Bytes(), true
}

// toolArgsObject turns chat `arguments` into an Anthropic `input` object.
// Empty arguments mean "no arguments" and are not a repair.
func toolArgsObject(args string, w *warnSet) json.RawMessage {
	if strings.TrimSpace(args) == "" {
		return json.RawMessage(`{}`)
	}
	if obj, ok := objectJSON([]byte(args)); ok {
		return obj
	}
	if w != nil {
		w.toolArgsRepaired()
	}
	return json.RawMessage(`{}`)
}

// rawArguments accepts `arguments` as a JSON string (the standard) or, from
// lenient clients, as an inline object.
func rawArguments(raw json.RawMessage) string {
	if s, ok := asString(raw); ok {
		return s
	}
	if obj, ok := objectJSON(raw); ok {
		return string(obj)
	}
	return ""
}

// field and object build JSON objects whose keys keep the given order.
type field struct {
	k string
	v any
}

type object []field

func (o object) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, f := range o {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := marshal(f.k)
		b.Write(k)
		b.WriteByte(':')
		v, err := marshal(f.v)
		if err != nil {
			return nil, err
		}
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// marshal is json.Marshal without HTML escaping: model output is full of
// `<`, `>` and `&`, and \u003c-style escapes only bloat the frames.
func marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// mustJSON marshals values built by this package, which cannot fail; a
// failure would be a programming error, reported as "null" rather than a panic.
func mustJSON(v any) []byte {
	b, err := marshal(v)
	if err != nil {
		return []byte("null")
	}
	return b
}

// Stop reasons (10-gateway-api §6.5).

func anthropicToFinish(stop string) string {
	switch stop {
	case "max_tokens", "model_context_window_exceeded":
		return "length"
	case "tool_use":
		return "tool_calls"
	case "refusal":
		return "content_filter"
	}
	return "stop"
}

func finishToAnthropic(finish string) string {
	switch finish {
	case "length":
		return "max_tokens"
	case "tool_calls", "function_call":
		return "tool_use"
	case "content_filter":
		return "refusal"
	}
	return "end_turn"
}

// idSuffix is the part of an id after its kind prefix ("req_", "chatcmpl-",
// "msg_"), restricted to characters safe in every format's ids.
func idSuffix(id string) string {
	for _, p := range []string{"req_", "chatcmpl-", "msg_", "resp_"} {
		if strings.HasPrefix(id, p) {
			id = id[len(p):]
			break
		}
	}
	return sanitizeID(id)
}

// sanitizeID replaces every character outside [A-Za-z0-9_-] by '_'
// (10-gateway-api §6.2); it is applied identically to tool_use ids and
// tool_use_ids so pairs keep matching.
func sanitizeID(id string) string {
	if id == "" {
		return "_"
	}
	var b strings.Builder
	for _, c := range id {
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' {
			b.WriteRune(c)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}

func unixNow(t time.Time) int64 {
	if t.IsZero() {
		t = time.Now()
	}
	return t.Unix()
}

// WantsUsageChunk reports whether a chat client asked for the usage-only
// chunk (stream_options.include_usage: true); the gateway copies it into
// AnthropicToChatStream.IncludeUsage.
func WantsUsageChunk(body map[string]json.RawMessage) bool {
	raw, ok := present(body, "stream_options")
	if !ok {
		return false
	}
	var so struct {
		IncludeUsage bool `json:"include_usage"`
	}
	_ = json.Unmarshal(raw, &so)
	return so.IncludeUsage
}
