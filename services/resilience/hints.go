package resilience

import (
	"encoding/json"
	"math"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Retry-hint sources, as the request log records them (20-resilience §1.5).
const (
	HintSourceHeader   = "header"
	HintSourceBodyJSON = "body_json"
	HintSourceBodyText = "body_text"
)

func parseRetryHint(h http.Header, body []byte, doc any, now time.Time) (time.Duration, string) {
	if d, ok := hintFromHeaders(h, now); ok {
		return d, HintSourceHeader
	}
	if d, ok := hintFromBodyJSON(doc); ok {
		return d, HintSourceBodyJSON
	}
	if d, ok := hintFromText(string(body), now); ok {
		return d, HintSourceBodyText
	}
	return 0, ""
}

// hintFromHeaders walks the header sources in precedence order.
func hintFromHeaders(h http.Header, now time.Time) (time.Duration, bool) {
	if len(h) == 0 {
		return 0, false
	}
	if v := clsHeader(h, "Retry-After-Ms"); v != "" {
		if d, ok := hintScaled(v, time.Millisecond); ok {
			return d, true
		}
	}
	if v := clsHeader(h, "Retry-After"); v != "" {
		if d, ok := hintScaled(v, time.Second); ok {
			return d, true
		}
		if t, err := http.ParseTime(v); err == nil {
			if d := t.Sub(now); d > 0 {
				return d, true
			}
		}
	}
	if v := clsHeader(h, "X-RateLimit-Reset"); v != "" {
		if d, ok := hintResetNumber(v, now); ok {
			return d, true
		}
	}
	if d, ok := pickHintDimension(h, openAIDimensions, func(v string) (time.Duration, bool) {
		return hintGoDuration(v)
	}); ok {
		return d, true
	}
	if d, ok := pickHintDimension(h, anthropicDimensions, func(v string) (time.Duration, bool) {
		return hintRFC3339(v, now)
	}); ok {
		return d, true
	}
	return hintCodex(h, now)
}

// hintDimension names the reset and remaining headers of one rate-limit dimension.
type hintDimension struct{ reset, remaining string }

var (
	openAIDimensions = []hintDimension{
		{"x-ratelimit-reset-requests", "x-ratelimit-remaining-requests"},
		{"x-ratelimit-reset-tokens", "x-ratelimit-remaining-tokens"},
	}
	anthropicDimensions = []hintDimension{
		{"anthropic-ratelimit-requests-reset", "anthropic-ratelimit-requests-remaining"},
		{"anthropic-ratelimit-tokens-reset", "anthropic-ratelimit-tokens-remaining"},
		{"anthropic-ratelimit-input-tokens-reset", "anthropic-ratelimit-input-tokens-remaining"},
		{"anthropic-ratelimit-output-tokens-reset", "anthropic-ratelimit-output-tokens-remaining"},
	}
)

// pickHintDimension returns the reset of the exhausted dimension (remaining 0;
// the largest if several are), else the largest valid reset of any dimension.
func pickHintDimension(h http.Header, dims []hintDimension, parse func(string) (time.Duration, bool)) (time.Duration, bool) {
	var best, bestZero time.Duration
	for _, dim := range dims {
		v := clsHeader(h, dim.reset)
		if v == "" {
			continue
		}
		d, ok := parse(v)
		if !ok {
			continue
		}
		best = max(best, d)
		if rem, err := strconv.ParseFloat(clsHeader(h, dim.remaining), 64); err == nil && rem == 0 {
			bestZero = max(bestZero, d)
		}
	}
	if bestZero > 0 {
		return bestZero, true
	}
	return best, best > 0
}

// hintCodex reads the Codex plan windows: only a window used up (used
// percent ≥ 100) carries a hint; of two, the later reset wins, since the
// account serves again only when both have reset.
func hintCodex(h http.Header, now time.Time) (time.Duration, bool) {
	var best time.Duration
	for _, w := range []string{"primary", "secondary"} {
		used, err := strconv.ParseFloat(clsHeader(h, "x-codex-"+w+"-used-percent"), 64)
		if err != nil || math.IsNaN(used) || used < 100 {
			continue
		}
		d, ok := hintScaled(clsHeader(h, "x-codex-"+w+"-reset-after-seconds"), time.Second)
		if !ok {
			at := clsHeader(h, "x-codex-"+w+"-reset-at")
			if d, ok = hintEpoch(at, now); !ok {
				d, ok = hintRFC3339(at, now)
			}
		}
		if ok {
			best = max(best, d)
		}
	}
	return best, best > 0
}

// hintResetNumber reads an X-RateLimit-Reset value: < 1e9 delta seconds,
// < 1e12 epoch seconds, else epoch milliseconds.
func hintResetNumber(v string, now time.Time) (time.Duration, bool) {
	n, ok := hintFloat(v)
	if !ok || n <= 0 {
		return 0, false
	}
	if n < 1e9 {
		return hintDuration(n, time.Second)
	}
	return hintEpoch(v, now)
}

// hintEpoch reads an absolute epoch instant (seconds below 1e12, else
// milliseconds) and returns the time left until it.
func hintEpoch(v string, now time.Time) (time.Duration, bool) {
	n, ok := hintFloat(v)
	if !ok || n < 1e9 {
		return 0, false
	}
	nowMs := float64(now.UnixMilli())
	if n < 1e12 {
		return hintDuration(n*1000-nowMs, time.Millisecond)
	}
	return hintDuration(n-nowMs, time.Millisecond)
}

// hintGoDuration reads an OpenAI reset value ("20ms", "1s", "6m0s",
// "1h2m3s"); a bare number is seconds.
func hintGoDuration(v string) (time.Duration, bool) {
	v = strings.ToLower(strings.TrimSpace(v))
	if d, err := time.ParseDuration(v); err == nil {
		return d, d > 0
	}
	return hintScaled(v, time.Second)
}

func hintRFC3339(v string, now time.Time) (time.Duration, bool) {
	t, err := time.Parse(time.RFC3339, strings.TrimSpace(v))
	if err != nil {
		return 0, false
	}
	d := t.Sub(now)
	return d, d > 0
}

// hintScaled reads a decimal number of units.
func hintScaled(v string, unit time.Duration) (time.Duration, bool) {
	n, ok := hintFloat(v)
	if !ok {
		return 0, false
	}
	return hintDuration(n, unit)
}

func hintFloat(v string) (float64, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	n, err := strconv.ParseFloat(v, 64)
	if err != nil || math.IsNaN(n) || math.IsInf(n, 0) {
		return 0, false
	}
	return n, true
}

// hintDuration converts n units into a positive duration, saturating instead
// of overflowing; zero and negative amounts are invalid.
func hintDuration(n float64, unit time.Duration) (time.Duration, bool) {
	if math.IsNaN(n) || n <= 0 {
		return 0, false
	}
	x := n * float64(unit)
	if x >= math.MaxInt64 {
		return time.Duration(math.MaxInt64), true
	}
	d := time.Duration(x)
	return d, d > 0
}

// clsDecodeJSON parses a JSON error body, nil when it is not JSON.
func clsDecodeJSON(body []byte) any {
	s := strings.TrimSpace(string(body))
	if s == "" || (s[0] != '{' && s[0] != '[') {
		return nil
	}
	var doc any
	if err := json.Unmarshal([]byte(s), &doc); err != nil {
		return nil
	}
	return doc
}

// clsJSONObjects returns the error objects of a body: the object itself, or the
// elements of a top-level array (Gemini sometimes wraps its error in one).
func clsJSONObjects(doc any) []map[string]any {
	switch v := doc.(type) {
	case map[string]any:
		return []map[string]any{v}
	case []any:
		var out []map[string]any
		for _, e := range v {
			if m, ok := e.(map[string]any); ok {
				out = append(out, m)
			}
		}
		return out
	}
	return nil
}

// hintFromBodyJSON reads retry_after, error.retry_after (seconds) and
// Google's RetryInfo.retryDelay.
func hintFromBodyJSON(doc any) (time.Duration, bool) {
	objs := clsJSONObjects(doc)
	for _, o := range objs {
		if d, ok := hintJSONSeconds(o["retry_after"]); ok {
			return d, true
		}
		if e, ok := o["error"].(map[string]any); ok {
			if d, ok := hintJSONSeconds(e["retry_after"]); ok {
				return d, true
			}
		}
	}
	for _, o := range objs {
		e, _ := o["error"].(map[string]any)
		if e == nil {
			e = o
		}
		details, _ := e["details"].([]any)
		for _, det := range details {
			m, ok := det.(map[string]any)
			if !ok {
				continue
			}
			if t, _ := m["@type"].(string); t != "" && !strings.HasSuffix(t, "RetryInfo") {
				continue
			}
			if d, ok := hintJSONDelay(m["retryDelay"]); ok {
				return d, true
			}
		}
	}
	return 0, false
}

func hintJSONSeconds(v any) (time.Duration, bool) {
	switch n := v.(type) {
	case float64:
		return hintDuration(n, time.Second)
	case string:
		return hintScaled(n, time.Second)
	}
	return 0, false
}

// hintJSONDelay reads a protobuf Duration in JSON: "26.6s", a number of seconds,
// or {"seconds": 26, "nanos": 600000000}.
func hintJSONDelay(v any) (time.Duration, bool) {
	switch x := v.(type) {
	case string:
		return hintGoDuration(x)
	case float64:
		return hintDuration(x, time.Second)
	case map[string]any:
		var secs float64
		switch s := x["seconds"].(type) {
		case float64:
			secs = s
		case string:
			secs, _ = hintFloat(s)
		}
		nanos, _ := x["nanos"].(float64)
		return hintDuration(secs+nanos/1e9, time.Second)
	}
	return 0, false
}

var (
	// hintPhraseRe finds a relative hint; group 1 is the amount (a number or
	// a Go duration), group 2 an optional unit word after a space.
	hintPhraseRe = regexp.MustCompile(`(?i)(?:retry[ -]after|retry in|try again in|resets? in)[:\s]+(?:about\s+|~)?` +
		`([0-9][0-9.]*(?:[a-zµ]+[0-9.]*)*)(?:\s*(milliseconds?|msecs?|ms|seconds?|secs?|s|minutes?|mins?|m|hours?|hrs?|h|days?|d)\b)?`)
	// hintResetAtRe finds "reset(s) at <RFC 3339>".
	hintResetAtRe = regexp.MustCompile(`(?i)resets?\s+at[:\s]+(\d{4}-\d{2}-\d{2}[t ]\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:z|[+-]\d{2}:\d{2}))`)
	hintAmountRe  = regexp.MustCompile(`^([0-9]+(?:\.[0-9]+)?)([a-zµ]*)$`)
)

// hintFromText reads the body text patterns: the leftmost valid relative
// phrase, else "reset(s) at <RFC 3339>".
func hintFromText(text string, now time.Time) (time.Duration, bool) {
	if text == "" {
		return 0, false
	}
	for _, m := range hintPhraseRe.FindAllStringSubmatchIndex(text, -1) {
		// "retry after 2025-01-01T…" is a date, not 2025 seconds.
		if end := m[3]; end < len(text) && (text[end] == '-' || text[end] == ':') {
			continue
		}
		unit := ""
		if m[4] >= 0 {
			unit = text[m[4]:m[5]]
		}
		if d, ok := hintAmount(text[m[2]:m[3]], unit); ok {
			return d, true
		}
	}
	for _, m := range hintResetAtRe.FindAllStringSubmatch(text, -1) {
		v := strings.ToUpper(strings.Replace(m[1], " ", "T", 1))
		if d, ok := hintRFC3339(v, now); ok {
			return d, true
		}
	}
	return 0, false
}

// hintAmount reads "20s", "1h2m3s", "26.6s", "30sec", or a bare number
// with an optional unit word (seconds when none).
func hintAmount(amount, unitWord string) (time.Duration, bool) {
	amount = strings.TrimRight(strings.ToLower(amount), ".")
	if d, err := time.ParseDuration(amount); err == nil {
		return d, d > 0
	}
	m := hintAmountRe.FindStringSubmatch(amount)
	if m == nil {
		return 0, false
	}
	unitName := m[2]
	if unitName == "" {
		unitName = strings.ToLower(unitWord)
	}
	unit, ok := hintUnit(unitName)
	if !ok {
		return 0, false
	}
	return hintScaled(m[1], unit)
}

func hintUnit(name string) (time.Duration, bool) {
	switch name {
	case "", "s", "sec", "secs", "second", "seconds":
		return time.Second, true
	case "ms", "msec", "msecs", "millisecond", "milliseconds":
		return time.Millisecond, true
	case "m", "min", "mins", "minute", "minutes":
		return time.Minute, true
	case "h", "hr", "hrs", "hour", "hours":
		return time.Hour, true
	case "d", "day", "days":
		return 24 * time.Hour, true
	}
	return 0, false
}
