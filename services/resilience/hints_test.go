package resilience

import (
	"net/http"
	"strconv"
	"testing"
	"time"
)

func clsEpoch(d time.Duration) string { return strconv.FormatInt(clsT0.Add(d).Unix(), 10) }

func clsEpochMs(d time.Duration) string { return strconv.FormatInt(clsT0.Add(d).UnixMilli(), 10) }

// Every hint source on its own (20-resilience §1.5).
func TestParseRetryHintSources(t *testing.T) {
	tests := []struct {
		name   string
		h      http.Header
		body   string
		want   time.Duration
		source string
	}{
		{"Retry-After-Ms", http.Header{"Retry-After-Ms": {"1500"}}, "", 1500 * time.Millisecond, HintSourceHeader},
		{"Retry-After delta seconds", http.Header{"Retry-After": {"7"}}, "", 7 * time.Second, HintSourceHeader},
		{"Retry-After decimal seconds", http.Header{"Retry-After": {"2.5"}}, "", 2500 * time.Millisecond, HintSourceHeader},
		{"Retry-After HTTP-date", http.Header{"Retry-After": {clsT0.Add(90 * time.Second).Format(http.TimeFormat)}}, "", 90 * time.Second, HintSourceHeader},
		{"X-RateLimit-Reset delta seconds", http.Header{"X-Ratelimit-Reset": {"30"}}, "", 30 * time.Second, HintSourceHeader},
		{"X-RateLimit-Reset epoch seconds", http.Header{"X-Ratelimit-Reset": {clsEpoch(45 * time.Second)}}, "", 45 * time.Second, HintSourceHeader},
		{"X-RateLimit-Reset epoch ms", http.Header{"X-Ratelimit-Reset": {clsEpochMs(1500 * time.Millisecond)}}, "", 1500 * time.Millisecond, HintSourceHeader},
		{"OpenAI reset requests ms", http.Header{"X-Ratelimit-Reset-Requests": {"20ms"}}, "", 20 * time.Millisecond, HintSourceHeader},
		{"OpenAI reset requests s", http.Header{"X-Ratelimit-Reset-Requests": {"1s"}}, "", time.Second, HintSourceHeader},
		{"OpenAI reset tokens 6m0s", http.Header{"X-Ratelimit-Reset-Tokens": {"6m0s"}}, "", 6 * time.Minute, HintSourceHeader},
		{"OpenAI reset tokens 1h2m3s", http.Header{"X-Ratelimit-Reset-Tokens": {"1h2m3s"}}, "", time.Hour + 2*time.Minute + 3*time.Second, HintSourceHeader},
		{"Anthropic requests reset", http.Header{"Anthropic-Ratelimit-Requests-Reset": {clsT0.Add(12 * time.Second).Format(time.RFC3339)}}, "", 12 * time.Second, HintSourceHeader},
		{"Anthropic input tokens reset", http.Header{"Anthropic-Ratelimit-Input-Tokens-Reset": {clsT0.Add(3 * time.Second).Format(time.RFC3339)}}, "", 3 * time.Second, HintSourceHeader},
		{"Anthropic output tokens reset", http.Header{"Anthropic-Ratelimit-Output-Tokens-Reset": {clsT0.Add(4 * time.Second).Format(time.RFC3339)}}, "", 4 * time.Second, HintSourceHeader},
		{"Codex primary reset-after-seconds", http.Header{"X-Codex-Primary-Used-Percent": {"100"}, "X-Codex-Primary-Reset-After-Seconds": {"600"}}, "", 10 * time.Minute, HintSourceHeader},
		{"Codex secondary reset-at epoch", http.Header{"X-Codex-Secondary-Used-Percent": {"100.0"}, "X-Codex-Secondary-Reset-At": {clsEpoch(2 * time.Hour)}}, "", 2 * time.Hour, HintSourceHeader},
		{"Codex reset-at RFC 3339", http.Header{"X-Codex-Primary-Used-Percent": {"101"}, "X-Codex-Primary-Reset-At": {clsT0.Add(time.Hour).Format(time.RFC3339)}}, "", time.Hour, HintSourceHeader},
		{"body retry_after", nil, `{"retry_after": 12}`, 12 * time.Second, HintSourceBodyJSON},
		{"body error.retry_after string", nil, `{"error":{"message":"slow down","retry_after":"3.5"}}`, 3500 * time.Millisecond, HintSourceBodyJSON},
		{"Google RetryInfo", nil, `{"error":{"code":429,"details":[{"@type":"type.googleapis.com/google.rpc.QuotaFailure"},{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"26.6s"}]}}`, 26600 * time.Millisecond, HintSourceBodyJSON},
		{"Google RetryInfo in an array", nil, `[{"error":{"details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"26s"}]}}]`, 26 * time.Second, HintSourceBodyJSON},
		{"text retry after N s", nil, "Rate limited. Retry after 30 s.", 30 * time.Second, HintSourceBodyText},
		{"text retry after N seconds", nil, "please retry after 5 seconds", 5 * time.Second, HintSourceBodyText},
		{"text try again in ms", nil, `{"error":{"message":"Rate limit reached. Please try again in 120ms."}}`, 120 * time.Millisecond, HintSourceBodyText},
		{"text try again in s", nil, "Please try again in 7.5s.", 7500 * time.Millisecond, HintSourceBodyText},
		{"text try again in seconds", nil, "try again in 20 seconds", 20 * time.Second, HintSourceBodyText},
		{"text try again in minutes", nil, "Try again in 2 minutes", 2 * time.Minute, HintSourceBodyText},
		{"text Gemini please retry in", nil, "Please retry in 26.6s", 26600 * time.Millisecond, HintSourceBodyText},
		{"text resets in 1h2m3s", nil, "Usage limit reached, resets in 1h2m3s", time.Hour + 2*time.Minute + 3*time.Second, HintSourceBodyText},
		{"text resets at RFC 3339", nil, "quota exhausted; resets at " + clsT0.Add(5*time.Hour).Format(time.RFC3339), 5 * time.Hour, HintSourceBodyText},
		{"text reset at RFC 3339 with offset", nil, "limit will reset at " + clsT0.Add(time.Hour).In(time.FixedZone("", 8*3600)).Format(time.RFC3339), time.Hour, HintSourceBodyText},
		{"none", nil, "something failed", 0, ""},
		{"none without anything", nil, "", 0, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d, src := ParseRetryHint(tc.h, []byte(tc.body), clsT0)
			if d != tc.want || src != tc.source {
				t.Fatalf("got %v from %q, want %v from %q", d, src, tc.want, tc.source)
			}
		})
	}
}

