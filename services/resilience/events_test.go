package resilience_test

import (
	"context"
	"testing"

	"switchyard/services"
	"switchyard/services/events"
	"switchyard/services/resilience"
)

// The transitions the resilience state machines decide reach the Recent
// events ring (50-dashboard §6.8); steady state records nothing.

// wantEvents fails unless the ring holds exactly want (newest first),
// comparing type, provider, connection, model, cause and status.
func wantEvents(t *testing.T, r *events.Ring, want ...events.Event) {
	t.Helper()
	got := r.Snapshot()
	if len(got) != len(want) {
		t.Fatalf("ring holds %d events, want %d: %+v", len(got), len(want), got)
	}
	for i, w := range want {
		g := got[i]
		g.At = w.At
		if g != w {
			t.Errorf("event %d = %+v\nwant %+v", i, g, w)
		}
	}
}

func TestBreakerTransitionsAreEvents(t *testing.T) {
	e := newBkEnv(t)
	ring := events.NewRing(e.clock)
	e.br.Events = ring
	const p = "deepseek"
	e.open(t, p, services.AuthAPIKey) // passes DEGRADED at 7 failures: not an event
	open := events.Event{Type: events.BreakerOpened, Provider: p, Cause: "server_error"}
	wantEvents(t, ring, open)
	if at := ring.Snapshot()[0].At; !at.Equal(bkAt(40_000)) {
		t.Errorf("opened at %v, want the clock's t0+40 s", at)
	}
	// Refused requests while OPEN change nothing.
	e.br.Allow(p, services.AuthAPIKey)
	wantEvents(t, ring, open)

	// The retry time comes: the next Allow is the probe (HALF_OPEN); its success closes.
	e.clock.Set(bkAt(70_000))
	ok, probe, gen, _ := e.br.Allow(p, services.AuthAPIKey)
	if !ok || !probe {
		t.Fatalf("Allow after the reset timeout = %v probe %v", ok, probe)
	}
	half := events.Event{Type: events.BreakerHalfOpen, Provider: p, Cause: events.CauseResetTimeout}
	wantEvents(t, ring, half, open)
	e.br.Success(p, gen, true)
	closed := events.Event{Type: events.BreakerClosed, Provider: p, Cause: events.CauseProbeSucceeded}
	wantEvents(t, ring, closed, half, open)

	// Successes on a closed breaker record nothing.
	_, _, gen, _ = e.br.Allow(p, services.AuthAPIKey)
	e.br.Success(p, gen, false)
	wantEvents(t, ring, closed, half, open)

	// The admin resets an open breaker: closed, cause admin; resetting a
	// closed one again records nothing.
	e.clock.Set(bkAt(3_600_000))
	e.open(t, p, services.AuthAPIKey)
	if err := e.br.Reset(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	if err := e.br.Reset(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	got := ring.Snapshot()
	if len(got) != 5 || got[0] != (events.Event{Type: events.BreakerClosed, Provider: p, Cause: events.CauseAdmin, At: got[0].At}) ||
		got[1].Type != events.BreakerOpened {
		t.Fatalf("after reset: %+v", got[:2])
	}
	e.open(t, "mistral", services.AuthAPIKey)
	if _, err := e.br.ResetAll(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := ring.Snapshot()[0]; got.Type != events.BreakerClosed || got.Provider != "mistral" || got.Cause != events.CauseAdmin {
		t.Fatalf("after reset all: %+v", got)
	}
}

func TestCooldownTransitionsAreEvents(t *testing.T) {
	e := newCDEnv(t)
	ring := events.NewRing(e.clock)
	e.cd.Events = ring
	ctx := context.Background()

	// A 429 with Retry-After sets a cooldown; a second failure inside the episode is no event.
	e.cd.Apply(ctx, cdAPIKey, cdHinted(cdCls(429, resilience.ReasonRateLimit), cdSec(30)))
	set := events.Event{Type: events.CooldownSet, Provider: "openai", ConnectionID: "c_1", Cause: "rate_limit", Status: 429}
	wantEvents(t, ring, set)
	e.at(cdSec(5))
	e.cd.Apply(ctx, cdAPIKey, cdCls(503, resilience.ReasonServerError))
	wantEvents(t, ring, set)

	// The admin clears it.
	if _, err := e.cd.ClearCooldownsDetailed(ctx, []string{"c_1"}); err != nil {
		t.Fatal(err)
	}
	cleared := events.Event{Type: events.CooldownCleared, ConnectionID: "c_1", Cause: events.CauseAdmin}
	wantEvents(t, ring, cleared, set)

	// A success after a cooldown clears it (cause success); a success with
	// nothing set records nothing.
	e.at(cdSec(60))
	e.cd.Apply(ctx, cdAPIKey, cdCls(503, resilience.ReasonServerError))
	e.at(cdSec(600))
	e.cd.Success(ctx, "c_1")
	e.cd.Success(ctx, "c_1")
	got := ring.Snapshot()
	if len(got) != 4 || got[1].Type != events.CooldownSet || got[1].Cause != "server_error" ||
		got[0] != (events.Event{Type: events.CooldownCleared, ConnectionID: "c_1", Cause: events.CauseSuccess, At: got[0].At}) {
		t.Fatalf("after success: %+v", got)
	}

	// 402 credits exhausted: terminal; the admin reset is its own event.
	e.cd.Apply(ctx, cdConn("c_2", services.AuthAPIKey), cdCls(402, resilience.ReasonCreditsExhausted))
	if got := ring.Snapshot()[0]; got.Type != events.TerminalSet || got.ConnectionID != "c_2" || got.Cause != "credits_exhausted" || got.Status != 402 {
		t.Fatalf("terminal: %+v", got)
	}
	if err := e.cd.Reset(ctx, "c_2"); err != nil {
		t.Fatal(err)
	}
	if got := ring.Snapshot()[0]; got != (events.Event{Type: events.TerminalReset, ConnectionID: "c_2", Cause: events.CauseAdmin, At: got.At}) {
		t.Fatalf("terminal reset: %+v", got)
	}
	// Resetting a healthy connection is no event.
	n := len(ring.Snapshot())
	if err := e.cd.Reset(ctx, "c_2"); err != nil {
		t.Fatal(err)
	}
	if len(ring.Snapshot()) != n {
		t.Fatal("resetting a healthy connection recorded an event")
	}
}

func TestLockoutTransitionsAreEvents(t *testing.T) {
	e := newLockEnv(t, nil)
	ring := events.NewRing(e.clock)
	e.l.Events = ring
	ctx := context.Background()
	e.l.Apply(ctx, "gemini", "c1", "gemini-2.5-flash", fail(429, resilience.ReasonRateLimit))
	e.l.Apply(ctx, "gemini", "c1", "gemini-2.5-flash", fail(429, resilience.ReasonRateLimit)) // the running episode
	set := events.Event{Type: events.LockoutSet, Provider: "gemini", ConnectionID: "c1", Model: "gemini-2.5-flash", Cause: "rate_limit", Status: 429}
	wantEvents(t, ring, set)
	// Off: nothing is locked, nothing recorded.
	e.setEnabled(false)
	e.l.Apply(ctx, "gemini", "c2", "gemini-2.5-pro", fail(429, resilience.ReasonRateLimit))
	wantEvents(t, ring, set)
	e.setEnabled(true)
	if n, err := e.l.Clear(ctx, resilience.LockFilter{}); err != nil || n != 1 {
		t.Fatalf("clear: %d %v", n, err)
	}
	wantEvents(t, ring, events.Event{Type: events.LockoutCleared, Provider: "gemini", ConnectionID: "c1", Model: "gemini-2.5-flash",
		Cause: events.CauseAdmin}, set)
	// Clearing nothing records nothing.
	e.l.Clear(ctx, resilience.LockFilter{})
	if len(ring.Snapshot()) != 2 {
		t.Fatal("an empty clear recorded an event")
	}
}

func TestEngineWithoutEventsRecordsNothing(t *testing.T) {
	// Services built without a recorder work as before (nil is a no-op).
	e := newCDEnv(t)
	e.cd.Apply(context.Background(), cdAPIKey, cdCls(429, resilience.ReasonRateLimit))
	e.wantCooling(t, "c_1", cdSec(3))
}
