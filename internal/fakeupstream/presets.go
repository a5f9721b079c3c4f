package fakeupstream

import (
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Wire formats, as recorded in Hit.Format.
const (
	FormatOpenAI    = "openai"
	FormatAnthropic = "anthropic"
)

// bodyPreset is one canned provider error. Each mirrors a body seen in the wild closely enough
// for the gateway's classifier; format pins the shape when the original only exists in one.
type bodyPreset struct {
	status  int
	format  string // "" renders in the request's format
	typ     string // OpenAI error.type
	code    string // OpenAI error.code
	param   string
	message string // {key} and {model} are substituted
	// Anthropic rendering when format is "": error.type and message (message defaults to message).
	aType    string
	aMessage string
}

// presets are the rows of the R5 classification table (60-quality.md §2.1).
var presets = map[string]bodyPreset{
	"openai_rate_limit": {status: 429, format: FormatOpenAI, typ: "tokens", code: "rate_limit_exceeded",
		message: "Rate limit reached for {model} in organization org-fake on tokens per min (TPM): Limit 30000, Used 29500, Requested 800. Please try again in 1.2s. Visit https://platform.openai.com/account/rate-limits to learn more."},
	"openai_insufficient_quota": {status: 429, format: FormatOpenAI, typ: "insufficient_quota", code: "insufficient_quota",
		message: "You exceeded your current quota, please check your plan and billing details. For more information on this error, read the docs: https://platform.openai.com/docs/guides/error-codes/api-errors."},
	"anthropic_rate_limit": {status: 429, format: FormatAnthropic, aType: "rate_limit_error",
		message: "This request would exceed the rate limit for your organization of 50 requests per minute. For details, refer to: https://docs.claude.com/en/api/rate-limits."},
	"anthropic_overloaded": {status: 529, format: FormatAnthropic, aType: "overloaded_error", message: "Overloaded"},
	"anthropic_request_not_allowed": {status: 403, format: FormatAnthropic, aType: "permission_error",
		message: "Request not allowed"},
	// new-api style: OpenAI-shaped, Chinese message, no machine-readable code to lean on.
	"quota_cn_403": {status: 403, format: FormatOpenAI, typ: "new_api_error",
		message: "用户额度不足, 剩余额度: $0.000000 (request id: fake)"},
	"model_forbidden_cn_403": {status: 403, format: FormatOpenAI, typ: "new_api_error",
		message: "该令牌无权访问模型 {model} (request id: fake)"},
	"tools_limit_400": {status: 400, typ: "invalid_request_error", code: "array_above_max_length", param: "tools",
		message: "Invalid 'tools': array too long. Expected an array with maximum length 128, but got an array with length 129 instead.",
		aType:   "invalid_request_error"},
	"tools_limit_text_400": {status: 400, typ: "invalid_request_error",
		message: "tools: a maximum of 128 tools are supported per request", aType: "invalid_request_error"},
	"context_length_400": {status: 400, typ: "invalid_request_error", code: "context_length_exceeded", param: "messages",
		message: "This model's maximum context length is 128000 tokens. However, your messages resulted in 131072 tokens. Please reduce the length of the messages.",
		aType:   "invalid_request_error", aMessage: "prompt is too long: 210000 tokens > 200000 maximum"},
	"model_not_found_404": {status: 404, typ: "invalid_request_error", code: "model_not_found",
		message: "The model `{model}` does not exist or you do not have access to it.",
		aType:   "not_found_error", aMessage: "model: {model}"},
	"invalid_key_401": {status: 401, typ: "invalid_request_error", code: "invalid_api_key",
		message: "Incorrect API key provided. You can find your API key at https://platform.openai.com/account/api-keys.",
		aType:   "authentication_error", aMessage: "invalid x-api-key"},
	"account_deactivated_401": {status: 401, typ: "invalid_request_error", code: "account_deactivated",
		message: "This key is associated with a deactivated account. If you feel this is an error, contact us through our help center.",
		aType:   "authentication_error", aMessage: "Your account has been disabled."},
	"payment_required_402": {status: 402, typ: "billing_error", code: "payment_required",
		message: "Payment required: your credit balance is too low to access this API.",
		aType:   "billing_error", aMessage: "Your credit balance is too low to access the API. Please go to Plans & Billing to upgrade or purchase credits."},
	"daily_quota_429": {status: 429, typ: "requests", code: "daily_limit_exceeded",
		message: "You have reached your daily request limit for {model}. Please try again tomorrow.",
		aType:   "rate_limit_error"},
	"reset_text_429": {status: 429, typ: "requests", code: "rate_limit_exceeded",
		message: "Usage limit reached for {model}. Your limit resets in 1h2m3s.", aType: "rate_limit_error"},
	// Repeats the received credential verbatim, as some proxies do; S10 checks the gateway scrubs it.
	"echo_key_401": {status: 401, typ: "invalid_request_error", code: "invalid_api_key",
		message: "Incorrect API key provided: {key}.", aType: "authentication_error"},
	"server_500": {status: 500, typ: "server_error", message: "The server had an error while processing your request. Sorry about that!",
		aType: "api_error", aMessage: "Internal server error"},
	"server_502": {status: 502, typ: "server_error", message: "Bad gateway.", aType: "api_error"},
	"server_503": {status: 503, typ: "server_error", message: "The engine is currently overloaded, please try again later.",
		aType: "api_error", aMessage: "Service unavailable"},
	"server_504":  {status: 504, typ: "server_error", message: "Gateway timeout.", aType: "api_error"},
	"timeout_408": {status: 408, typ: "timeout", message: "Request timed out.", aType: "timeout_error"},
}

// Presets lists the body preset names a Step.Preset (or a Random.Mix entry) may use, sorted.
func Presets() []string {
	names := make([]string, 0, len(presets))
	for name := range presets {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

func isPreset(name string) bool { _, ok := presets[name]; return ok }

// errorSpec is a rendered error, ready to be written in either wire format.
type errorSpec struct {
	status              int
	format              string
	typ, code, param    string
	message             string
	anthropicType, aMsg string
}

// errorFor builds the error of a step: preset first, then the explicit error fields, with
// defaults from the status. ok is false when the step is not an error answer.
func errorFor(st Step, reqFormat, key, model string) (errorSpec, bool) {
	subst := strings.NewReplacer("{key}", key, "{model}", model)
	if st.Preset != "" {
		p := presets[st.Preset]
		e := errorSpec{status: p.status, format: p.format, typ: p.typ, code: p.code, param: p.param,
			message: subst.Replace(p.message), anthropicType: p.aType, aMsg: subst.Replace(p.aMessage)}
		if st.Status != 0 {
			e.status = st.Status
		}
		if e.format == "" {
			e.format = reqFormat
		}
		applyErrorFields(&e, st)
		return e, true
	}
	if st.Status < 400 && (st.Fault == FaultErrorEvent || st.ErrorCode == "" && st.ErrorType == "" && st.ErrorMessage == "") {
		// With FaultErrorEvent the error fields shape the in-band event, not the status line.
		return errorSpec{}, false
	}
	status := st.Status
	if status == 0 {
		status = http.StatusBadRequest
	}
	e := errorSpec{status: status, format: reqFormat, typ: openAIType(status), anthropicType: anthropicType(status),
		message: defaultMessage(status)}
	if st.ErrorCode == "model_not_found" {
		e.message = subst.Replace(presets["model_not_found_404"].message)
		e.aMsg = subst.Replace(presets["model_not_found_404"].aMessage)
	}
	if status == http.StatusTooManyRequests {
		e.code = "rate_limit_exceeded"
	}
	applyErrorFields(&e, st)
	return e, true
}

func applyErrorFields(e *errorSpec, st Step) {
	if st.ErrorType != "" {
		e.typ, e.anthropicType = st.ErrorType, st.ErrorType
	}
	if st.ErrorCode != "" {
		e.code = st.ErrorCode
	}
	if st.ErrorMessage != "" {
		e.message, e.aMsg = st.ErrorMessage, ""
	}
}

// body renders the error in its format.
func (e errorSpec) body() []byte {
	if e.format == FormatAnthropic {
		typ, msg := e.anthropicType, e.aMsg
		if typ == "" {
			typ = anthropicType(e.status)
		}
		if msg == "" {
			msg = e.message
		}
		return mustJSON(anthropicErrorBody{Type: "error", Error: anthropicErrorObj{Type: typ, Message: msg}})
	}
	return mustJSON(openAIErrorBody{Error: openAIErrorObj{Message: e.message, Type: e.typ, Param: nullable(e.param), Code: nullable(e.code)}})
}

func defaultMessage(status int) string {
	if t := http.StatusText(status); t != "" {
		return t + " (fake upstream)"
	}
	return fmt.Sprintf("status %d (fake upstream)", status)
}

func openAIType(status int) string {
	switch {
	case status == http.StatusTooManyRequests:
		return "requests"
	case status == http.StatusRequestTimeout:
		return "timeout"
	case status >= 500:
		return "server_error"
	}
	return "invalid_request_error"
}

func anthropicType(status int) string {
	switch status {
	case 400:
		return "invalid_request_error"
	case 401:
		return "authentication_error"
	case 402:
		return "billing_error"
	case 403:
		return "permission_error"
	case 404:
		return "not_found_error"
	case 408:
		return "timeout_error"
	case 413:
		return "request_too_large"
	case 429:
		return "rate_limit_error"
	case 529:
		return "overloaded_error"
	}
	return "api_error"
}

// HTTPDate formats t as an HTTP-date, the second form of Retry-After.
func HTTPDate(t time.Time) string { return t.UTC().Format(http.TimeFormat) }

// setRateLimitHeaders renders rl into h against now. Style "" follows the request format.
func setRateLimitHeaders(h http.Header, rl RateLimit, reqFormat string, now time.Time) {
	limit := rl.Limit
	if limit == 0 {
		limit = 60
	}
	style := rl.Style
	if style == "" {
		style = reqFormat
	}
	itoa := strconv.Itoa
	switch style {
	case "anthropic":
		reset := now.Add(rl.Reset).UTC().Format(time.RFC3339)
		for _, fam := range []struct {
			name string
			mult int
		}{{"requests", 1}, {"tokens", 1000}, {"input-tokens", 1000}, {"output-tokens", 1000}} {
			p := "anthropic-ratelimit-" + fam.name + "-"
			h.Set(p+"limit", itoa(limit*fam.mult))
			h.Set(p+"remaining", itoa(rl.Remaining*fam.mult))
			h.Set(p+"reset", reset)
		}
	case "codex":
		used := rl.UsedPercent
		if used == 0 {
			used = math.Round(100 * float64(limit-rl.Remaining) / float64(limit))
		}
		window := rl.WindowMinutes
		if window == 0 {
			window = 300
		}
		swindow := rl.SecondaryWindowMinutes
		if swindow == 0 {
			swindow = 10080
		}
		sreset := rl.SecondaryReset
		if sreset == 0 {
			sreset = 7 * 24 * time.Hour
		}
		set := func(which string, used float64, window int, reset time.Duration) {
			p := "x-codex-" + which + "-"
			h.Set(p+"used-percent", strconv.FormatFloat(used, 'f', -1, 64))
			h.Set(p+"window-minutes", itoa(window))
			h.Set(p+"reset-after-seconds", strconv.FormatInt(int64(math.Ceil(reset.Seconds())), 10))
			h.Set(p+"reset-at", strconv.FormatInt(now.Add(reset).Unix(), 10))
		}
		set("primary", used, window, rl.Reset)
		set("secondary", rl.SecondaryUsedPercent, swindow, sreset)
	default: // openai
		reset := rl.Reset.String()
		h.Set("x-ratelimit-limit-requests", itoa(limit))
		h.Set("x-ratelimit-remaining-requests", itoa(rl.Remaining))
		h.Set("x-ratelimit-reset-requests", reset)
		h.Set("x-ratelimit-limit-tokens", itoa(limit*1000))
		h.Set("x-ratelimit-remaining-tokens", itoa(rl.Remaining*1000))
		h.Set("x-ratelimit-reset-tokens", reset)
	}
}

// Built-in fault names for Random.Mix: the R7 chaos mix. Parameters (delays, k) are drawn from the
// same seeded generator as the fault itself, so they replay too.
var builtinFaults = []string{
	"delay",                   // 0–2 s before headers, then healthy
	"slow_headers",            // 3–6 s before headers, then healthy
	"server_503",              // preset
	"server_502",              // preset
	"rate_limit",              // 429 in the request's format with Retry-After 1–2 s
	"reset",                   // reset before headers
	"stall_before_first_byte", // headers flushed, body withheld until the client leaves
	"cut",                     // cut after k ≥ 1 events, eof or rst
	"malformed",               // truncated JSON after k ≥ 1 events
	"error_event",             // in-band error after k ≥ 1 events
	"stall",                   // stall after k ≥ 1 events until the client leaves
}

// FaultNames lists the built-in fault names usable in Random.Mix.
func FaultNames() []string { return slices.Clone(builtinFaults) }

// DefaultMix weighs every built-in fault equally.
func DefaultMix() map[string]float64 {
	m := make(map[string]float64, len(builtinFaults))
	for _, name := range builtinFaults {
		m[name] = 1
	}
	return m
}

func isBuiltinFault(name string) bool { return slices.Contains(builtinFaults, name) }

// namedFault builds the step for a drawn fault. events is the request's content event count, so k
// can land inside the stream.
func namedFault(rd *Random, name string, rng *rand.Rand, events int, format string) Step {
	if st, ok := rd.Faults[name]; ok {
		if st.Name == "" {
			st.Name = name
		}
		return st
	}
	k := 1
	if events > 2 {
		k = 1 + rng.IntN(events-1) // 1..events-1: after the first useful byte, before the end
	}
	uniform := func(lo, hi time.Duration) time.Duration { return lo + time.Duration(rng.Int64N(int64(hi-lo)+1)) }
	st := Step{Name: name}
	switch name {
	case "delay":
		st.Delay = uniform(0, 2*time.Second)
	case "slow_headers":
		st.Delay = uniform(3*time.Second, 6*time.Second)
	case "rate_limit":
		st.Status = http.StatusTooManyRequests
		st.Preset = "openai_rate_limit"
		if format == FormatAnthropic {
			st.Preset = "anthropic_rate_limit"
		}
		st.RetryAfter = strconv.Itoa(1 + rng.IntN(2))
	case "reset":
		st.Fault = FaultReset
	case "stall_before_first_byte":
		st.FirstByteDelay = 24 * time.Hour
	case "cut":
		st.Fault, st.At, st.CutMode = FaultCut, k, CutEOF
		if rng.IntN(2) == 1 {
			st.CutMode = CutRST
		}
	case "malformed":
		st.Fault, st.At = FaultMalformed, k
	case "error_event":
		st.Fault, st.At = FaultErrorEvent, k
	case "stall":
		st.Fault, st.At = FaultStall, k
	default: // a body preset
		st.Preset = name
	}
	return st
}

// Scenario names for cmd/fakeupstream --scenario and for the gateway's --demo mode.
const (
	ScenarioHealthy = "healthy"
	ScenarioDemo    = "demo"
	ScenarioChaos   = "chaos"
)

// Demo model names served by the demo scenario (00-overview.md).
const (
	DemoFast    = "demo-fast"
	DemoLimited = "demo-limited"
	DemoFlaky   = "demo-flaky"
)

// Scenario returns the script file of a named scenario:
//   - healthy: every request succeeds; with faultRate > 0, a seeded DefaultMix schedule at that rate.
//   - demo: models demo-fast (always 200, 20 events 25 ms apart), demo-limited (every 3rd request
//     429 with Retry-After: 15 and rate-limit headers) and demo-flaky (a seeded faultRate, default
//     30 %, of requests answer 503 or, one time in five, are reset before headers), so cooldown,
//     breaker and failover all show in the dashboard within a minute of clicking around.
//   - chaos: every request goes through a seeded DefaultMix schedule at faultRate (default 0.3).
func Scenario(name string, seed uint64, faultRate float64) (ScriptFile, error) {
	if faultRate < 0 || faultRate > 1 {
		return ScriptFile{}, fmt.Errorf("fakeupstream: fault rate %v: want 0..1", faultRate)
	}
	switch name {
	case "", ScenarioHealthy:
		if faultRate == 0 {
			return ScriptFile{}, nil
		}
		return ScriptFile{Default: &Script{Random: &Random{Seed: seed, Rate: faultRate}}}, nil
	case ScenarioChaos:
		if faultRate == 0 {
			faultRate = 0.3
		}
		return ScriptFile{Default: &Script{Random: &Random{Seed: seed, Rate: faultRate}}}, nil
	case ScenarioDemo:
		if faultRate == 0 {
			faultRate = 0.3
		}
		ok := Step{Events: 20, EventGap: 25 * time.Millisecond}
		limited := Step{Name: "demo_rate_limited", Status: http.StatusTooManyRequests, RetryAfter: "15",
			RateLimit:    &RateLimit{Limit: 2, Remaining: 0, Reset: 15 * time.Second},
			ErrorMessage: "Rate limit reached for demo-limited: 2 requests per window. Please try again in 15s."}
		okTwice := ok
		okTwice.Times = 2
		return ScriptFile{
			Models: []string{DemoFast, DemoLimited, DemoFlaky},
			Scripts: []ScriptEntry{
				{Key: "*", Model: DemoFast, Script: Script{Steps: []Step{ok}}},
				{Key: "*", Model: DemoLimited, Script: Script{Steps: []Step{okTwice, limited}, Then: ThenCycle}},
				{Key: "*", Model: DemoFlaky, Script: Script{Steps: []Step{ok}, Random: &Random{
					Seed: seed, Rate: faultRate, Mix: map[string]float64{"server_503": 4, "reset": 1}}}},
			},
		}, nil
	}
	return ScriptFile{}, fmt.Errorf("fakeupstream: unknown scenario %q (want healthy, demo or chaos)", name)
}
