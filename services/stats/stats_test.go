package stats_test

import (
	"fmt"
	"testing"
	"time"

	"switchyard/internal/testkit"
	"switchyard/services"
	"switchyard/services/stats"
)

func ptr[T any](v T) *T { return &v }

var t0 = time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)

// The success rule, client aborts apart, failovers, tokens and the latency
// percentiles over non-streamed requests (first byte over streams).
func TestSummaryCountsAndPercentiles(t *testing.T) {
	clock := testkit.NewFakeClock(t0)
	r := stats.NewRecorder(clock)
	clock.Advance(2 * time.Hour)
	now := clock.Now()
	var entries []services.RequestLogEntry
	// 20 non-streamed successes with latencies 10, 20, …, 200 ms.
	for i := 1; i <= 20; i++ {
		entries = append(entries, services.RequestLogEntry{CreatedAt: now.Add(-time.Duration(i) * time.Second), Status: 200,
			Outcome: services.RequestOutcomeSuccess, LatencyMs: int64(i * 10), PromptTokens: 3, CompletionTokens: 1000})
	}
	entries = append(entries,
		// A stream that ended with an in-band error is no success.
		services.RequestLogEntry{CreatedAt: now, Status: 200, Stream: true, Outcome: services.RequestOutcomeUpstreamError, TtftMs: ptr(int64(40))},
		// A successful stream after a failover.
		services.RequestLogEntry{CreatedAt: now, Status: 200, Stream: true, Outcome: services.RequestOutcomeFailover, Attempts: 2, TtftMs: ptr(int64(90))},
		// A 429 to the client.
		services.RequestLogEntry{CreatedAt: now, Status: 429, Outcome: services.RequestOutcomeClientError, LatencyMs: 5},
		// A client abort: counted apart, not in the rate, not in the latency.
		services.RequestLogEntry{CreatedAt: now.Add(-time.Minute), Status: 499, Outcome: services.RequestOutcomeAborted, LatencyMs: 9000},
		// Older than a day, and from the future: ignored.
		services.RequestLogEntry{CreatedAt: now.Add(-25 * time.Hour), Status: 200, Outcome: services.RequestOutcomeSuccess},
		services.RequestLogEntry{CreatedAt: now.Add(time.Hour), Status: 200, Outcome: services.RequestOutcomeSuccess},
	)
	r.Record(entries[:10])
	r.Record(entries[10:])
	s := r.Summary(stats.Window1h)
	if s.Requests != 24 || s.Succeeded != 21 || s.Failed != 2 || s.Aborted != 1 || s.Failovers != 1 {
		t.Fatalf("counts %+v", s)
	}
	if rate, ok := s.SuccessRate(); !ok || fmt.Sprintf("%.3f", rate) != "0.913" { // 21 of 23
		t.Errorf("success rate %v %v", rate, ok)
	}
	// Non-streamed latencies 5 and 10…200 (21 values): exact p50 100, p95 190;
	// the buckets read them within their width.
	if s.Latency.Count != 21 || s.Latency.P50 != 100 || s.Latency.P95 < 176 || s.Latency.P95 > 192 {
		t.Errorf("latency %+v", s.Latency)
	}
	if s.TTFB.Count != 2 || s.TTFB.P50 != 40 || s.TTFB.P95 != 90 {
		t.Errorf("ttfb %+v", s.TTFB)
	}
	if s.TokensIn != 60 || s.TokensOut != 20000 {
		t.Errorf("tokens %d / %d", s.TokensIn, s.TokensOut)
	}
	if s.SinceStart || !s.Since.Equal(now.Add(-time.Hour)) || len(s.PerMinute) != 60 {
		t.Errorf("window since %v (start %v), %d points", s.Since, s.SinceStart, len(s.PerMinute))
	}
	last := s.PerMinute[59]
	if !last.T.Equal(now.Truncate(time.Minute)) || last.OK != 1 || last.Failed != 2 {
		t.Errorf("last minute %+v", last)
	}
	// A day holds them too, but the process is only two hours old.
	day := r.Summary(stats.Window24h)
	if day.Requests != 24 || !day.SinceStart || !day.Since.Equal(t0) || len(day.PerMinute) != 1440 {
		t.Errorf("24 h: %d requests, since %v (%v), %d points", day.Requests, day.Since, day.SinceStart, len(day.PerMinute))
	}
	// Two hours on, the hour is empty; a day later, so is the day (the ring
	// slots are reused).
	clock.Advance(2 * time.Hour)
	if s := r.Summary(stats.Window1h); s.Requests != 0 || s.Latency.Count != 0 {
		t.Errorf("an empty hour: %+v", s)
	}
	clock.Advance(23 * time.Hour)
	r.Record([]services.RequestLogEntry{{CreatedAt: clock.Now(), Status: 200, Outcome: services.RequestOutcomeSuccess, LatencyMs: 7}})
	if s := r.Summary(stats.Window24h); s.Requests != 1 || s.SinceStart || s.Latency.P50 != 7 {
		t.Errorf("after a day: %+v", s)
	}
}

