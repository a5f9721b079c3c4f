package fakeupstream

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"
)

// FaultKind names the failure a Step injects. A step carries at most one fault; At says after how
// many content events it strikes for the stream-shaped faults.
type FaultKind string

const (
	// FaultNone answers normally.
	FaultNone FaultKind = ""
	// FaultReset hijacks the connection before any header and closes it with SO_LINGER 0, so the
	// client sees a TCP RST: the "upstream died before answering" case that must fail over.
	FaultReset FaultKind = "reset_before_headers"
	// FaultStall sends At content events, then holds the connection open without writing until the
	// client leaves (or StallFor elapses, then the body ends without a success marker). This is the
	// case a throughput watchdog exists for; the fake never ends it on its own by default.
	FaultStall FaultKind = "stall"
	// FaultCut sends At content events, then ends the body without the terminal marker ([DONE] or
	// message_stop), the way CutMode says.
	FaultCut FaultKind = "cut"
	// FaultMalformed sends At good content events, then one event whose JSON is truncated, then
	// ends the body. For JSON responses the body itself is truncated.
	FaultMalformed FaultKind = "malformed"
	// FaultErrorEvent sends At content events, then one in-band provider error event (OpenAI
	// `data: {"error":…}`, Anthropic `event: error`), then ends the body. For JSON responses the
	// error object arrives with status 200, as some providers do.
	FaultErrorEvent FaultKind = "error_event"
	// FaultEmpty200 answers 200 with an empty body.
	FaultEmpty200 FaultKind = "empty_200"
	// FaultHTML502 answers 502 with an nginx-style HTML page, as a broken reverse proxy in front of
	// a provider does; the body is not JSON at all.
	FaultHTML502 FaultKind = "html_502"
)

var faultKinds = map[FaultKind]bool{
	FaultNone: true, FaultReset: true, FaultStall: true, FaultCut: true, FaultMalformed: true,
	FaultErrorEvent: true, FaultEmpty200: true, FaultHTML502: true,
}

// CutMode says how a FaultCut ends the body. The three modes are distinguishable by a client and
// a gateway must treat all of them as a truncated answer.
type CutMode string

const (
	// CutEOF ends the HTTP body cleanly (final chunk sent) but without the success marker: the
	// "truncated_silent" case a careless SSE parser mistakes for success. The default.
	CutEOF CutMode = "eof"
	// CutFIN closes the TCP connection mid-body (FIN, no final chunk): the client's body read fails
	// with an unexpected EOF.
	CutFIN CutMode = "fin"
	// CutRST closes the TCP connection mid-body with SO_LINGER 0: the client sees a reset. The
	// kernel may discard bytes the client had not read yet, so do not count events after an RST.
	CutRST CutMode = "rst"
)

// StreamMode chooses JSON or SSE for a step's success answer.
type StreamMode string

const (
	// StreamAuto follows the request's "stream" flag. The default.
	StreamAuto StreamMode = "auto"
	// StreamJSON answers with one JSON body even when the request asked for a stream.
	StreamJSON StreamMode = "json"
	// StreamSSE answers with an event stream even when the request did not ask for one.
	StreamSSE StreamMode = "sse"
)

// Then says what a Script does once every step has been used its Times.
type Then string

const (
	// ThenRepeatLast keeps answering with the last step. The default, so that
	// Script("k", Step{Status: 429}) means "this key always gets 429".
	ThenRepeatLast Then = "repeat_last"
	// ThenCycle starts again from the first step.
	ThenCycle Then = "cycle"
	// ThenDefault hands over to the server's default script (healthy unless set), as if this
	// script had never been registered.
	ThenDefault Then = "default"
)

