package resilience_test

import (
	"context"
	"testing"
	"time"

	"switchyard/internal/testkit"
	"switchyard/services"
	"switchyard/services/resilience"
)

// statusEnv is an engine on memory stores and a monitor over a fixed list
// of connections.
type statusEnv struct {
	clock   *testkit.FakeClock
	engine  *resilience.Engine
	cd      *resilience.Cooldowns
	lo      *resilience.Lockouts
	monitor *resilience.Monitor
	conns   []services.Connection
	doc     resilience.Document
}

type fakeTraffic struct {
	slots  map[string]resilience.SlotUse
	queued map[string]int
}

func (f fakeTraffic) SlotUse() map[string]resilience.SlotUse { return f.slots }
func (f fakeTraffic) Queued() map[string]int                 { return f.queued }

func newStatusEnv(t *testing.T, conns ...services.Connection) *statusEnv {
	t.Helper()
	e := &statusEnv{clock: testkit.NewFakeClock(time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)), conns: conns}
	e.doc.RequestQueue.AutoEnableApiKeyProviders = true
	e.doc.ConnectionConcurrency.Enabled = true
	br := resilience.NewBreakers(e.clock, func() resilience.BreakerConfig { return resilience.BreakerConfig{} }, nil, nil)
	e.cd = resilience.NewCooldowns(e.clock, func() resilience.CooldownConfig {
		return resilience.CooldownConfig{Profiles: map[resilience.Profile]resilience.CooldownProfile{
			services.AuthAPIKey: {BaseCooldownMs: 1000, MaxBackoffSteps: 7, MaxCooldownMs: 60_000}}}
	}, resilience.NewMemoryConnectionStateStore(), nil)
	e.lo = resilience.NewLockouts(e.clock, func() resilience.LockoutConfig {
		return resilience.LockoutConfig{Enabled: true, ErrorCodes: []int{429}, BaseCooldownMs: 60_000, MaxCooldownMs: 600_000, MaxBackoffSteps: 3}
	}, nil, nil, nil)
	gate := resilience.NewWindowGate(e.clock, func() resilience.WindowGateConfig { return resilience.WindowGateConfig{Enabled: true} })
	e.engine = resilience.NewEngine(e.clock, resilience.NewClassifier(nil, nil, e.clock.Now, nil), br, gate, e.cd, e.lo,
		func() *resilience.Document { return &e.doc }, func() resilience.EgressLockConfig { return resilience.EgressLockConfig{} })
	e.monitor = resilience.NewMonitor(e.engine, resilience.StatusSources{
		Connections: func() []services.Connection { return e.conns },
		Traffic: fakeTraffic{slots: map[string]resilience.SlotUse{"c_cool": {InFlight: 2, Waiting: 1}},
			queued: map[string]int{"c_ok": 3}},
	})
	return e
}

func conn(id string, enabled bool) services.Connection {
	return services.Connection{ID: id, Provider: "openai", Name: "name-" + id, AuthClass: services.AuthAPIKey, Enabled: enabled}
}

func TestSnapshotConditionPrecedenceAndCounts(t *testing.T) {
	e := newStatusEnv(t, conn("c_term", true), conn("c_cool", true), conn("c_lock", true), conn("c_ok", true), conn("c_off", false))
	now := e.clock.Now()
	until := now.Add(30 * time.Second)
	// A terminal connection that also has a cooldown deadline and a lockout
	// is terminal: the most severe condition wins.
	e.cd.Replace("c_term", services.ConnectionState{TerminalStatus: services.TerminalBanned, RateLimitedUntil: &until})
	e.cd.Replace("c_cool", services.ConnectionState{RateLimitedUntil: &until, BackoffLevel: 2, CooldownReason: "rate_limit"})
	e.cd.Replace("c_off", services.ConnectionState{RateLimitedUntil: &until})
	for _, id := range []string{"c_term", "c_lock"} {
		if applied, _, _ := e.lo.Apply(context.Background(), "openai", id, "gpt-4o",
			resilience.Classification{Status: 429, Reason: resilience.ReasonRateLimit, Scope: resilience.ScopeModel}); !applied {
			t.Fatalf("lockout of %s not applied", id)
		}
	}

	snap := e.monitor.Snapshot()
	want := map[string]struct {
		cond   resilience.Condition
		status string
	}{
		"c_term": {resilience.ConditionTerminal, services.TerminalBanned},
		"c_cool": {resilience.ConditionCooling, services.StatusCooling},
		"c_lock": {resilience.ConditionModelLocked, services.StatusActive},
		"c_ok":   {resilience.ConditionHealthy, services.StatusActive},
		// Enabled is not part of the condition; the status word puts it first.
		"c_off": {resilience.ConditionCooling, services.StatusDisabled},
	}
	if len(snap.Connections) != len(want) {
		t.Fatalf("%d statuses, want %d", len(snap.Connections), len(want))
	}
	for i, st := range snap.Connections {
		if st.Conn.ID != e.conns[i].ID {
			t.Errorf("status %d is %s, want the list order (%s)", i, st.Conn.ID, e.conns[i].ID)
		}
		w := want[st.Conn.ID]
		if st.Condition != w.cond || st.Status != w.status {
			t.Errorf("%s: condition %s status %s, want %s %s", st.Conn.ID, st.Condition, st.Status, w.cond, w.status)
		}
	}
	cool, _ := snap.Connection("c_cool")
	if !cool.Cooling() || cool.Until == nil || !cool.Until.Equal(until) || cool.Reason != "rate_limit" || cool.Backoff != 2 || cool.BackoffMax != 7 {
		t.Errorf("cooling status %+v", cool)
	}
	if cool.Slots != (resilience.SlotUse{InFlight: 2, Waiting: 1}) {
		t.Errorf("slot use %+v", cool.Slots)
	}
	term, _ := snap.Connection("c_term")
	if term.Reason != services.TerminalBanned || term.Until != nil || len(term.Lockouts) != 1 {
		t.Errorf("terminal status %+v", term)
	}
	if ok, _ := snap.Connection("c_ok"); ok.Queued != 3 || !ok.QueueProtected {
		t.Errorf("healthy status: queued %d, protected %v", ok.Queued, ok.QueueProtected)
	}
	// Counts leave the switched-off connection out; lockouts count as they are.
	if n := snap.Counts(); n.Terminal != 1 || n.Cooling != 1 || n.Locked != 2 {
		t.Errorf("counts %+v", n)
	}
	if names := snap.Names(); names["c_lock"] != "name-c_lock" || len(names) != 5 {
		t.Errorf("names %v", names)
	}
	// A cooldown that lapsed is simply over.
	e.clock.Advance(31 * time.Second)
	if st := e.monitor.Connection(conn("c_cool", true)); st.Condition != resilience.ConditionHealthy || st.Status != services.StatusActive {
		t.Errorf("after the deadline: %s %s", st.Condition, st.Status)
	}
}