// Cost per client key, serving connection and model; requests without a
// price are counted as unpriced, never as zero cost.
func TestSummaryCostByKeyConnectionAndModel(t *testing.T) {
	clock := testkit.NewFakeClock(t0)
	r := stats.NewRecorder(clock)
	priced := func(key, conn, provider, model string, nano int64) services.RequestLogEntry {
		return services.RequestLogEntry{CreatedAt: t0, Status: 200, Outcome: services.RequestOutcomeSuccess, APIKeyID: key, APIKeyName: "n-" + key,
			APIKeyPrefix: "sk-sy-" + key, ConnectionID: conn, Provider: provider, Model: model, PromptTokens: 10, CompletionTokens: 5,
			EstimatedCost: services.Cost{NanoUSD: nano, Known: nano > 0}}
	}
	r.Record([]services.RequestLogEntry{
		priced("k_1", "c_1", "openai", "gpt-4o", 3000),
		priced("k_1", "c_2", "openai", "gpt-4o", 2000),
		priced("k_2", "c_2", "openai", "gpt-4o-mini", 100),
		priced("k_2", "c_3", "fake", "m1", 0),                                     // no price known
		{CreatedAt: t0, Status: 401, Outcome: services.RequestOutcomeClientError}, // refused: no key, no target
	})
	s := r.Summary(stats.Window1h)
	if s.Cost != (services.Cost{NanoUSD: 5100, Known: true}) || s.Unpriced != 1 {
		t.Fatalf("total %+v, unpriced %d", s.Cost, s.Unpriced)
	}
	line := func(us []stats.Usage) string {
		out := ""
		for _, u := range us {
			out += fmt.Sprintf("%s:%d:%d:%d;", u.ID, u.Requests, u.Cost.NanoUSD, u.Unpriced)
		}
		return out
	}
	if got := line(s.ByKey); got != "k_1:2:5000:0;k_2:2:100:1;" {
		t.Errorf("by key %s", got)
	}
	if s.ByKey[0].Name != "n-k_1" || s.ByKey[0].Prefix != "sk-sy-k_1" {
		t.Errorf("key names %+v", s.ByKey[0])
	}
	if got := line(s.ByConnection); got != "c_1:1:3000:0;c_2:2:2100:0;c_3:1:0:1;" {
		t.Errorf("by connection %s", got)
	}
	if got := line(s.ByModel); got != "openai/gpt-4o:2:5000:0;openai/gpt-4o-mini:1:100:0;fake/m1:1:0:1;" {
		t.Errorf("by model %s", got)
	}
}

// Failing targets: failed dispatches per target and connection, most first,
// then the newest; the last error is the newest failure whatever the order
// the entries arrive in.
func TestSummaryFailingTargets(t *testing.T) {
	clock := testkit.NewFakeClock(t0)
	r := stats.NewRecorder(clock)
	clock.Advance(time.Hour)
	now := clock.Now()
	attempt := func(seq int, provider, model, conn, outcome string, status int, detail string) services.AttemptRecord {
		return services.AttemptRecord{Seq: seq, Provider: provider, Model: model, ConnectionID: conn, Outcome: outcome, UpstreamStatus: status, Detail: detail}
	}
	entries := []services.RequestLogEntry{
		{CreatedAt: now.Add(-5 * time.Minute), Status: 200, Outcome: services.RequestOutcomeFailover, AttemptLog: []services.AttemptRecord{
			attempt(0, "fake", "model-x", "c_b", "not_found", 404, "model_not_found"),
			attempt(1, "fake", "model-x", "c_a", "success", 200, "")}},
		{CreatedAt: now.Add(-2 * time.Minute), Status: 503, Outcome: services.RequestOutcomeUpstreamError, AttemptLog: []services.AttemptRecord{
			attempt(0, "fake", "model-x", "c_b", "server_error", 500, "boom"),
			attempt(1, "fake", "model-x", "c_b", "rate_limit", 429, "Slow down")}},
		{CreatedAt: now.Add(-time.Minute), Status: 499, Outcome: services.RequestOutcomeAborted, AttemptLog: []services.AttemptRecord{
			attempt(0, "fake", "model-y", "c_a", "client_abort", 0, "")}},
		{CreatedAt: now.Add(-3 * time.Minute), Status: 502, Outcome: services.RequestOutcomeUpstreamError, ErrorCode: "upstream_error",
			Provider: "other", Model: "m", ConnectionID: "c_gone"},
		{CreatedAt: now.Add(-3 * time.Minute), Status: 401, Outcome: services.RequestOutcomeClientError},
	}
	for i := range 6 {
		entries = append(entries, services.RequestLogEntry{CreatedAt: now.Add(-time.Duration(10+i) * time.Minute), Status: 503,
			Outcome: services.RequestOutcomeUpstreamError, AttemptLog: []services.AttemptRecord{
				attempt(0, "p"+string(rune('a'+i)), "m", "c_a", "transient", 0, "")}})
	}
	for _, order := range []string{"forward", "reverse"} {
		r := stats.NewRecorder(clock)
		if order == "reverse" {
			for i := len(entries) - 1; i >= 0; i-- {
				r.Record(entries[i : i+1])
			}
		} else {
			r.Record(entries)
		}
		got := r.Summary(stats.Window1h).Failing
		if len(got) != stats.MaxFailing {
			t.Fatalf("%s: %d rows", order, len(got))
		}
		top := got[0]
		if top.Provider+"/"+top.Model != "fake/model-x" || top.ConnectionID != "c_b" || top.Failures != 3 ||
			top.LastError() != "429 rate_limit" || top.Last.Detail != "Slow down" || !top.Last.At.Equal(now.Add(-2*time.Minute)) {
			t.Errorf("%s: top %+v", order, top)
		}
		if g := got[1]; g.Provider != "other" || g.ConnectionID != "c_gone" || g.LastError() != "502 upstream_error" {
			t.Errorf("%s: second %+v", order, g)
		}
		if got[2].Provider != "pa" || got[4].Provider != "pc" {
			t.Errorf("%s: order %s %s", order, got[2].Provider, got[4].Provider)
		}
	}
	_ = r
}

