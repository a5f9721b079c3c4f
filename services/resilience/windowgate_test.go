package resilience_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"switchyard/internal/testkit"
	"switchyard/services"
	"switchyard/services/resilience"
)

// ctx is the context of the gate writes (the in-process gate ignores it).
var ctx = context.Background()

// wgDefaults is the providerCooldown section with the defaults of
// 20-resilience §3.
func wgDefaults(enabled bool) resilience.WindowGateConfig {
	return resilience.WindowGateConfig{
		Enabled: enabled,
		Profiles: map[resilience.Profile]resilience.WindowProfile{
			services.AuthOAuth:  {FailureThreshold: 10, FailureWindowMs: 900_000, CooldownMs: 300_000},
			services.AuthAPIKey: {FailureThreshold: 15, FailureWindowMs: 1_800_000, CooldownMs: 600_000},
			services.AuthLocal:  {FailureThreshold: 5, FailureWindowMs: 300_000, CooldownMs: 60_000},
		},
		MinRetryCooldownMs: 5_000,
		MaxRetryCooldownMs: 300_000,
	}
}

type wgEnv struct {
	clock *testkit.FakeClock
	mu    sync.Mutex
	cfg   resilience.WindowGateConfig
	gate  *resilience.WindowGate
}

func newWgEnv(enabled bool) *wgEnv {
	e := &wgEnv{clock: testkit.NewFakeClock(bkT0), cfg: wgDefaults(enabled)}
	e.gate = resilience.NewWindowGate(e.clock, func() resilience.WindowGateConfig {
		e.mu.Lock()
		defer e.mu.Unlock()
		return e.cfg
	})
	return e
}

func (e *wgEnv) setEnabled(on bool) {
	e.mu.Lock()
	e.cfg.Enabled = on
	e.mu.Unlock()
}

func wantWgBlocked(t *testing.T, g *resilience.WindowGate, provider, conn string, want time.Duration) {
	t.Helper()
	blocked, retry := g.Blocked(provider, conn)
	if blocked != (want > 0) || retry != want {
		t.Fatalf("Blocked(%q, %q) = %v %v, want %v", provider, conn, blocked, retry, want)
	}
}

func TestWindowGateW1DisabledNeverExcludes(t *testing.T) {
	e := newWgEnv(false)
	for i := range 100 {
		e.clock.Set(bkAt(int64(i) * 100))
		e.gate.RecordFinalFailure(ctx, "openai", services.AuthAPIKey, "", resilience.ReasonServerError, false)
		e.gate.RecordFinalFailure(ctx, "openai", services.AuthAPIKey, "c1", resilience.ReasonServerError, false)
		wantWgBlocked(t, e.gate, "openai", "", 0)
		wantWgBlocked(t, e.gate, "openai", "c1", 0)
	}
	if got := e.gate.Entries(); len(got) != 0 {
		t.Fatalf("Entries = %+v, want none", got)
	}
}

func TestWindowGateW2ThresholdCools(t *testing.T) {
	e := newWgEnv(true)
	for i := range 14 {
		e.clock.Set(bkAt(int64(i) * 40_000)) // t = 0 … 520 s
		e.gate.RecordFinalFailure(ctx, "openai", services.AuthAPIKey, "", resilience.ReasonRateLimit, false)
		wantWgBlocked(t, e.gate, "openai", "", 0)
	}
	if got := e.gate.Entries(); len(got) != 1 || got[0].FailuresInWindow != 14 || got[0].RetryAfterMs != 0 {
		t.Fatalf("Entries after 14 = %+v", got)
	}
	e.clock.Set(bkAt(600_000))
	e.gate.RecordFinalFailure(ctx, "openai", services.AuthAPIKey, "", resilience.ReasonRateLimit, false)
	wantWgBlocked(t, e.gate, "openai", "", 600*time.Second)
	wantWgBlocked(t, e.gate, "openai", "c9", 600*time.Second) // a pinned target of the provider too
	wantWgBlocked(t, e.gate, "anthropic", "", 0)
	if b, ok := e.gate.Block("openai", ""); !ok || !b.Waitable {
		t.Fatalf("Block = %+v %v, want a waitable block (rate_limit)", b, ok)
	}
	want := []resilience.WindowGateStatus{{Key: "openai", Provider: "openai", RetryAfterMs: 600_000, FailuresInWindow: 0, Waitable: true}}
	if got := e.gate.Entries(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("Entries = %+v, want %+v", got, want)
	}
	e.clock.Set(bkAt(1_199_999))
	wantWgBlocked(t, e.gate, "openai", "", time.Millisecond)
	e.clock.Set(bkAt(1_200_000))
	wantWgBlocked(t, e.gate, "openai", "", 0)
	if got := e.gate.Entries(); len(got) != 0 {
		t.Fatalf("Entries after expiry = %+v", got)
	}
}