// Step is one scripted answer. The zero Step is a healthy 200 that follows the request's stream
// flag and the server's defaults (content, events, event gap, latency).
//
// Fields combine in the order a real exchange happens: Delay, then either a reset or the status
// line and headers, then FirstByteDelay, then the body with EventGap between content events and
// Fault striking after At events.
type Step struct {
	// Name labels the step in the hit log's Action field; empty derives a name from the step.
	Name string `json:"name,omitempty"`
	// Times is how many consecutive requests this step answers before the script moves on.
	// Default 1.
	Times int `json:"times,omitempty"`

	// Status is the HTTP status. 0 means 200, or the preset's status when Preset is set, or 400
	// when only error fields are set.
	Status int `json:"status,omitempty"`
	// Headers are set on the response last, so they override anything the fake computed.
	Headers map[string]string `json:"headers,omitempty"`
	// RetryAfter is the Retry-After value verbatim: delta seconds ("7") or an HTTP-date. See
	// HTTPDate, or RetryAfterDate for a date relative to the fake's clock at answer time.
	RetryAfter string `json:"retry_after,omitempty"`
	// RetryAfterDate, when positive, sets Retry-After to the HTTP-date of the fake's clock plus
	// this duration, computed when the answer is sent. JSON: "retry_after_date": "7s".
	RetryAfterDate time.Duration `json:"-"`
	// RateLimit adds a provider's rate-limit header family (x-ratelimit-*, anthropic-ratelimit-*,
	// x-codex-*), computed against the fake's clock.
	RateLimit *RateLimit `json:"ratelimit,omitempty"`

	// Body, when set, is sent verbatim (Content-Type application/json unless Headers says
	// otherwise). It wins over Preset and the error fields.
	Body string `json:"body,omitempty"`
	// Preset names a canned provider error body (see Presets); it also supplies the status when
	// Status is 0.
	Preset string `json:"preset,omitempty"`
	// ErrorType, ErrorCode and ErrorMessage build an error body in the request's wire format
	// (OpenAI {"error":{…}} or Anthropic {"type":"error","error":{…}}). Unset parts get defaults
	// from the status. ErrorType and ErrorMessage also shape a FaultErrorEvent.
	ErrorType    string `json:"error_type,omitempty"`
	ErrorCode    string `json:"error_code,omitempty"`
	ErrorMessage string `json:"error_message,omitempty"`

	// Stream forces JSON or SSE for a success answer; empty or StreamAuto follows the request.
	Stream StreamMode `json:"stream,omitempty"`
	// Content is the assistant text; empty uses the server's (default DefaultContent).
	Content string `json:"content,omitempty"`
	// Events is how many content events (deltas) the text is split into; 0 uses the server's
	// (default 20). Output tokens equal the number of content events sent.
	Events int `json:"events,omitempty"`
	// FinishReason overrides "stop" (OpenAI) or "end_turn" (Anthropic).
	FinishReason string `json:"finish_reason,omitempty"`
	// ToolCall scripts one round of a tool loop: a request that carries no
	// tool result yet is answered with a request for this tool call (OpenAI
	// tool_calls with finish_reason "tool_calls", Anthropic tool_use with
	// stop_reason "tool_use", JSON or SSE); a request that carries one (a
	// chat "tool" message, an Anthropic tool_result block) gets the normal
	// text answer. The hit log's ToolResult shows what came back.
	ToolCall *ToolCall `json:"tool_call,omitempty"`

	// Delay is the wait before the status line. When DelayMax > Delay the wait is drawn uniformly
	// from [Delay, DelayMax] with the request's seeded generator. Both 0 uses the server latency.
	// The wait ends early when the client goes away. JSON: "delay": "250ms" or
	// "uniform:[100ms,2s]".
	Delay    time.Duration `json:"-"`
	DelayMax time.Duration `json:"-"`
	// FirstByteDelay is the wait after the headers are flushed and before the first body byte.
	// A very long one is a stall before the first byte. JSON: "first_byte_delay".
	FirstByteDelay time.Duration `json:"-"`
	// EventGap is the pause between consecutive content events; 0 uses the server's. JSON:
	// "event_gap".
	EventGap time.Duration `json:"-"`
	// BytesPerSec throttles body writes to this rate, in slices of WriteSize bytes (default: a
	// fiftieth of the rate, at least 1), each flushed.
	BytesPerSec int `json:"bytes_per_sec,omitempty"`
	// WriteSize splits every body write into slices of this many bytes, each flushed, so that a
	// client receives events in fragments. 1 reproduces a byte-at-a-time slicer.
	WriteSize int `json:"write_size,omitempty"`

	// Fault is the failure to inject; see FaultKind. JSON also accepts the flat spec keys
	// reset_before_headers, stall_after, cut_after, malformed_at, error_event_at, empty_200 and
	// html_502.
	Fault FaultKind `json:"fault,omitempty"`
	// At is the number of good content events sent before a stream-shaped fault strikes (clamped
	// to the number of events). 0 strikes right after the preamble (role delta, or message_start,
	// content_block_start and ping), which is still before the first useful byte.
	At int `json:"at,omitempty"`
	// CutMode is how FaultCut ends the body; default CutEOF.
	CutMode CutMode `json:"cut_mode,omitempty"`
	// StallFor bounds a FaultStall; 0 stalls until the client leaves or the server closes.
	// JSON: "stall_for".
	StallFor time.Duration `json:"-"`
}