// Sources in precedence order: each pair has the higher source first.
func TestParseRetryHintPrecedence(t *testing.T) {
	all := http.Header{
		"Retry-After-Ms":                      {"2000"},
		"Retry-After":                         {"3"},
		"X-Ratelimit-Reset":                   {"4"},
		"X-Ratelimit-Reset-Requests":          {"5s"},
		"Anthropic-Ratelimit-Requests-Reset":  {clsT0.Add(6 * time.Second).Format(time.RFC3339)},
		"X-Codex-Primary-Used-Percent":        {"100"},
		"X-Codex-Primary-Reset-After-Seconds": {"7"},
	}
	body := `{"retry_after": 8, "error": {"message": "try again in 9s"}}`
	order := []string{"Retry-After-Ms", "Retry-After", "X-Ratelimit-Reset", "X-Ratelimit-Reset-Requests",
		"Anthropic-Ratelimit-Requests-Reset", "X-Codex-Primary-Reset-After-Seconds"}
	want := []time.Duration{2, 3, 4, 5, 6, 7}
	h := all.Clone()
	for i, name := range order {
		d, src := ParseRetryHint(h, []byte(body), clsT0)
		if d != want[i]*time.Second || src != HintSourceHeader {
			t.Fatalf("with %s first: got %v from %q, want %vs", name, d, src, want[i])
		}
		h.Del(name)
	}
	if d, src := ParseRetryHint(h, []byte(body), clsT0); d != 8*time.Second || src != HintSourceBodyJSON {
		t.Fatalf("body JSON: got %v from %q", d, src)
	}
	if d, src := ParseRetryHint(h, []byte(`{"error": {"message": "try again in 9s"}}`), clsT0); d != 9*time.Second || src != HintSourceBodyText {
		t.Fatalf("body text: got %v from %q", d, src)
	}
}