func TestWindowGateW3WindowSlides(t *testing.T) {
	e := newWgEnv(true)
	e.gate.RecordFinalFailure(ctx, "openai", services.AuthAPIKey, "", resilience.ReasonServerError, false)
	e.clock.Set(bkAt(1_800_000))
	for range 14 {
		e.gate.RecordFinalFailure(ctx, "openai", services.AuthAPIKey, "", resilience.ReasonServerError, false)
	}
	wantWgBlocked(t, e.gate, "openai", "", 0)
	if got := e.gate.Entries(); len(got) != 1 || got[0].FailuresInWindow != 14 {
		t.Fatalf("Entries = %+v, want 14 failures in the window", got)
	}
	// One more inside the window reaches the threshold.
	e.gate.RecordFinalFailure(ctx, "openai", services.AuthAPIKey, "", resilience.ReasonServerError, false)
	wantWgBlocked(t, e.gate, "openai", "", 600*time.Second)
}

func TestWindowGateW4ConnectionLevelLadder(t *testing.T) {
	e := newWgEnv(true)
	wantS := []int64{5, 10, 20, 40, 80, 160, 300, 300}
	for i, s := range wantS {
		e.gate.RecordFinalFailure(ctx, "openai", services.AuthAPIKey, "c1", resilience.ReasonServerError, false)
		d := time.Duration(s) * time.Second
		wantWgBlocked(t, e.gate, "openai", "c1", d)
		wantWgBlocked(t, e.gate, "openai", "", 0) // the provider and its other connections stay open
		wantWgBlocked(t, e.gate, "openai", "c2", 0)
		if got := e.gate.Entries(); len(got) != 1 || got[0].Key != "openai:c1" || got[0].FailuresInWindow != i+1 ||
			got[0].RetryAfterMs != s*1000 {
			t.Fatalf("failure %d: Entries = %+v", i+1, got)
		}
		// A failure landing inside the cooldown is the same episode.
		e.clock.Advance(d / 2)
		e.gate.RecordFinalFailure(ctx, "openai", services.AuthAPIKey, "c1", resilience.ReasonServerError, false)
		wantWgBlocked(t, e.gate, "openai", "c1", d-d/2)
		e.clock.Advance(d - d/2 - time.Millisecond)
		wantWgBlocked(t, e.gate, "openai", "c1", time.Millisecond)
		e.clock.Advance(time.Millisecond)
		wantWgBlocked(t, e.gate, "openai", "c1", 0)
	}
	e.gate.Success(ctx, "openai", "c1")
	e.gate.RecordFinalFailure(ctx, "openai", services.AuthAPIKey, "c1", resilience.ReasonServerError, false)
	wantWgBlocked(t, e.gate, "openai", "c1", 5*time.Second)
}

func TestWindowGateW5SuccessEmptiesWindow(t *testing.T) {
	e := newWgEnv(true)
	for range 9 {
		e.gate.RecordFinalFailure(ctx, "openai", services.AuthAPIKey, "", resilience.ReasonTransient, false)
		e.clock.Advance(time.Second)
	}
	e.gate.Success(ctx, "openai", "")
	for range 14 {
		e.gate.RecordFinalFailure(ctx, "openai", services.AuthAPIKey, "", resilience.ReasonTransient, false)
		e.clock.Advance(time.Second)
	}
	wantWgBlocked(t, e.gate, "openai", "", 0)
	if got := e.gate.Entries(); len(got) != 1 || got[0].FailuresInWindow != 14 {
		t.Fatalf("Entries = %+v", got)
	}
}