func TestQueueProtectedIsOneRule(t *testing.T) {
	on, off := true, false
	for _, tc := range []struct {
		name  string
		auto  bool
		class services.AuthClass
		own   *bool
		want  bool
	}{
		{"api key inherits the switch", true, services.AuthAPIKey, nil, true},
		{"api key, switch off", false, services.AuthAPIKey, nil, false},
		{"oauth never inherits", true, services.AuthOAuth, nil, false},
		{"own switch on wins", false, services.AuthOAuth, &on, true},
		{"own switch off wins", true, services.AuthAPIKey, &off, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var doc resilience.Document
			doc.RequestQueue.AutoEnableApiKeyProviders = tc.auto
			c := services.Connection{AuthClass: tc.class, RateLimitProtection: tc.own}
			if got := doc.QueueProtected(&c); got != tc.want {
				t.Fatalf("QueueProtected = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestClearCooldownsSkipsTerminalAndClearsLockoutsOfTheRest(t *testing.T) {
	e := newStatusEnv(t, conn("c_term", true), conn("c_cool", true))
	until := e.clock.Now().Add(time.Minute)
	e.cd.Replace("c_term", services.ConnectionState{TerminalStatus: services.TerminalExpired})
	e.cd.Replace("c_cool", services.ConnectionState{RateLimitedUntil: &until, BackoffLevel: 1})
	ctx := context.Background()
	for _, id := range []string{"c_term", "c_cool"} {
		e.lo.Apply(ctx, "openai", id, "gpt-4o", resilience.Classification{Status: 429, Reason: resilience.ReasonRateLimit, Scope: resilience.ScopeModel})
	}
	res, locks, err := e.engine.ClearCooldowns(ctx, e.conns)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Cleared) != 1 || res.Cleared[0] != "c_cool" || len(res.SkippedTerminal) != 1 || locks != 1 {
		t.Fatalf("result %+v, lockouts cleared %d", res, locks)
	}
	snap := e.monitor.Snapshot()
	if st, _ := snap.Connection("c_cool"); st.Condition != resilience.ConditionHealthy {
		t.Errorf("cleared connection is %s", st.Condition)
	}
	if st, _ := snap.Connection("c_term"); st.Condition != resilience.ConditionTerminal || len(st.Lockouts) != 1 {
		t.Errorf("terminal connection changed: %s, %d lockouts", st.Condition, len(st.Lockouts))
	}
	// Reset clears the terminal state too, and its lockouts unless told not to.
	if err := e.engine.ResetConnection(ctx, conn("c_term", true), false); err != nil {
		t.Fatal(err)
	}
	if st := e.monitor.Connection(conn("c_term", true)); st.Condition != resilience.ConditionModelLocked {
		t.Errorf("after a reset without lockouts: %s", st.Condition)
	}
	if err := e.engine.ResetConnection(ctx, conn("c_term", true), true); err != nil {
		t.Fatal(err)
	}
	if st := e.monitor.Connection(conn("c_term", true)); st.Condition != resilience.ConditionHealthy || e.engine.ActiveLockouts() != 0 {
		t.Errorf("after a full reset: %s, %d lockouts", st.Condition, e.engine.ActiveLockouts())
	}
}