func TestParseWindow(t *testing.T) {
	for w, want := range map[string]time.Duration{"1h": time.Hour, "24h": 24 * time.Hour, "7d": 0, "": 0} {
		if got, ok := stats.ParseWindow(w); got != want || ok != (want != 0) {
			t.Errorf("%q: %v %v", w, got, ok)
		}
	}
}

// The Overview's latency judgement: 20 requests that waited 4 s for a
// cooldown before an upstream that answered in 500 ms are flagged, with
// the share of their time spent waiting; fast requests without waits are not.
func TestSummaryJudgesLatencyAgainstTheUpstream(t *testing.T) {
	clock := testkit.NewFakeClock(t0)
	r := stats.NewRecorder(clock)
	now := clock.Now()
	var slow, fast []services.RequestLogEntry
	for i := range 20 {
		slow = append(slow, services.RequestLogEntry{CreatedAt: now, Status: 200, Outcome: services.RequestOutcomeSuccess,
			LatencyMs: 4500 + int64(i),
			Waits:     []services.WaitRecord{{Kind: services.WaitKindSingle, Reason: "rate_limit", WaitedMs: 3900}},
			AttemptLog: []services.AttemptRecord{
				{Seq: 0, Outcome: "rate_limit", LatencyMs: 20},
				{Seq: 1, Outcome: "success", StartOffsetMs: 4000, LatencyMs: 500 + int64(i)},
			}})
		// A stream whose first byte came 3 s after receipt, 2.9 s of it waiting.
		ttft := int64(3000)
		slow = append(slow, services.RequestLogEntry{CreatedAt: now, Status: 200, Stream: true, Outcome: services.RequestOutcomeSuccess,
			TtftMs: &ttft, LatencyMs: 9000,
			Waits:      []services.WaitRecord{{Kind: services.WaitKindSlot, Reason: "max_concurrent", WaitedMs: 2900}},
			AttemptLog: []services.AttemptRecord{{Seq: 0, Outcome: "success", StartOffsetMs: 2900, LatencyMs: 6100}}})
		fast = append(fast, services.RequestLogEntry{CreatedAt: now, Status: 200, Outcome: services.RequestOutcomeSuccess,
			LatencyMs: 40, Waits: []services.WaitRecord{}, AttemptLog: []services.AttemptRecord{{Outcome: "success", StartOffsetMs: 1, LatencyMs: 39}}})
	}
	// A row written before the timeline existed (Waits nil) is not judged.
	fast = append(fast, services.RequestLogEntry{CreatedAt: now, Status: 200, Outcome: services.RequestOutcomeSuccess, LatencyMs: 30,
		AttemptLog: []services.AttemptRecord{{Outcome: "success", LatencyMs: 30}}})

	r.Record(fast)
	s := r.Summary(stats.Window1h)
	if j := s.LatencyJudgement; j.Flagged || j.Upstream.Count != 20 || j.WaitShare != 0 {
		t.Errorf("fast traffic judged %+v", j)
	}
	r.Record(slow)
	s = r.Summary(stats.Window1h)
	j := s.LatencyJudgement
	if !j.Flagged || j.Upstream.Count != 40 {
		t.Fatalf("latency p95 %d judged %+v, want flagged over 40 requests", s.Latency.P95, j)
	}
	if j.Upstream.P95 < 480 || j.Upstream.P95 > 560 {
		t.Errorf("upstream p95 %d, want about 500–519 ms", j.Upstream.P95)
	}
	// Waited 20 × 3,900 ms of 20 × ~4,510 + 20 × 40 ms.
	if j.WaitShare < 0.83 || j.WaitShare > 0.86 {
		t.Errorf("wait share %.3f, want ≈ 0.85", j.WaitShare)
	}
	tj := s.TTFBJudgement
	if !tj.Flagged || tj.Upstream.Count != 20 || tj.Upstream.P50 != 100 || fmt.Sprintf("%.3f", tj.WaitShare) != "0.967" {
		t.Errorf("first byte p95 %d judged %+v, want flagged, upstream 100 ms, 2.9 of 3 s waited", s.TTFB.P95, tj)
	}
}
