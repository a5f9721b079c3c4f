package resilience_test

import (
	"context"
	"testing"
	"time"

	"switchyard/internal/testkit"
	"switchyard/services"
	"switchyard/services/resilience"
)

// Two mirrors of the model lockouts on one store, the cases the two-mirror
// model check (TestRapidResilienceModelTwoMirrors) found, replayed step by
// step so each fix has a test of its own.

func newMirrorPair(t *testing.T, set mdlSettings) *mdlSystem {
	t.Helper()
	t0 := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	doc := resilience.DefaultDocument()
	doc.ModelLockout.Enabled = set.lockOn
	doc.ModelLockout.ErrorCodes = set.lockoutConfig().ErrorCodes
	sys := &mdlSystem{clock: testkit.NewFakeClock(t0), t0: t0, doc: doc, brStore: resilience.NewMemoryBreakerStore(),
		cdStore: resilience.NewMemoryConnectionStateStore(), loStore: resilience.NewMemoryLockoutStore(),
		provider: map[string]string{"c0": "prov0"}, mirrors: 2}
	if err := sys.build(set); err != nil {
		t.Fatal(err)
	}
	return sys
}

// mirrorOutcome sends one dispatch of c0/m-a through mirror eng and ends it
// with kind; lost drops what it publishes and resyncs the other mirror,
// as a listener that reconnects does.
func mirrorOutcome(t *testing.T, sys *mdlSystem, eng int, kind mdlKind, hintMs int64, lost bool) {
	t.Helper()
	ctx := context.Background()
	adm, blk := sys.engines[eng].AllowProvider("prov0", services.AuthAPIKey, "")
	if blk != nil {
		t.Fatalf("mirror %d refused the dispatch: %+v", eng, blk)
	}
	if lost {
		sys.bus.mu.Lock()
		sys.bus.hold = true
		sys.bus.mu.Unlock()
	}
	if kind == kindOK {
		sys.engines[eng].Success(ctx, adm, "c0", "m-a")
	} else {
		conn := resilience.ConnRef{ID: "c0", Provider: "prov0", Profile: services.AuthAPIKey}
		sys.engines[eng].Failure(ctx, adm, conn, sys.failureOf("c0", "m-a", kind, hintMs), nil)
	}
	if !lost {
		return
	}
	sys.bus.release(true)
	other := 1 - eng
	for _, k := range []services.ChangeKind{services.ChangeConnectionState, services.ChangeModelLockout, services.ChangeBreaker} {
		if err := sys.bus.locals[other].Resync(ctx, k); err != nil {
			t.Fatalf("resync %s on mirror %d: %v", k, other, err)
		}
	}
}

func lockRows(e *resilience.Engine) map[string]int {
	rows := map[string]int{}
	for _, s := range e.Lockouts.ListAll(resilience.LockFilter{}) {
		rows[string(s.Shape)+" "+s.LockKey] = s.FailureCount
	}
	return rows
}

// A mirror that saw a key deleted and then adopted a new row of it in a
// resync must still apply the deletion of that row: the tombstone of the
// first deletion would otherwise hide it, and the mirror kept refusing a
// model the rest of the fleet serves.
func TestMirrorsApplyTheDeletionOfARowAdoptedInAResync(t *testing.T) {
	set := mdlSettings{failThr: 5, resetMs: 1000, halfOpen: 1, maxMult: 1, cdBase: 1000, cdMax: 1000,
		lockOn: true, lockBase: 1000, lockMax: 1000}
	sys := newMirrorPair(t, set)
	mirrorOutcome(t, sys, 0, kind429, 0, false) // mirror 0 locks m-a
	mirrorOutcome(t, sys, 0, kindOK, 0, true)   // mirror 0 clears it; mirror 1 resyncs
	mirrorOutcome(t, sys, 1, kind429, 0, true)  // mirror 1 locks it again; mirror 0 resyncs
	if b := sys.engines[0].ConnectionBlocker("prov0", "c0", "m-a"); b == nil || b.Reason != "model_lockout" {
		t.Fatalf("mirror 0 after its resync: blocker %+v, want the model lockout mirror 1 wrote", b)
	}
	// A success on mirror 1 (the lock still runs) deletes the row, and
	// this time mirror 0 hears it.
	mirrorOutcome(t, sys, 1, kindOK, 0, false)
	for i, e := range sys.engines {
		if b := e.ConnectionBlocker("prov0", "c0", "m-a"); b != nil && b.Reason == "model_lockout" {
			t.Errorf("mirror %d still locks c0/m-a after the row was deleted: %+v", i, b)
		}
	}
}

// A failure absorbed by a running lock moves only its last-failure time
// (no new version); the other mirror must learn it, or it ends the key's
// escalation memory earlier and starts a new episode where this one
// escalates.
func TestMirrorsShareTheLastFailureOfARunningLock(t *testing.T) {
	set := mdlSettings{failThr: 5, resetMs: 1000, halfOpen: 1, maxMult: 1, cdBase: 1000, cdMax: 1000,
		lockOn: true, lockBase: 1000, lockMax: 2000}
	sys := newMirrorPair(t, set)
	mirrorOutcome(t, sys, 0, kind503, 2000, false) // locked until t=2 s
	sys.clock.Advance(1001 * time.Millisecond)
	mirrorOutcome(t, sys, 0, kind503, 0, false) // absorbed by the running lock
	if err := sys.flushAll(); err != nil {
		t.Fatal(err)
	}
	// At t=4.001 s the lock ended 2 s ago, the last failure (t=1.001 s) is
	// 3 s old: within the 2 s lock plus the 1 s reset window, so the row is
	// still escalation memory on both mirrors.
	sys.clock.Advance(3000 * time.Millisecond)
	r0, r1 := lockRows(sys.engines[0]), lockRows(sys.engines[1])
	if len(r0) == 0 {
		t.Fatalf("mirror 0 lost the row it keeps as escalation memory")
	}
	if len(r1) != len(r0) {
		t.Fatalf("mirror 1 rows %v, mirror 0 rows %v: the later last failure did not reach mirror 1", r1, r0)
	}
}