// Zero, negative, past and unparsable values are skipped: the next source wins.
func TestParseRetryHintSkipsInvalid(t *testing.T) {
	tests := []struct {
		name string
		h    http.Header
	}{
		{"zero", http.Header{"Retry-After": {"0"}}},
		{"negative", http.Header{"Retry-After": {"-5"}}},
		{"garbage", http.Header{"Retry-After": {"soon"}}},
		{"NaN", http.Header{"Retry-After": {"NaN"}}},
		{"Inf", http.Header{"Retry-After-Ms": {"+Inf"}}},
		{"past HTTP-date", http.Header{"Retry-After": {clsT0.Add(-time.Minute).Format(http.TimeFormat)}}},
		{"past epoch", http.Header{"X-Ratelimit-Reset": {clsEpoch(-time.Minute)}}},
		{"past RFC 3339", http.Header{"Anthropic-Ratelimit-Tokens-Reset": {clsT0.Add(-time.Second).Format(time.RFC3339)}}},
		{"unparsable Go duration", http.Header{"X-Ratelimit-Reset-Tokens": {"6 minutes-ish"}}},
		{"Codex window not used up", http.Header{"X-Codex-Primary-Used-Percent": {"99.5"}, "X-Codex-Primary-Reset-After-Seconds": {"600"}}},
		{"Codex without used-percent", http.Header{"X-Codex-Primary-Reset-After-Seconds": {"600"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d, src := ParseRetryHint(tc.h, []byte(`{"retry_after": 11}`), clsT0)
			if d != 11*time.Second || src != HintSourceBodyJSON {
				t.Fatalf("got %v from %q, want the body's 11s", d, src)
			}
		})
	}
}

func TestParseRetryHintDimensions(t *testing.T) {
	tests := []struct {
		name string
		h    http.Header
		want time.Duration
	}{
		{"OpenAI exhausted dimension wins over a larger one", http.Header{
			"X-Ratelimit-Reset-Requests": {"2s"}, "X-Ratelimit-Remaining-Requests": {"0"},
			"X-Ratelimit-Reset-Tokens": {"6m0s"}, "X-Ratelimit-Remaining-Tokens": {"1000"},
		}, 2 * time.Second},
		{"OpenAI none exhausted: the largest", http.Header{
			"X-Ratelimit-Reset-Requests": {"2s"}, "X-Ratelimit-Remaining-Requests": {"3"},
			"X-Ratelimit-Reset-Tokens": {"6m0s"}, "X-Ratelimit-Remaining-Tokens": {"1000"},
		}, 6 * time.Minute},
		{"OpenAI remaining unknown: the largest", http.Header{
			"X-Ratelimit-Reset-Requests": {"2s"}, "X-Ratelimit-Reset-Tokens": {"1s"},
		}, 2 * time.Second},
		{"Anthropic exhausted output tokens win", http.Header{
			"Anthropic-Ratelimit-Requests-Reset":          {clsT0.Add(50 * time.Second).Format(time.RFC3339)},
			"Anthropic-Ratelimit-Requests-Remaining":      {"40"},
			"Anthropic-Ratelimit-Output-Tokens-Reset":     {clsT0.Add(5 * time.Second).Format(time.RFC3339)},
			"Anthropic-Ratelimit-Output-Tokens-Remaining": {"0"},
		}, 5 * time.Second},
		{"two exhausted: the later reset", http.Header{
			"X-Ratelimit-Reset-Requests": {"2s"}, "X-Ratelimit-Remaining-Requests": {"0"},
			"X-Ratelimit-Reset-Tokens": {"9s"}, "X-Ratelimit-Remaining-Tokens": {"0"},
		}, 9 * time.Second},
		{"Codex both windows used up: the later reset", http.Header{
			"X-Codex-Primary-Used-Percent": {"100"}, "X-Codex-Primary-Reset-After-Seconds": {"60"},
			"X-Codex-Secondary-Used-Percent": {"100"}, "X-Codex-Secondary-Reset-After-Seconds": {"86400"},
		}, 24 * time.Hour},
		{"Codex only the used-up window counts", http.Header{
			"X-Codex-Primary-Used-Percent": {"100"}, "X-Codex-Primary-Reset-After-Seconds": {"60"},
			"X-Codex-Secondary-Used-Percent": {"40"}, "X-Codex-Secondary-Reset-After-Seconds": {"86400"},
		}, time.Minute},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if d, _ := ParseRetryHint(tc.h, nil, clsT0); d != tc.want {
				t.Fatalf("got %v, want %v", d, tc.want)
			}
		})
	}
}

