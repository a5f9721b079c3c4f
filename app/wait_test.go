package app_test

import (
	"testing"
	"time"

	"switchyard/internal/fakeupstream"
	"switchyard/services"
)

func TestSingleModelWaitsForTheSoonestCooldown(t *testing.T) {
	f := newGW(t, "fk-a", "fk-b")
	patchResilience(t, f.app, `{"waitForCooldown":{"enabled":true}}`)
	// Both connections answer 429 once (Retry-After 4 s and 6 s), then serve.
	f.fu.SetScript("fk-a", "*", fakeupstream.Script{Steps: []fakeupstream.Step{{Status: 429, RetryAfter: "4"}}, Then: fakeupstream.ThenDefault})
	f.fu.SetScript("fk-b", "*", fakeupstream.Script{Steps: []fakeupstream.Step{{Status: 429, RetryAfter: "6"}}, Then: fakeupstream.ThenDefault})
	start := f.app.Clock.Now()
	resp, b := postKey(t, f.url+"/v1/chat/completions", f.key, chatBody)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d %s", resp.StatusCode, b)
	}
	// waitMs = max(soonest waitable lapse 4 s, latest upstream hint 6 s) + 50 ms (20-resilience §9).
	waits := f.app.Clock.Waits()
	if len(waits) != 1 || waits[0] != 6050*time.Millisecond {
		t.Fatalf("waits %v, want [6.05s]", waits)
	}
	if resp.Header.Get("X-Switchyard-Selected-Connection-Id") != f.conns["fk-a"].ID || f.app.Clock.Now().Sub(start) != 6050*time.Millisecond {
		t.Fatalf("served by %s after %v", resp.Header.Get("X-Switchyard-Selected-Connection-Id"), f.app.Clock.Now().Sub(start))
	}
}

func TestNoWaitForQuotaExhaustion(t *testing.T) {
	f := newGW(t, "fk-a")
	patchResilience(t, f.app, `{"waitForCooldown":{"enabled":true},"comboCooldownWait":{"enabled":true}}`)
	f.fu.Script("fk-a", fakeupstream.Step{Status: 429, RetryAfter: "30", ErrorMessage: "You exceeded your current quota exceeded for this month"})
	resp, _ := postKey(t, f.url+"/v1/chat/completions", f.key, chatBody)
	if resp.StatusCode != 429 || len(f.app.Clock.Waits()) != 0 {
		t.Fatalf("quota: %d waits %v", resp.StatusCode, f.app.Clock.Waits())
	}
	// A combo over a cooling quota target answers at once with the timer's Retry-After.
	if _, _, err := f.app.Server.Combos().Create(t.Context(), services.ComboInput{Name: "q",
		Targets: []services.Target{{Provider: "fake", Model: "m1"}}}); err != nil {
		t.Fatal(err)
	}
	resp, _ = postKey(t, f.url+"/v1/chat/completions", f.key, `{"model":"q","messages":[{"role":"user","content":"x"}]}`)
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") != "30" || len(f.app.Clock.Waits()) != 0 {
		t.Fatalf("combo: %d Retry-After %q waits %v", resp.StatusCode, resp.Header.Get("Retry-After"), f.app.Clock.Waits())
	}
}

func TestComboWaitsForShortTransientCooldown(t *testing.T) {
	f := twoProviders(t)
	patchResilience(t, f.app, `{"comboCooldownWait":{"enabled":true}}`)
	if _, _, err := f.app.Server.Combos().Create(t.Context(), services.ComboInput{Name: "w",
		Targets: []services.Target{{Provider: "fake", Model: "m1"}, {Provider: "fakeb", Model: "m2"}}}); err != nil {
		t.Fatal(err)
	}
	f.fu.SetScript("fk-a", "*", fakeupstream.Script{Steps: []fakeupstream.Step{{Status: 429, RetryAfter: "2"}}, Then: fakeupstream.ThenDefault})
	f.fu.SetScript("fk-b", "*", fakeupstream.Script{Steps: []fakeupstream.Step{{Status: 429, RetryAfter: "3"}}, Then: fakeupstream.ThenDefault})
	resp, b := postKey(t, f.url+"/v1/chat/completions", f.key, `{"model":"w","messages":[{"role":"user","content":"x"}]}`)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d %s", resp.StatusCode, b)
	}
	if w := f.app.Clock.Waits(); len(w) != 1 || w[0] != 3050*time.Millisecond {
		t.Fatalf("waits %v, want [3.05s] (latest hint 3 s + 50 ms)", w)
	}
}
