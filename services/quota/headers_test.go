package quota

import (
	"cmp"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"testing"
	"time"
)

// T0 is the receipt time of the header cases.
var T0 = time.Date(2026, 9, 20, 12, 0, 0, 0, time.UTC)

func hdr(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Set(kv[i], kv[i+1])
	}
	return h
}

func epoch(t time.Time) string { return strconv.FormatInt(t.Unix(), 10) }

func sortedWindows(ws []Window) []Window {
	slices.SortFunc(ws, func(a, b Window) int { return cmp.Compare(windowIndex(a.Name), windowIndex(b.Name)) })
	return ws
}

func TestParseFamilies(t *testing.T) {
	rfc := T0.Add(42 * time.Second)
	for _, tc := range []struct {
		name string
		h    http.Header
		want []Window
	}{
		{"no quota headers", hdr("Content-Type", "application/json", "X-Request-Id", "r1"), nil},
		{"openai: the tighter dimension wins", hdr(
			"x-ratelimit-limit-requests", "100", "x-ratelimit-remaining-requests", "40", "x-ratelimit-reset-requests", "1s",
			"x-ratelimit-limit-tokens", "1000", "x-ratelimit-remaining-tokens", "100", "x-ratelimit-reset-tokens", "6m0s"),
			[]Window{{Name: Minute, Used: 0.9, ResetAt: T0.Add(6 * time.Minute), Limit: 1000, Remaining: 100, Source: SourceOpenAI}}},
		{"openai unsuffixed, numeric reset", hdr("x-ratelimit-limit", "10", "x-ratelimit-remaining", "5", "x-ratelimit-reset", "30"),
			[]Window{{Name: Minute, Used: 0.5, ResetAt: T0.Add(30 * time.Second), Limit: 10, Remaining: 5, Source: SourceOpenAI}}},
		{"openai reset only: nothing", hdr("x-ratelimit-reset-requests", "1s"), nil},
		{"anthropic api, RFC 3339 reset", hdr(
			"anthropic-ratelimit-requests-limit", "50", "anthropic-ratelimit-requests-remaining", "49",
			"anthropic-ratelimit-requests-reset", T0.Add(time.Second).Format(time.RFC3339),
			"anthropic-ratelimit-output-tokens-limit", "8000", "anthropic-ratelimit-output-tokens-remaining", "2000",
			"anthropic-ratelimit-output-tokens-reset", rfc.Format(time.RFC3339)),
			[]Window{{Name: Minute, Used: 0.75, ResetAt: rfc, Limit: 8000, Remaining: 2000, Source: SourceAnthropic}}},
		{"anthropic unified: 5h, 7d and a 7d variant (highest u)", hdr(
			"anthropic-ratelimit-unified-5h-utilization", "0.42", "anthropic-ratelimit-unified-5h-reset", epoch(T0.Add(3*time.Hour)),
			"anthropic-ratelimit-unified-7d-utilization", "0.18", "anthropic-ratelimit-unified-7d-reset", epoch(T0.Add(72*time.Hour)),
			"anthropic-ratelimit-unified-7d_opus-utilization", "0.55", "anthropic-ratelimit-unified-7d_opus-reset", epoch(T0.Add(96*time.Hour)),
			"anthropic-ratelimit-unified-status", "allowed", "anthropic-ratelimit-unified-representative-claim", "five_hour"),
			[]Window{
				{Name: FiveH, Used: 0.42, ResetAt: T0.Add(3 * time.Hour), Source: SourceAnthropicUnified},
				{Name: Weekly, Used: 0.55, ResetAt: T0.Add(96 * time.Hour), Source: SourceAnthropicUnified},
			}},
		{"unified window status rejected", hdr(
			"anthropic-ratelimit-unified-5h-utilization", "0.97", "anthropic-ratelimit-unified-5h-status", "rejected",
			"anthropic-ratelimit-unified-5h-reset", epoch(T0.Add(2*time.Hour))),
			[]Window{{Name: FiveH, Used: 1, ResetAt: T0.Add(2 * time.Hour), Source: SourceAnthropicUnified}}},
		{"unified status rejected, claim seven_day", hdr(
			"anthropic-ratelimit-unified-5h-utilization", "0.3",
			"anthropic-ratelimit-unified-7d-utilization", "0.9", "anthropic-ratelimit-unified-7d-reset", epoch(T0.Add(50*time.Hour)),
			"anthropic-ratelimit-unified-status", "rejected", "anthropic-ratelimit-unified-representative-claim", "seven_day",
			"anthropic-ratelimit-unified-reset", epoch(T0.Add(time.Hour))),
			[]Window{
				{Name: FiveH, Used: 0.3, Source: SourceAnthropicUnified},
				{Name: Weekly, Used: 1, ResetAt: T0.Add(50 * time.Hour), Source: SourceAnthropicUnified},
			}},
		{"unified status rejected, claim five_hour without its window", hdr(
			"anthropic-ratelimit-unified-status", "rejected", "anthropic-ratelimit-unified-representative-claim", "five_hour",
			"anthropic-ratelimit-unified-reset", epoch(T0.Add(time.Hour))),
			[]Window{{Name: FiveH, Used: 1, ResetAt: T0.Add(time.Hour), Source: SourceAnthropicUnified}}},
		{"unified unknown window names ignored", hdr("anthropic-ratelimit-unified-overage-utilization", "0.9",
			"anthropic-ratelimit-unified-overage-status", "rejected"), nil},
		{"codex by window minutes, reset-at preferred", hdr(
			"x-codex-primary-used-percent", "100", "x-codex-primary-window-minutes", "300",
			"x-codex-primary-reset-after-seconds", "1200", "x-codex-primary-reset-at", epoch(T0.Add(time.Hour)),
			"x-codex-secondary-used-percent", "40", "x-codex-secondary-window-minutes", "1440",
			"x-codex-secondary-reset-after-seconds", "600"),
			[]Window{
				{Name: FiveH, Used: 1, ResetAt: T0.Add(time.Hour), Source: SourceCodex},
				{Name: Daily, Used: 0.4, ResetAt: T0.Add(600 * time.Second), Source: SourceCodex},
			}},
		{"codex weekly and monthly", hdr(
			"x-codex-primary-used-percent", "12.5", "x-codex-primary-window-minutes", "10080",
			"x-codex-secondary-used-percent", "150", "x-codex-secondary-window-minutes", "43200"),
			[]Window{{Name: Weekly, Used: 0.125, Source: SourceCodex}, {Name: Monthly, Used: 1, Source: SourceCodex}}},
		{"codex without window minutes: primary 5h, secondary weekly", hdr(
			"x-codex-primary-used-percent", "10", "x-codex-secondary-used-percent", "20", "x-codex-secondary-window-minutes", "NaN"),
			[]Window{{Name: FiveH, Used: 0.1, Source: SourceCodex}, {Name: Weekly, Used: 0.2, Source: SourceCodex}}},
		{"malformed values are ignored", hdr(
			"x-ratelimit-limit-requests", "abc", "x-ratelimit-remaining-requests", "1",
			"x-ratelimit-limit-tokens", "100", "x-ratelimit-remaining-tokens", "-1",
			"anthropic-ratelimit-unified-5h-utilization", "NaN",
			"anthropic-ratelimit-unified-7d-utilization", "0.5", "anthropic-ratelimit-unified-7d-reset", "soon",
			"x-codex-primary-used-percent", "lots"),
			[]Window{{Name: Weekly, Used: 0.5, Source: SourceAnthropicUnified}}},
		{"remaining above limit reads u = 0", hdr("x-ratelimit-limit", "10", "x-ratelimit-remaining", "20"),
			[]Window{{Name: Minute, Used: 0, Limit: 10, Remaining: 20, Source: SourceOpenAI}}},
		{"non-canonical header names", http.Header{"x-codex-primary-used-percent": {"50"}},
			[]Window{{Name: FiveH, Used: 0.5, Source: SourceCodex}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := sortedWindows(Parse(tc.h, T0))
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("Parse\n got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestParseReset(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Time
	}{
		{"20ms", T0.Add(20 * time.Millisecond)},
		{"6m0s", T0.Add(6 * time.Minute)},
		{"1h30m", T0.Add(90 * time.Minute)},
		{"0", T0},
		{"30", T0.Add(30 * time.Second)},
		{" 0.5 ", T0.Add(500 * time.Millisecond)},
		{"999999999", T0.Add(999999999 * time.Second)},
		{"1000000000", time.Unix(1_000_000_000, 0).UTC()},
		{"1790256000", time.Unix(1790256000, 0).UTC()},
		{"1790256000.5", time.Unix(1790256000, 500_000_000).UTC()},
		{"1790256000123", time.UnixMilli(1790256000123).UTC()},
		{"2026-09-24T13:20:00Z", time.Date(2026, 9, 24, 13, 20, 0, 0, time.UTC)},
		{"2026-09-24T15:20:00.25+02:00", time.Date(2026, 9, 24, 13, 20, 0, 250_000_000, time.UTC)},
		{"", time.Time{}},
		{"soon", time.Time{}},
		{"-5s", time.Time{}},
		{"-3", time.Time{}},
		{"NaN", time.Time{}},
		{"Inf", time.Time{}},
		{"1e30", time.Time{}},
	} {
		if got := ParseReset(tc.in, T0); !got.Equal(tc.want) {
			t.Errorf("ParseReset(%q) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

func TestHasHeadersAllocatesNothing(t *testing.T) {
	h := plainHeaders()
	if n := testing.AllocsPerRun(100, func() {
		if HasHeaders(h) {
			t.Fatal("plain headers reported as quota headers")
		}
	}); n != 0 {
		t.Fatalf("HasHeaders allocates %v times", n)
	}
	tr := New(Options{})
	if n := testing.AllocsPerRun(100, func() { tr.Observe("c1", h, T0) }); n != 0 {
		t.Fatalf("Observe without quota headers allocates %v times", n)
	}
	// With quota headers: the new snapshot is the only allocation.
	q := plainHeaders()
	for k, v := range hdr("x-codex-primary-used-percent", "42", "x-codex-primary-reset-after-seconds", "1200",
		"x-ratelimit-limit-requests", "500", "x-ratelimit-remaining-requests", "499", "x-ratelimit-reset-requests", "120ms") {
		q[k] = v
	}
	if n := testing.AllocsPerRun(100, func() { tr.Observe("c1", q, T0) }); n > 1 {
		t.Fatalf("Observe with quota headers allocates %v times", n)
	}
	for _, k := range []string{"X-Ratelimit-Remaining", "anthropic-ratelimit-tokens-limit", "X-CODEX-PRIMARY-USED-PERCENT"} {
		if !HasHeaders(http.Header{k: {"1"}}) {
			t.Errorf("%s not recognised", k)
		}
	}
}

// plainHeaders is a typical upstream response without quota headers.
func plainHeaders() http.Header {
	return hdr("Content-Type", "text/event-stream", "Cache-Control", "no-cache", "Date", "Sun, 20 Sep 2026 12:00:00 GMT",
		"X-Request-Id", "req_0123456789", "Openai-Processing-Ms", "231", "Openai-Version", "2020-10-01",
		"Strict-Transport-Security", "max-age=31536000", "Cf-Ray", "8f00000000000000-AMS", "Server", "cloudflare",
		"Alt-Svc", `h3=":443"; ma=86400`, "X-Content-Type-Options", "nosniff", "Set-Cookie", "__cf_bm=abc; path=/")
}
