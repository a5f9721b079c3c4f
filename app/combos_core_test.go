package app_test

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"switchyard/internal/fakeupstream"
	"switchyard/services"
)

func mkCombo(t *testing.T, f *gwFixture, in services.ComboInput) services.Combo {
	t.Helper()
	c, _, err := f.app.Server.Combos().Create(t.Context(), in)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func comboBody(name string) string {
	return `{"model":"` + name + `","messages":[{"role":"user","content":"hi"}]}`
}

// A combo whose only target answers 503 once is served by the retry pass
// (30-routing §6.3) after retryDelayMs; with maxRetries 0 the 503 is the
// answer after a single upstream hit.
func TestComboRetryPassServesAfterTransientFailure(t *testing.T) {
	f := newGW(t, "fk-a")
	// The 503 cools the connection for its Retry-After (1 s); the retry
	// pass starts after retryDelayMs, when the cooldown is over.
	mkCombo(t, f, services.ComboInput{Name: "retry", Targets: []services.Target{{Provider: "fake", Model: "m1"}},
		Config: map[string]any{"maxRetries": float64(1), "retryDelayMs": float64(1100)}})
	mkCombo(t, f, services.ComboInput{Name: "noretry", Targets: []services.Target{{Provider: "fake", Model: "m1"}},
		Config: map[string]any{"maxRetries": float64(0)}})

	f.fu.Script("fk-a", fakeupstream.Step{Status: 503, RetryAfter: "1"}, fakeupstream.Step{})
	resp, b := postKey(t, f.url+"/v1/chat/completions", f.key, comboBody("retry"))
	if resp.StatusCode != 200 || len(f.fu.HitsFor("fk-a")) != 2 {
		t.Fatalf("retry pass: %d %s, hits %d", resp.StatusCode, b, len(f.fu.HitsFor("fk-a")))
	}

	f.fu.Reset()
	f.fu.Script("fk-a", fakeupstream.Step{Status: 503}, fakeupstream.Step{})
	resp, b = postKey(t, f.url+"/v1/chat/completions", f.key, comboBody("noretry"))
	if resp.StatusCode != 503 || len(f.fu.HitsFor("fk-a")) != 1 {
		t.Fatalf("maxRetries 0: %d %s, hits %d", resp.StatusCode, b, len(f.fu.HitsFor("fk-a")))
	}
}

// A caller error (malformed 400) is never retried, and a rate-limited
// target is not a retry candidate (failover, not retry).
func TestComboRetryPassSkipsNonTransientFailures(t *testing.T) {
	f := newGW(t, "fk-a")
	patchResilience(t, f.app, `{"connectionCooldown":{"apikey":{"baseCooldownMs":0}}}`)
	mkCombo(t, f, services.ComboInput{Name: "retry", Targets: []services.Target{{Provider: "fake", Model: "m1"}},
		Config: map[string]any{"maxRetries": float64(3), "retryDelayMs": float64(1)}})
	f.fu.Script("fk-a", fakeupstream.Step{Status: 400, ErrorMessage: "bad field"}, fakeupstream.Step{})
	resp, _ := postKey(t, f.url+"/v1/chat/completions", f.key, comboBody("retry"))
	if resp.StatusCode != 400 || len(f.fu.HitsFor("fk-a")) != 1 {
		t.Fatalf("caller error: %d, hits %d", resp.StatusCode, len(f.fu.HitsFor("fk-a")))
	}
	f.fu.Reset()
	f.fu.Script("fk-a", fakeupstream.Step{Status: 401}, fakeupstream.Step{})
	resp, _ = postKey(t, f.url+"/v1/chat/completions", f.key, comboBody("retry"))
	if resp.StatusCode == 200 || len(f.fu.HitsFor("fk-a")) != 1 {
		t.Fatalf("auth error retried: %d, hits %d", resp.StatusCode, len(f.fu.HitsFor("fk-a")))
	}
}

// The session preference pass (30-routing §6.4) keeps a conversation with
// an explicit session id on the entry that served it under a spreading
// strategy, and drops the record when that entry fails.
func TestComboSessionPreferenceKeepsConversationOnEntry(t *testing.T) {
	f := twoProviders(t)
	mkCombo(t, f, services.ComboInput{Name: "spread", Strategy: "random",
		Targets: []services.Target{{Provider: "fake", Model: "m1"}, {Provider: "fakeb", Model: "m2"}}})
	first, _ := postKey(t, f.url+"/v1/chat/completions", f.key, comboBody("spread"), "X-Session-Id", "conv-1")
	if first.StatusCode != 200 {
		t.Fatalf("first: %d", first.StatusCode)
	}
	want := first.Header.Get("X-Switchyard-Selected-Connection-Id")
	for i := range 12 {
		resp, _ := postKey(t, f.url+"/v1/chat/completions", f.key, comboBody("spread"), "X-Session-Id", "conv-1")
		if got := resp.Header.Get("X-Switchyard-Selected-Connection-Id"); resp.StatusCode != 200 || got != want {
			t.Fatalf("turn %d went to %s, want %s", i+2, got, want)
		}
	}
	// Requests without a session spread over both entries.
	seen := map[string]bool{}
	for range 24 {
		resp, _ := postKey(t, f.url+"/v1/chat/completions", f.key, comboBody("spread"))
		seen[resp.Header.Get("X-Switchyard-Selected-Connection-Id")] = true
	}
	if len(seen) != 2 {
		t.Fatalf("stateless requests used %d entries, want 2", len(seen))
	}
	// The preferred entry fails: the session moves and stays on the other one.
	failing := "fk-a"
	if want == f.conns["fk-b"].ID {
		failing = "fk-b"
	}
	f.fu.Script(failing, fakeupstream.Step{Status: 503})
	resp, _ := postKey(t, f.url+"/v1/chat/completions", f.key, comboBody("spread"), "X-Session-Id", "conv-1")
	moved := resp.Header.Get("X-Switchyard-Selected-Connection-Id")
	if resp.StatusCode != 200 || moved == want {
		t.Fatalf("after failure: %d on %s", resp.StatusCode, moved)
	}
	f.fu.ClearScripts()
	for i := range 6 {
		resp, _ := postKey(t, f.url+"/v1/chat/completions", f.key, comboBody("spread"), "X-Session-Id", "conv-1")
		if got := resp.Header.Get("X-Switchyard-Selected-Connection-Id"); got != moved {
			t.Fatalf("turn %d after the move went to %s, want %s", i, got, moved)
		}
	}
}

// With queue.concurrencyPerTarget 1, a request that finds the first entry
// busy is deferred to the end of its walk and served by the next entry
// (30-routing §6.5).
func TestComboEntryQueueDefersSaturatedEntry(t *testing.T) {
	f := twoProviders(t)
	mkCombo(t, f, services.ComboInput{Name: "q", Targets: []services.Target{{Provider: "fake", Model: "m1"}, {Provider: "fakeb", Model: "m2"}},
		Config: map[string]any{"queue": map[string]any{"concurrencyPerTarget": float64(1)}}})
	f.fu.Script("fk-a", fakeupstream.Step{Delay: 400 * time.Millisecond, Times: 1}, fakeupstream.Step{})
	var wg sync.WaitGroup
	var slow *http.Response
	wg.Go(func() { slow, _ = postKey(t, f.url+"/v1/chat/completions", f.key, comboBody("q")) })
	waitHits(t, f.fu, "fk-a", 1)
	resp, _ := postKey(t, f.url+"/v1/chat/completions", f.key, comboBody("q"))
	wg.Wait()
	if slow.StatusCode != 200 || slow.Header.Get("X-Switchyard-Selected-Connection-Id") != f.conns["fk-a"].ID {
		t.Fatalf("slow request: %d on %s", slow.StatusCode, slow.Header.Get("X-Switchyard-Selected-Connection-Id"))
	}
	if resp.StatusCode != 200 || resp.Header.Get("X-Switchyard-Selected-Connection-Id") != f.conns["fk-b"].ID {
		t.Fatalf("second request: %d on %s, want the second entry", resp.StatusCode, resp.Header.Get("X-Switchyard-Selected-Connection-Id"))
	}
	if n := len(f.fu.HitsFor("fk-a")); n != 1 {
		t.Fatalf("the saturated entry got %d hits, want 1", n)
	}
}

// waitHits waits until the fake upstream has seen n requests for key.
func waitHits(t *testing.T, fu *fakeupstream.Server, key string, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for len(fu.HitsFor(key)) < n {
		if time.Now().After(deadline) {
			t.Fatalf("fake upstream saw %d requests for %s, want %d", len(fu.HitsFor(key)), key, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// quota-share expands one entry into its connections and alternates
// between equally weighted ones (30-routing §10.20).
func TestComboQuotaShareAlternatesConnections(t *testing.T) {
	f := newGW(t, "fk-a", "fk-a2")
	mkCombo(t, f, services.ComboInput{Name: "share", Strategy: "quota-share", Targets: []services.Target{{Provider: "fake", Model: "m1"}}})
	var got []string
	for range 4 {
		resp, b := postKey(t, f.url+"/v1/chat/completions", f.key, comboBody("share"))
		if resp.StatusCode != 200 {
			t.Fatalf("%d %s", resp.StatusCode, b)
		}
		got = append(got, resp.Header.Get("X-Switchyard-Selected-Connection-Id"))
	}
	a, b := f.conns["fk-a"].ID, f.conns["fk-a2"].ID
	if strings.Join(got, ",") != strings.Join([]string{a, b, a, b}, ",") {
		t.Fatalf("quota-share served %v, want alternating %s/%s", got, a, b)
	}
}

// Skipped references name their reason in diagnostics: a disabled inner
// combo is "disabled" and a too-deep one "depth_exceeded".
func TestComboReferenceSkipsAreDiagnosed(t *testing.T) {
	f := newGW(t, "fk-a")
	off := false
	inner := mkCombo(t, f, services.ComboInput{Name: "inner", Enabled: &off, Targets: []services.Target{{Provider: "fake", Model: "m1"}}})
	mkCombo(t, f, services.ComboInput{Name: "outer", Targets: []services.Target{{Kind: services.KindCombo, ComboID: inner.ID}}})
	resp, b := postKey(t, f.url+"/v1/chat/completions", f.key, comboBody("outer"))
	var e struct {
		Diagnostics struct {
			Excluded []struct{ Target, Reason string }
		}
	}
	_ = json.Unmarshal(b, &e)
	if resp.StatusCode != 404 || len(e.Diagnostics.Excluded) != 1 || e.Diagnostics.Excluded[0].Target != "combo:inner" ||
		e.Diagnostics.Excluded[0].Reason != "disabled" {
		t.Fatalf("disabled reference: %d %s", resp.StatusCode, b)
	}
}

// Dispatch metrics (30-routing §8.1) are recorded per target from real
// outcomes: successes and upstream failures, not caller errors.
func TestDispatchMetricsRecordOutcomes(t *testing.T) {
	f := newGW(t, "fk-a")
	for range 3 {
		postKey(t, f.url+"/v1/chat/completions", f.key, chatBody)
	}
	f.fu.Script("fk-a", fakeupstream.Step{Status: 500})
	postKey(t, f.url+"/v1/chat/completions", f.key, chatBody)
	f.fu.Script("fk-a", fakeupstream.Step{Status: 400, ErrorMessage: "bad field"})
	postKey(t, f.url+"/v1/chat/completions", f.key, chatBody)
	ts := f.app.Server.Gateway().TargetStats("fake", "m1", "")
	if ts.Samples != 4 || ts.SuccessRate == nil || *ts.SuccessRate != 0.75 || ts.AvgLatencyMs == nil {
		t.Fatalf("stats = %+v (rate %v)", ts, ts.SuccessRate)
	}
}

// cost-optimized and context-optimized read the built-in model table:
// the cheapest model first, and the largest window that fits first.
func TestComboCostAndContextOrderFromModelTable(t *testing.T) {
	f := newGW(t, "fk-a")
	f.app.AddConnection(services.ConnectionInput{Provider: services.Some("openai"), Name: services.Some("oai"),
		APIKey: services.Some("fk-o"), BaseURL: services.Some(f.fu.URL() + "/v1")})
	mkCombo(t, f, services.ComboInput{Name: "cheap", Strategy: "cost-optimized",
		Targets: []services.Target{{Provider: "openai", Model: "gpt-4o"}, {Provider: "fake", Model: "m1"}, {Provider: "openai", Model: "gpt-4o-mini"}}})
	mkCombo(t, f, services.ComboInput{Name: "roomy", Strategy: "context-optimized",
		Targets: []services.Target{{Provider: "openai", Model: "gpt-4o"}, {Provider: "fake", Model: "m1"}, {Provider: "openai", Model: "gpt-4.1"}}})
	for _, tc := range []struct{ combo, want string }{{"cheap", "gpt-4o-mini"}, {"roomy", "gpt-4.1"}} {
		f.fu.Reset()
		resp, b := postKey(t, f.url+"/v1/chat/completions", f.key, comboBody(tc.combo))
		hits := f.fu.HitsFor("fk-o")
		if resp.StatusCode != 200 || len(hits) != 1 || hits[0].Model != tc.want {
			t.Fatalf("%s: %d %s, hits %+v, want model %s", tc.combo, resp.StatusCode, b, hits, tc.want)
		}
	}
}

// With comboCooldownWait off, a combo whose two targets both cool after a
// 429 with Retry-After 2 s answers 503 all_targets_cooling_down with
// Retry-After 2 and both targets in diagnostics, without an upstream hit.
func TestComboAllTargetsCoolingDownDiagnostics(t *testing.T) {
	f := twoProviders(t)
	mkCombo(t, f, services.ComboInput{Name: "w", Targets: []services.Target{{Provider: "fake", Model: "m1"}, {Provider: "fakeb", Model: "m2"}}})
	f.fu.Script("fk-a", fakeupstream.Step{Status: 429, RetryAfter: "2"})
	f.fu.Script("fk-b", fakeupstream.Step{Status: 429, RetryAfter: "2"})
	if resp, b := postKey(t, f.url+"/v1/chat/completions", f.key, comboBody("w")); resp.StatusCode != 429 {
		t.Fatalf("first: %d %s", resp.StatusCode, b)
	}
	f.fu.Reset()
	var logs syncBuffer
	f.app.Server.Gateway().SetLogger(slog.New(slog.NewJSONHandler(&logs, nil)))
	resp, b := postKey(t, f.url+"/v1/chat/completions", f.key, comboBody("w"))
	if n := strings.Count(logs.String(), `"msg":"all targets cooling down"`); n != 1 || !strings.Contains(logs.String(), `"reasons":["unavailable:cooling"]`) {
		t.Fatalf("warning lines: %s", logs.String())
	}
	var e struct {
		Diagnostics struct {
			Excluded []struct {
				Target, Reason string
				RetryAfterMs   *int64
			}
		}
	}
	_ = json.Unmarshal(b, &e)
	if resp.StatusCode != 503 || !strings.Contains(string(b), "all_targets_cooling_down") || resp.Header.Get("Retry-After") != "2" ||
		len(e.Diagnostics.Excluded) != 2 || len(f.fu.Hits()) != 0 {
		t.Fatalf("cooling: %d Retry-After %q %s, hits %d", resp.StatusCode, resp.Header.Get("Retry-After"), b, len(f.fu.Hits()))
	}
	for _, x := range e.Diagnostics.Excluded {
		if x.RetryAfterMs == nil || *x.RetryAfterMs != 2000 {
			t.Fatalf("exclusion %+v, want retryAfterMs 2000", x)
		}
	}
}