func TestWindowGateTriggers(t *testing.T) {
	tests := []struct {
		name             string
		reason           resilience.Reason
		perModelQuota500 bool
		cools, waitable  bool
	}{
		{"rate_limit", resilience.ReasonRateLimit, false, true, true},
		{"quota_exhausted", resilience.ReasonQuotaExhausted, false, true, false},
		{"model_capacity", resilience.ReasonModelCapacity, false, true, true},
		{"server_error", resilience.ReasonServerError, false, true, true},
		{"transient", resilience.ReasonTransient, false, true, true},
		{"bare 500 on perModelQuota", resilience.ReasonServerError, true, false, false},
		{"auth_error", resilience.ReasonAuthError, false, false, false},
		{"forbidden", resilience.ReasonForbidden, false, false, false},
		{"not_found", resilience.ReasonNotFound, false, false, false},
		{"credits_exhausted", resilience.ReasonCreditsExhausted, false, false, false},
		{"caller_error", resilience.ReasonCallerError, false, false, false},
		{"client_abort", resilience.ReasonClientAbort, false, false, false},
		{"local_limit", resilience.ReasonLocalLimit, false, false, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newWgEnv(true)
			for range 5 {
				e.gate.RecordFinalFailure(ctx, "ollama", services.AuthLocal, "", tc.reason, tc.perModelQuota500)
			}
			b, blocked := e.gate.Block("ollama", "")
			if blocked != tc.cools || b.Waitable != tc.waitable {
				t.Fatalf("Block = %+v %v, want blocked %v waitable %v", b, blocked, tc.cools, tc.waitable)
			}
			if tc.cools && b.RetryAfter != time.Minute {
				t.Fatalf("local cooldown = %v, want 60s", b.RetryAfter)
			}
		})
	}
}

func TestWindowGateProviderScopeRule(t *testing.T) {
	e := newWgEnv(false) // the rule is the opt-in: works with the gate off
	e.gate.ProviderScope(ctx, "mistral", services.AuthAPIKey, 45_000)
	wantWgBlocked(t, e.gate, "mistral", "", 45*time.Second)
	wantWgBlocked(t, e.gate, "mistral", "c1", 45*time.Second)
	if b, _ := e.gate.Block("mistral", ""); b.Waitable {
		t.Fatal("a rule-declared provider cooldown is not waitable")
	}
	// A shorter rule cooldown never shortens the running one.
	e.clock.Advance(5 * time.Second)
	e.gate.ProviderScope(ctx, "mistral", services.AuthAPIKey, 1_000)
	wantWgBlocked(t, e.gate, "mistral", "", 40*time.Second)
	// No cooldownMs on the rule: the profile's cooldownMs.
	e.gate.ProviderScope(ctx, "groq", services.AuthAPIKey, 0)
	wantWgBlocked(t, e.gate, "groq", "", 600*time.Second)
	// A success does not lift it.
	e.gate.Success(ctx, "groq", "")
	wantWgBlocked(t, e.gate, "groq", "", 600*time.Second)
	if got := e.gate.Entries(); len(got) != 2 || got[0].Key != "groq" || got[1].RetryAfterMs != 40_000 {
		t.Fatalf("Entries = %+v", got)
	}
	e.clock.Advance(40 * time.Second)
	wantWgBlocked(t, e.gate, "mistral", "", 0)
}

func TestWindowGateDisablingStopsEnforcement(t *testing.T) {
	e := newWgEnv(true)
	for range 15 {
		e.gate.RecordFinalFailure(ctx, "openai", services.AuthAPIKey, "", resilience.ReasonServerError, false)
	}
	wantWgBlocked(t, e.gate, "openai", "", 600*time.Second)
	e.setEnabled(false)
	wantWgBlocked(t, e.gate, "openai", "", 0)
	e.setEnabled(true)
	wantWgBlocked(t, e.gate, "openai", "", 600*time.Second)
	// Failures inside the cooldown do not extend it.
	e.clock.Advance(100 * time.Second)
	for range 30 {
		e.gate.RecordFinalFailure(ctx, "openai", services.AuthAPIKey, "", resilience.ReasonServerError, false)
	}
	wantWgBlocked(t, e.gate, "openai", "", 500*time.Second)
}

func TestWindowGateQuotaMixedWithWaitable(t *testing.T) {
	e := newWgEnv(true)
	for range 15 {
		e.gate.RecordFinalFailure(ctx, "openai", services.AuthAPIKey, "", resilience.ReasonQuotaExhausted, false)
	}
	e.gate.RecordFinalFailure(ctx, "openai", services.AuthAPIKey, "c1", resilience.ReasonRateLimit, false)
	b, ok := e.gate.Block("openai", "c1")
	if !ok || b.RetryAfter != 600*time.Second || b.Waitable {
		t.Fatalf("Block = %+v %v: the longest blocker wins and one non-waitable blocker makes it non-waitable", b, ok)
	}
	if b, _ := e.gate.Block("other", "c1"); b.RetryAfter != 0 {
		t.Fatalf("unrelated provider blocked: %+v", b)
	}
}

