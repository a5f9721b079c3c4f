package resilience

import (
	"net/http"
	"testing"
	"time"
)

// fuzzHintHeaders are the header sources of 20-resilience §1.5; the fuzzer
// picks one (or none) for each input, with a companion header where the
// source reads two (remaining count, used percent).
var fuzzHintHeaders = []struct{ name, companion string }{
	{"Retry-After", ""},
	{"Retry-After-Ms", ""},
	{"X-RateLimit-Reset", ""},
	{"x-ratelimit-reset-requests", "x-ratelimit-remaining-requests"},
	{"x-ratelimit-reset-tokens", "x-ratelimit-remaining-tokens"},
	{"anthropic-ratelimit-requests-reset", "anthropic-ratelimit-requests-remaining"},
	{"anthropic-ratelimit-output-tokens-reset", "anthropic-ratelimit-output-tokens-remaining"},
	{"x-codex-primary-reset-after-seconds", "x-codex-primary-used-percent"},
	{"x-codex-secondary-reset-at", "x-codex-secondary-used-percent"},
}

// FuzzRetryAfter (60-quality R14): whatever an upstream puts in Retry-After
// (seconds or HTTP-date), x-ratelimit-reset-* (Go durations), epoch s/ms,
// RFC 3339 resets, Codex reset-after or the body text, the parsed hint is
// never negative, has a source exactly when it is positive, is the same on
// a second parse, and once classified lies in {0} ∪ [1 s, cap] — with the
// cap the one configured.
func FuzzRetryAfter(f *testing.F) {
	now := clsT0
	f.Add(uint8(0), "20", "", []byte(nil), now.UnixMilli(), int64(604_800_000))
	f.Add(uint8(0), "2.5", "", []byte(nil), now.UnixMilli(), int64(60_000))
	f.Add(uint8(0), now.Add(90*time.Second).Format(http.TimeFormat), "", []byte(nil), now.UnixMilli(), int64(604_800_000))
	f.Add(uint8(0), "Wed, 21 Oct 2015 07:28:00 GMT", "", []byte(nil), now.UnixMilli(), int64(604_800_000))
	f.Add(uint8(1), "1500", "", []byte(nil), now.UnixMilli(), int64(604_800_000))
	f.Add(uint8(2), "30", "", []byte(nil), now.UnixMilli(), int64(604_800_000))
	f.Add(uint8(2), "1772359245", "", []byte(nil), now.UnixMilli(), int64(604_800_000))
	f.Add(uint8(2), "1772359245123", "", []byte(nil), now.UnixMilli(), int64(604_800_000))
	f.Add(uint8(2), "99999999999999999999", "", []byte(nil), now.UnixMilli(), int64(1_000))
	f.Add(uint8(3), "6m0s", "0", []byte(nil), now.UnixMilli(), int64(604_800_000))
	f.Add(uint8(4), "20ms", "12", []byte(nil), now.UnixMilli(), int64(604_800_000))
	f.Add(uint8(5), "2026-03-01T10:01:00Z", "0", []byte(nil), now.UnixMilli(), int64(604_800_000))
	f.Add(uint8(6), "2026-03-01T10:00:30.5+00:00", "", []byte(nil), now.UnixMilli(), int64(604_800_000))
	f.Add(uint8(7), "3600", "100", []byte(nil), now.UnixMilli(), int64(604_800_000))
	f.Add(uint8(8), "1772363200", "101.5", []byte(nil), now.UnixMilli(), int64(604_800_000))
	f.Add(uint8(255), "", "", []byte(`{"error":{"retry_after":12}}`), now.UnixMilli(), int64(604_800_000))
	f.Add(uint8(255), "", "", []byte(`[{"error":{"details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"26.6s"}]}}]`), now.UnixMilli(), int64(604_800_000))
	f.Add(uint8(255), "", "", []byte(`{"details":[{"retryDelay":{"seconds":"1e308","nanos":-5e20}}]}`), now.UnixMilli(), int64(604_800_000))
	f.Add(uint8(255), "", "", []byte("Rate limit reached. Please try again in 1h2m3.5s."), now.UnixMilli(), int64(604_800_000))
	f.Add(uint8(255), "", "", []byte("quota resets at 2026-03-02 00:00:00+01:00; retry after 2026-01-01T00:00:00Z"), now.UnixMilli(), int64(604_800_000))
	f.Add(uint8(255), "", "", []byte("retry after 9999999999999999999999 days"), int64(-1), int64(0))
	f.Add(uint8(0), "-5", "", []byte("try again in 0.0001 ms"), int64(1<<62), int64(1<<62))

	f.Fuzz(func(t *testing.T, which uint8, value, companion string, body []byte, nowMs, capMs int64) {
		at := time.UnixMilli(nowMs).UTC()
		h := http.Header{}
		if int(which) < len(fuzzHintHeaders) {
			src := fuzzHintHeaders[which]
			h.Set(src.name, value)
			if src.companion != "" {
				h.Set(src.companion, companion)
			}
		}

		d, src := ParseRetryHint(h, body, at)
		if d < 0 {
			t.Fatalf("negative hint %v (source %q) for %q=%q body %q", d, src, h, value, body)
		}
		if (d > 0) != (src != "") {
			t.Fatalf("hint %v with source %q", d, src)
		}
		switch src {
		case "", HintSourceHeader, HintSourceBodyJSON, HintSourceBodyText:
		default:
			t.Fatalf("unknown source %q", src)
		}
		if d2, src2 := ParseRetryHint(h, body, at); d2 != d || src2 != src {
			t.Fatalf("second parse %v %q, first %v %q", d2, src2, d, src)
		}

		// The classifier floors at 1 s and caps at maxRetryHintMs (a
		// non-positive cap means the 7-day default).
		limit := time.Duration(capMs) * time.Millisecond
		if capMs <= 0 || capMs > int64(time.Duration(1<<63-1)/time.Millisecond) {
			limit = classifierDefaultMaxHint
		}
		c := NewClassifier(nil, func() time.Duration { return limit }, func() time.Time { return at }, nil)
		cl := c.Classify(Failure{Provider: "openai", Status: 429, Header: h, Body: body, Phase: PhasePreCommit, At: at})
		if cl.Hint < 0 || (cl.Hint > 0 && (cl.Hint < time.Second && limit >= time.Second || cl.Hint > limit)) {
			t.Fatalf("classified hint %v outside {0} ∪ [1s, %v] (parsed %v)", cl.Hint, limit, d)
		}
		if (cl.Hint > 0) != (d > 0) {
			t.Fatalf("classified hint %v for parsed %v", cl.Hint, d)
		}
		if cl.Hint > 0 && cl.HintSource != src {
			t.Fatalf("classified source %q, parsed %q", cl.HintSource, src)
		}

		// The cooldown's own clamp: [0, maxRetryHintMs], at least 1 s when set.
		cfg := CooldownConfig{MaxRetryHintMs: capMs}
		got := clampHint(d, cfg)
		capD := time.Duration(capMs) * time.Millisecond
		switch {
		case capMs <= 0:
			capD = time.Duration(defaultMaxRetryHintMs) * time.Millisecond
		case capMs > int64(time.Duration(1<<63-1)/time.Millisecond):
			capD = time.Duration(1<<63 - 1) // saturated: no cap below the largest duration
		}
		if got < 0 || got > max(capD, time.Second) || (d > 0) != (got > 0) {
			t.Fatalf("clampHint(%v, cap %dms) = %v", d, capMs, got)
		}
	})
}