// ToolCall is the tool call a Step asks for.
type ToolCall struct {
	// Name is the tool's name. When Names is set, the first of Names that
	// the request offers in its tools wins (agents name their shell tool
	// differently), and Name is the fallback.
	Name  string   `json:"name"`
	Names []string `json:"names,omitempty"`
	// Arguments is the call's arguments as a JSON object text, default "{}".
	// ArgumentsFor overrides it per chosen name.
	Arguments    string            `json:"arguments,omitempty"`
	ArgumentsFor map[string]string `json:"arguments_for,omitempty"`
	// ID is the call id; default "call_fake_<seq>" (OpenAI) or
	// "toolu_fake_<seq>" (Anthropic).
	ID string `json:"id,omitempty"`
}

// Script is the behaviour of one (credential, model) pair: steps answered in order, then Then.
// With Random set, each request first draws from the seeded fault schedule; a drawn fault answers
// that request and the steps do not advance, otherwise the next step answers.
type Script struct {
	Steps  []Step  `json:"steps,omitempty"`
	Then   Then    `json:"then,omitempty"`
	Random *Random `json:"random,omitempty"`
}

// Random is a seeded fault schedule: each attempt is healthy or, with probability Rate, one fault
// drawn from Mix by weight. The draw is a pure function of (Seed, nonce, attempt number for that
// nonce), so a chaos run replays exactly whatever the goroutine scheduling; requests without a
// nonce fall back to arrival order and are marked non-reproducible in the hit log. A drawn fault
// answers with the server's default content and pacing, not with those of the script's steps.
type Random struct {
	// Seed seeds the PCG generator. Log it in the test so a failure can be replayed.
	Seed uint64 `json:"seed"`
	// Rate is the probability, in [0, 1], that an attempt is faulted.
	Rate float64 `json:"rate"`
	// Mix maps fault names to relative weights. Names are custom Faults first, then the built-in
	// faults (see FaultNames), then body presets (see Presets). Empty means DefaultMix.
	Mix map[string]float64 `json:"mix,omitempty"`
	// Faults defines or overrides named faults for Mix.
	Faults map[string]Step `json:"faults,omitempty"`
}

// RateLimit renders one provider's rate-limit header family. Token figures are the request
// figures × 1000, which is all the gateway's parsers need to see.
type RateLimit struct {
	// Style is "openai" (x-ratelimit-{limit,remaining,reset}-{requests,tokens}, resets as Go
	// durations such as "6m0s"), "anthropic" (anthropic-ratelimit-{requests,tokens,input-tokens,
	// output-tokens}-{limit,remaining,reset}, resets as RFC 3339), "codex" (x-codex-primary-* and
	// x-codex-secondary-*), or empty to follow the request's wire format.
	Style string `json:"style,omitempty"`
	// Limit is the request limit of the window; default 60.
	Limit int `json:"limit,omitempty"`
	// Remaining is the requests left in the window.
	Remaining int `json:"remaining"`
	// Reset is the time until the window resets. JSON: "reset": "6m0s".
	Reset time.Duration `json:"-"`
	// UsedPercent is codex's primary used percentage; 0 derives it from Limit and Remaining.
	UsedPercent float64 `json:"used_percent,omitempty"`
	// WindowMinutes is codex's primary window; default 300.
	WindowMinutes int `json:"window_minutes,omitempty"`
	// SecondaryUsedPercent, SecondaryWindowMinutes (default 10080) and SecondaryReset (default
	// 7 days) fill codex's secondary set.
	SecondaryUsedPercent   float64       `json:"secondary_used_percent,omitempty"`
	SecondaryWindowMinutes int           `json:"secondary_window_minutes,omitempty"`
	SecondaryReset         time.Duration `json:"-"`
}