func TestParseRetryHintTextDateIsNotSeconds(t *testing.T) {
	// "retry after <date>" must not read as 2026 seconds.
	d, src := ParseRetryHint(nil, []byte("retry after 2026-03-01T11:00:00Z"), clsT0)
	if d != 0 || src != "" {
		t.Fatalf("got %v from %q", d, src)
	}
}

func TestParseRetryHintHugeValuesSaturate(t *testing.T) {
	d, src := ParseRetryHint(http.Header{"Retry-After": {"1e300"}}, nil, clsT0)
	if d <= 0 || src != HintSourceHeader {
		t.Fatalf("got %v from %q, want a saturated positive hint", d, src)
	}
}

// Floor, cap and the warning, as Classify applies them.
func TestClassifyHintFloorAndCap(t *testing.T) {
	tests := []struct {
		name  string
		h     http.Header
		body  string
		max   time.Duration
		want  time.Duration
		warns int32
	}{
		{"floored at 1 s", http.Header{"X-Ratelimit-Reset-Requests": {"20ms"}}, "", 0, time.Second, 0},
		{"below the cap unchanged", http.Header{"Retry-After": {"600"}}, "", 0, 10 * time.Minute, 0},
		{"capped at 7 days with one warn", http.Header{"Retry-After": {"864000"}}, "", 0, 604_800_000 * time.Millisecond, 1},
		{"capped at the configured max", http.Header{"Retry-After": {"120"}}, "", time.Minute, time.Minute, 1},
		{"body text capped", nil, "try again in 30 days", 0, 604_800_000 * time.Millisecond, 1},
		{"no hint, no warn", nil, "", 0, 0, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newClsEnv()
			if tc.max > 0 {
				e.max = tc.max
			}
			f := clsHTTP(429, tc.body)
			f.Header = tc.h
			cl := e.c.Classify(f)
			if cl.Hint != tc.want {
				t.Fatalf("hint = %v, want %v", cl.Hint, tc.want)
			}
			if n := e.warns.Load(); n != tc.warns {
				t.Fatalf("warn calls = %d, want %d", n, tc.warns)
			}
		})
	}
}

func TestClassifyHintFromMessageOnly(t *testing.T) {
	f := clsHTTP(429, "")
	f.Message = "Rate limit reached. Please try again in 3s."
	cl := newClsEnv().c.Classify(f)
	if cl.Hint != 3*time.Second || cl.HintSource != HintSourceBodyText {
		t.Fatalf("hint %v from %q", cl.Hint, cl.HintSource)
	}
}

// Absolute hints are measured from the failure's instant, else the clock.
func TestClassifyHintUsesFailureInstant(t *testing.T) {
	f := clsHTTP(429, "")
	f.At = clsT0.Add(-30 * time.Second)
	f.Header = http.Header{"X-Ratelimit-Reset": {clsEpoch(30 * time.Second)}}
	if cl := newClsEnv().c.Classify(f); cl.Hint != time.Minute {
		t.Fatalf("hint = %v, want 1m from At", cl.Hint)
	}
	f.At = time.Time{}
	if cl := newClsEnv().c.Classify(f); cl.Hint != 30*time.Second {
		t.Fatalf("hint = %v, want 30s from the clock", cl.Hint)
	}
}