func TestWindowGateClearAndSweep(t *testing.T) {
	e := newWgEnv(true)
	for range 15 {
		e.gate.RecordFinalFailure(ctx, "openai", services.AuthAPIKey, "", resilience.ReasonServerError, false)
	}
	e.gate.RecordFinalFailure(ctx, "anthropic", services.AuthAPIKey, "", resilience.ReasonServerError, false)
	e.gate.RecordFinalFailure(ctx, "anthropic", services.AuthAPIKey, "c1", resilience.ReasonServerError, false)
	if n := e.gate.Sweep(); n != 0 {
		t.Fatalf("Sweep dropped %d live entries", n)
	}
	if n, _ := e.gate.Clear(ctx); n != 3 {
		t.Fatalf("Clear = %d, want 3", n)
	}
	wantWgBlocked(t, e.gate, "openai", "", 0)
	if got := e.gate.Entries(); len(got) != 0 {
		t.Fatalf("Entries after Clear = %+v", got)
	}

	// Dead entries: lapsed and idle for max(30 min, maxRetryCooldownMs).
	for range 15 {
		e.gate.RecordFinalFailure(ctx, "openai", services.AuthAPIKey, "", resilience.ReasonServerError, false)
	}
	e.gate.RecordFinalFailure(ctx, "openai", services.AuthAPIKey, "c1", resilience.ReasonServerError, false)
	e.gate.RecordFinalFailure(ctx, "anthropic", services.AuthAPIKey, "", resilience.ReasonServerError, false)
	e.clock.Advance(30*time.Minute - time.Millisecond)
	if n := e.gate.Sweep(); n != 0 {
		t.Fatalf("Sweep before retention dropped %d", n)
	}
	e.clock.Advance(time.Millisecond)
	// openai (cooldown over at 10 min) and openai:c1 are dead; anthropic's
	// single failure has just left its 30 min window as well.
	if n := e.gate.Sweep(); n != 3 {
		t.Fatalf("Sweep = %d, want 3", n)
	}
	// The connection count is gone with its entry: the ladder restarts.
	e.gate.RecordFinalFailure(ctx, "openai", services.AuthAPIKey, "c1", resilience.ReasonServerError, false)
	wantWgBlocked(t, e.gate, "openai", "c1", 5*time.Second)
}

func TestWindowGateConcurrentUse(t *testing.T) {
	e := newWgEnv(true)
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := range 500 {
				p := fmt.Sprintf("p%d", (w+i)%3)
				conn := ""
				if i%2 == 0 {
					conn = fmt.Sprintf("c%d", i%4)
				}
				switch i % 5 {
				case 0:
					e.gate.Success(ctx, p, conn)
				case 1:
					e.gate.Blocked(p, conn)
				case 2:
					_ = e.gate.Entries()
				case 3:
					e.clock.Advance(time.Second)
					e.gate.Sweep()
				default:
					e.gate.RecordFinalFailure(ctx, p, services.AuthLocal, conn, resilience.ReasonRateLimit, false)
				}
				if w == 0 && i%100 == 0 {
					e.gate.ProviderScope(ctx, p, services.AuthLocal, 0)
					e.setEnabled(i%200 == 0)
				}
			}
		})
	}
	wg.Wait()
	e.gate.Clear(ctx)
	if got := e.gate.Entries(); len(got) != 0 {
		t.Fatalf("Entries after Clear = %+v", got)
	}
}

func TestWindowGateIdleConnectionRestartsLadder(t *testing.T) {
	e := newWgEnv(true)
	for range 3 {
		e.gate.RecordFinalFailure(ctx, "openai", services.AuthAPIKey, "c1", resilience.ReasonServerError, false)
		e.clock.Advance(time.Minute)
	}
	e.gate.RecordFinalFailure(ctx, "openai", services.AuthAPIKey, "c1", resilience.ReasonServerError, false)
	wantWgBlocked(t, e.gate, "openai", "c1", 40*time.Second)
	// Idle for the retention time: the entry is dead and, without any sweep,
	// the next failure starts the ladder again.
	e.clock.Advance(30 * time.Minute)
	e.gate.RecordFinalFailure(ctx, "openai", services.AuthAPIKey, "c1", resilience.ReasonServerError, false)
	wantWgBlocked(t, e.gate, "openai", "c1", 5*time.Second)
}