// ScriptFile is the JSON form of a whole configuration, read by cmd/fakeupstream --script and by
// POST /_fake/script, and applied with Server.Apply.
//
//	{
//	  "labels": {"sk-real-looking-key": "conn-a"},
//	  "models": ["model-x", "model-y"],
//	  "default": {"random": {"seed": 7, "rate": 0.3}},
//	  "scripts": [
//	    {"key": "fk-limited", "steps": [{"status": 429, "retry_after": "7"}]},
//	    {"key": "fk-missing", "model": "model-x", "steps": [{"preset": "model_not_found_404"}]},
//	    {"key": "*", "model": "slow", "steps": [{"delay": "uniform:[100ms,2s]", "cut_after": 3}], "then": "cycle"}
//	  ]
//	}
type ScriptFile struct {
	// Labels maps received credentials to the names the hit log shows (see Server.Label).
	Labels map[string]string `json:"labels,omitempty"`
	// Models replaces the default model list of GET /v1/models.
	Models []string `json:"models,omitempty"`
	// KeyModels sets the model list per credential or label.
	KeyModels map[string][]string `json:"key_models,omitempty"`
	// Default replaces the script of requests no entry matches.
	Default *Script `json:"default,omitempty"`
	// Scripts are registered in order; a later entry for the same (key, model) replaces an
	// earlier one.
	Scripts []ScriptEntry `json:"scripts,omitempty"`
}

// ScriptEntry registers Script for Key (a credential, a label or "*") and Model (a model name or
// "*"; empty means "*").
type ScriptEntry struct {
	Key   string `json:"key"`
	Model string `json:"model,omitempty"`
	Script
}

// LoadScriptFile reads and validates a ScriptFile from path.
func LoadScriptFile(path string) (ScriptFile, error) {
	f, err := os.Open(path)
	if err != nil {
		return ScriptFile{}, fmt.Errorf("fakeupstream: %w", err)
	}
	defer f.Close()
	sf, err := ParseScriptFile(f)
	if err != nil {
		return ScriptFile{}, fmt.Errorf("fakeupstream: %s: %w", path, err)
	}
	return sf, nil
}

// ParseScriptFile decodes and validates a ScriptFile. Unknown fields are errors, because a typo in
// a chaos script would otherwise silently test the healthy path.
func ParseScriptFile(r io.Reader) (ScriptFile, error) {
	var sf ScriptFile
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&sf); err != nil {
		return ScriptFile{}, fmt.Errorf("decode script file: %w", err)
	}
	if err := sf.Validate(); err != nil {
		return ScriptFile{}, err
	}
	return sf, nil
}

// Validate reports every problem in the file at once.
func (sf ScriptFile) Validate() error {
	var errs []error
	if sf.Default != nil {
		if err := sf.Default.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("default: %w", err))
		}
	}
	for i, e := range sf.Scripts {
		if e.Key == "" {
			errs = append(errs, fmt.Errorf("scripts[%d]: key is empty (use \"*\" for any key)", i))
		}
		if err := e.Script.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("scripts[%d] (%s/%s): %w", i, e.Key, e.Model, err))
		}
	}
	return errors.Join(errs...)
}

// Validate reports every problem in the script at once.
func (sc Script) Validate() error {
	var errs []error
	switch sc.Then {
	case "", ThenRepeatLast, ThenCycle, ThenDefault:
	default:
		errs = append(errs, fmt.Errorf("then %q: want repeat_last, cycle or default", sc.Then))
	}
	for i, st := range sc.Steps {
		if err := st.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("steps[%d]: %w", i, err))
		}
	}
	if sc.Random != nil {
		if err := sc.Random.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("random: %w", err))
		}
	}
	return errors.Join(errs...)
}

// Validate reports every problem in the schedule at once.
func (rd Random) Validate() error {
	var errs []error
	if rd.Rate < 0 || rd.Rate > 1 {
		errs = append(errs, fmt.Errorf("rate %v: want 0..1", rd.Rate))
	}
	for name, w := range rd.Mix {
		if w < 0 {
			errs = append(errs, fmt.Errorf("mix %q: negative weight %v", name, w))
		}
		if _, ok := rd.Faults[name]; ok {
			continue
		}
		if !isBuiltinFault(name) && !isPreset(name) {
			errs = append(errs, fmt.Errorf("mix %q: not a custom fault, built-in fault or preset", name))
		}
	}
	for name, st := range rd.Faults {
		if err := st.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("faults %q: %w", name, err))
		}
	}
	return errors.Join(errs...)
}

