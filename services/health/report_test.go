package health_test

import (
	"encoding/json"
	"testing"
	"time"

	"switchyard/services"
	"switchyard/services/health"
	"switchyard/services/resilience"
)

func TestBuildDerivesStatusAndReasonsFromTheReadModel(t *testing.T) {
	now := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	until := now.Add(90 * time.Second)
	conn := func(id string, enabled bool, st services.ConnectionState) services.Connection {
		return services.Connection{ID: id, Provider: "openai", Name: id, Enabled: enabled, State: st}
	}
	snap := resilience.Snapshot{At: now,
		Breakers: []resilience.BreakerStatus{{Provider: "anthropic", State: resilience.BreakerOpen}, {Provider: "openai", State: resilience.BreakerDegraded}},
		Lockouts: []resilience.LockoutStatus{{Provider: "openai"}},
		Connections: []resilience.ConnectionStatus{
			{Conn: conn("c_term", true, services.ConnectionState{TerminalStatus: services.TerminalBanned}), Condition: resilience.ConditionTerminal},
			{Conn: conn("c_off", false, services.ConnectionState{TerminalStatus: services.TerminalExpired}), Condition: resilience.ConditionTerminal},
			{Conn: conn("c_cool", true, services.ConnectionState{RateLimitedUntil: &until, BackoffLevel: 2, LastErrorReason: "rate_limit"}),
				Condition: resilience.ConditionCooling, Until: &until},
			{Conn: conn("c_ok", true, services.ConnectionState{}), Condition: resilience.ConditionHealthy},
		}}
	f := health.Facts{Now: now, StartedAt: now.Add(-time.Hour), Version: "1.2.3", Database: health.Database{OK: true},
		RequestLog: health.RequestLog{Dropped: 1}, Resilience: snap}
	r := health.Build(f)
	wantReasons := []string{"breaker_open:anthropic", "terminal_connections:1", "request_log_drops"}
	if r.Status != health.StatusDegraded || len(r.Reasons) != len(wantReasons) {
		t.Fatalf("status %s reasons %v", r.Status, r.Reasons)
	}
	for i, w := range wantReasons {
		if r.Reasons[i] != w {
			t.Errorf("reason %d = %s, want %s", i, r.Reasons[i], w)
		}
	}
	if r.UptimeS != 3600 || r.Counts["connections"] != 4 || r.ModelLockouts.Active != 1 {
		t.Errorf("uptime %d counts %v lockouts %d", r.UptimeS, r.Counts, r.ModelLockouts.Active)
	}
	if len(r.TerminalConnections) != 2 || len(r.CoolingConnections) != 1 {
		t.Fatalf("terminal %v cooling %v", r.TerminalConnections, r.CoolingConnections)
	}
	if c := r.CoolingConnections[0]; c.RemainingMs != 90_000 || c.RateLimitedUntil != "2026-03-01T10:01:30.000Z" || c.BackoffLevel != 2 {
		t.Errorf("cooling entry %+v", c)
	}
	// The JSON keys are those of GET /api/monitoring/health.
	b, _ := json.Marshal(r)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	for _, k := range []string{"status", "reasons", "time", "version", "uptimeS", "database", "runtime", "demo", "secretKeyId",
		"listenAddr", "counts", "breakers", "windowGate", "coolingConnections", "terminalConnections", "modelLockouts", "requestLog"} {
		if _, ok := m[k]; !ok {
			t.Errorf("report JSON lacks %q", k)
		}
	}
	if _, ok := m["At"]; ok {
		t.Error("report JSON carries the build instant")
	}

	f.Database.OK = false
	f.RequestLog.Dropped = 0
	f.Resilience = resilience.Snapshot{At: now}
	if down := health.Build(f); down.Status != health.StatusDown || down.Reasons[0] != "database_unreachable" || down.Public()["status"] != "down" {
		t.Errorf("database down: %s %v %v", down.Status, down.Reasons, down.Public())
	}
	f.Database.OK = true
	if ok := health.Build(f); ok.Status != health.StatusOK || len(ok.Reasons) != 0 || ok.Public()["status"] != "ok" {
		t.Errorf("healthy: %s %v", ok.Status, ok.Reasons)
	}
}

// Shared mode (issue 19 item 6, amending 40-admin-api §4.1): a database that
// does not answer degrades a replica that has its snapshot (it serves /v1
// from its mirrors, and the public body says "degraded" with 200 so a load
// balancer keeps it) and is down only for one that never loaded it; a
// change-feed listener without its connection degrades the report too.
func TestBuildSharedModeDatabaseOutage(t *testing.T) {
	now := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	f := health.Facts{Now: now, StartedAt: now.Add(-time.Minute), Shared: health.Shared{Mode: health.ModeShared, Redis: health.RedisOff, Limits: health.LimitsPerReplica}, Ready: true,
		Database: health.Database{OK: false},
		Feed:     &health.ChangeFeedFacts{Connected: false, LastResync: now.Add(-3 * time.Second), Reconnects: 2}}
	r := health.Build(f)
	if r.Status != health.StatusDegraded || r.Database.Status != health.StatusDegraded || r.Database.Mode != health.ModeShared ||
		!r.Serving() || r.Public()["status"] != health.StatusDegraded {
		t.Fatalf("shared, snapshot loaded, database down: status %s database %+v public %v", r.Status, r.Database, r.Public())
	}
	if len(r.Reasons) != 1 || r.Reasons[0] != "database_unreachable" {
		t.Errorf("reasons %v, want only database_unreachable (the listener is down because the database is)", r.Reasons)
	}
	if r.ChangeFeed == nil || r.ChangeFeed.Connected || r.ChangeFeed.LastResyncAgeMs != 3000 || r.ChangeFeed.Reconnects != 2 {
		t.Errorf("change feed section %+v", r.ChangeFeed)
	}

	f.Ready = false
	if r := health.Build(f); r.Status != health.StatusDown || r.Serving() || r.Public()["status"] != health.StatusDown {
		t.Errorf("shared, no snapshot, database down: %s %v", r.Status, r.Public())
	}

	f.Ready, f.Database.OK = true, true
	r = health.Build(f)
	if r.Status != health.StatusDegraded || r.Database.Status != health.StatusOK || len(r.Reasons) != 1 ||
		r.Reasons[0] != "change_feed_disconnected" || r.Public()["status"] != health.StatusOK {
		t.Errorf("database up, listener down: %s %v %v", r.Status, r.Reasons, r.Public())
	}
	f.Feed.Connected = true
	if r := health.Build(f); r.Status != health.StatusOK || r.Public()["status"] != health.StatusOK {
		t.Errorf("all up: %s %v", r.Status, r.Reasons)
	}

	// Embedded mode is unchanged: the database down is the replica down.
	emb := health.Build(health.Facts{Now: now, StartedAt: now, Ready: true, Database: health.Database{OK: false}})
	if emb.Status != health.StatusDown || emb.Database.Mode != health.ModeEmbedded || emb.ChangeFeed != nil {
		t.Errorf("embedded, database down: %s %+v", emb.Status, emb.Database)
	}
}