// Validate reports every problem in the step at once.
func (st Step) Validate() error {
	var errs []error
	if st.Times < 0 {
		errs = append(errs, fmt.Errorf("times %d: must not be negative", st.Times))
	}
	if st.Status != 0 && (st.Status < 100 || st.Status > 599) {
		errs = append(errs, fmt.Errorf("status %d: want 100..599", st.Status))
	}
	if st.Preset != "" && !isPreset(st.Preset) {
		errs = append(errs, fmt.Errorf("preset %q: unknown (see fakeupstream.Presets)", st.Preset))
	}
	switch st.Stream {
	case "", StreamAuto, StreamJSON, StreamSSE:
	default:
		errs = append(errs, fmt.Errorf("stream %q: want auto, json or sse", st.Stream))
	}
	if !faultKinds[st.Fault] {
		errs = append(errs, fmt.Errorf("fault %q: unknown", st.Fault))
	}
	switch st.CutMode {
	case "", CutEOF, CutFIN, CutRST:
	default:
		errs = append(errs, fmt.Errorf("cut_mode %q: want eof, fin or rst", st.CutMode))
	}
	if st.RateLimit != nil {
		switch st.RateLimit.Style {
		case "", "openai", "anthropic", "codex":
		default:
			errs = append(errs, fmt.Errorf("ratelimit style %q: want openai, anthropic or codex", st.RateLimit.Style))
		}
	}
	for name, d := range map[string]time.Duration{
		"delay": st.Delay, "delay max": st.DelayMax, "first_byte_delay": st.FirstByteDelay,
		"event_gap": st.EventGap, "stall_for": st.StallFor, "retry_after_date": st.RetryAfterDate,
	} {
		if d < 0 {
			errs = append(errs, fmt.Errorf("%s %v: must not be negative", name, d))
		}
	}
	for name, n := range map[string]int{"events": st.Events, "at": st.At, "bytes_per_sec": st.BytesPerSec, "write_size": st.WriteSize} {
		if n < 0 {
			errs = append(errs, fmt.Errorf("%s %d: must not be negative", name, n))
		}
	}
	return errors.Join(errs...)
}

// stepJSON is the wire form of Step: durations as Go duration strings (or numbers of
// milliseconds), the uniform delay syntax, and the flat fault keys of the spec.
type stepJSON struct {
	plainStep
	Delay          *delaySpec    `json:"delay,omitempty"`
	FirstByteDelay *jsonDuration `json:"first_byte_delay,omitempty"`
	EventGap       *jsonDuration `json:"event_gap,omitempty"`
	StallFor       *jsonDuration `json:"stall_for,omitempty"`
	RetryAfterDate *jsonDuration `json:"retry_after_date,omitempty"`

	ResetBeforeHeaders bool `json:"reset_before_headers,omitempty"`
	StallAfter         *int `json:"stall_after,omitempty"`
	CutAfter           *int `json:"cut_after,omitempty"`
	MalformedAt        *int `json:"malformed_at,omitempty"`
	ErrorEventAt       *int `json:"error_event_at,omitempty"`
	Empty200           bool `json:"empty_200,omitempty"`
	HTML502            bool `json:"html_502,omitempty"`
}

type plainStep Step

// UnmarshalJSON accepts the spec's step syntax; see Step and ScriptFile.
func (st *Step) UnmarshalJSON(b []byte) error {
	var aux stepJSON
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&aux); err != nil {
		return err
	}
	out := Step(aux.plainStep)
	if aux.Delay != nil {
		out.Delay, out.DelayMax = aux.Delay.min, aux.Delay.max
	}
	out.FirstByteDelay = aux.FirstByteDelay.get()
	out.EventGap = aux.EventGap.get()
	out.StallFor = aux.StallFor.get()
	out.RetryAfterDate = aux.RetryAfterDate.get()

	var set []string
	fault := func(kind FaultKind, at *int, on bool) {
		if at == nil && !on {
			return
		}
		set = append(set, string(kind))
		out.Fault = kind
		if at != nil {
			out.At = *at
		}
	}
	fault(FaultReset, nil, aux.ResetBeforeHeaders)
	fault(FaultStall, aux.StallAfter, false)
	fault(FaultCut, aux.CutAfter, false)
	fault(FaultMalformed, aux.MalformedAt, false)
	fault(FaultErrorEvent, aux.ErrorEventAt, false)
	fault(FaultEmpty200, nil, aux.Empty200)
	fault(FaultHTML502, nil, aux.HTML502)
	if aux.plainStep.Fault != "" {
		set = append(set, "fault")
		out.Fault = aux.plainStep.Fault
	}
	if len(set) > 1 {
		return fmt.Errorf("step sets more than one fault: %s", strings.Join(set, ", "))
	}
	*st = out
	return nil
}

// MarshalJSON writes the form UnmarshalJSON reads, with the fault as "fault" and "at".
func (st Step) MarshalJSON() ([]byte, error) {
	aux := stepJSON{plainStep: plainStep(st)}
	if st.Delay != 0 || st.DelayMax != 0 {
		aux.Delay = &delaySpec{min: st.Delay, max: max(st.Delay, st.DelayMax)}
	}
	aux.FirstByteDelay = optDuration(st.FirstByteDelay)
	aux.EventGap = optDuration(st.EventGap)
	aux.StallFor = optDuration(st.StallFor)
	aux.RetryAfterDate = optDuration(st.RetryAfterDate)
	return json.Marshal(aux)
}

type rateLimitJSON struct {
	plainRateLimit
	Reset          *jsonDuration `json:"reset,omitempty"`
	SecondaryReset *jsonDuration `json:"secondary_reset,omitempty"`
}

type plainRateLimit RateLimit

// UnmarshalJSON reads resets as Go durations ("6m0s") or milliseconds.
func (rl *RateLimit) UnmarshalJSON(b []byte) error {
	var aux rateLimitJSON
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&aux); err != nil {
		return err
	}
	*rl = RateLimit(aux.plainRateLimit)
	rl.Reset = aux.Reset.get()
	rl.SecondaryReset = aux.SecondaryReset.get()
	return nil
}

// MarshalJSON writes the form UnmarshalJSON reads.
func (rl RateLimit) MarshalJSON() ([]byte, error) {
	return json.Marshal(rateLimitJSON{
		plainRateLimit: plainRateLimit(rl),
		Reset:          optDuration(rl.Reset),
		SecondaryReset: optDuration(rl.SecondaryReset),
	})
}

// jsonDuration reads "250ms"-style strings or plain numbers of milliseconds.
type jsonDuration time.Duration

func optDuration(d time.Duration) *jsonDuration {
	if d == 0 {
		return nil
	}
	j := jsonDuration(d)
	return &j
}

func (d *jsonDuration) get() time.Duration {
	if d == nil {
		return 0
	}
	return time.Duration(*d)
}

func (d jsonDuration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

func (d *jsonDuration) UnmarshalJSON(b []byte) error {
	v, err := parseDurationJSON(b)
	if err != nil {
		return err
	}
	*d = jsonDuration(v)
	return nil
}

func parseDurationJSON(b []byte) (time.Duration, error) {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		return parseDuration(s)
	}
	var ms float64
	if err := json.Unmarshal(b, &ms); err != nil {
		return 0, fmt.Errorf("duration %s: want a string such as \"250ms\" or a number of milliseconds", b)
	}
	return time.Duration(ms * float64(time.Millisecond)), nil
}

func parseDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if ms, err := strconv.ParseFloat(s, 64); err == nil {
		return time.Duration(ms * float64(time.Millisecond)), nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("duration %q: %w", s, err)
	}
	return d, nil
}

// delaySpec is a fixed delay or "uniform:[a,b]".
type delaySpec struct{ min, max time.Duration }

func (d delaySpec) MarshalJSON() ([]byte, error) {
	if d.max > d.min {
		return json.Marshal(fmt.Sprintf("uniform:[%s,%s]", d.min, d.max))
	}
	return json.Marshal(d.min.String())
}

func (d *delaySpec) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(s), "uniform:"); ok {
			lo, hi, err := parseUniform(rest)
			if err != nil {
				return err
			}
			*d = delaySpec{min: lo, max: hi}
			return nil
		}
	}
	v, err := parseDurationJSON(b)
	if err != nil {
		return err
	}
	*d = delaySpec{min: v, max: v}
	return nil
}

// parseUniform reads the "[a,b]" part of "uniform:[a,b]".
func parseUniform(s string) (lo, hi time.Duration, err error) {
	s = strings.TrimSpace(s)
	if !strings.HasPrefix(s, "[") || !strings.HasSuffix(s, "]") {
		return 0, 0, fmt.Errorf("delay uniform:%s: want uniform:[a,b]", s)
	}
	a, b, ok := strings.Cut(s[1:len(s)-1], ",")
	if !ok {
		return 0, 0, fmt.Errorf("delay uniform:%s: want uniform:[a,b]", s)
	}
	if lo, err = parseDuration(a); err != nil {
		return 0, 0, err
	}
	if hi, err = parseDuration(b); err != nil {
		return 0, 0, err
	}
	if hi < lo {
		return 0, 0, fmt.Errorf("delay uniform:%s: upper bound below lower bound", s)
	}
	return lo, hi, nil
}
