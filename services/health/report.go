// Package health owns the admin health report (40-admin-api §4.1): its
// shape, what makes it degraded, and the resilience sections it takes from
// the read model. GET /api/monitoring/health writes it as JSON and the
// dashboard's Health page renders the same value; the app fills in what
// only it can measure (database, process).
package health

import (
	"sort"
	"strconv"
	"time"

	"switchyard/services/gateway"
	"switchyard/services/resilience"
	"switchyard/services/traffic"
)

// Report statuses.
const (
	StatusOK       = "ok"
	StatusDegraded = "degraded"
	StatusDown     = "down"
)

// timeLayout is RFC 3339 in UTC with milliseconds (40-admin-api §1).
const timeLayout = "2006-01-02T15:04:05.000Z"

// Report is the admin body of GET /api/monitoring/health.
type Report struct {
	Status   string         `json:"status"`
	Reasons  []string       `json:"reasons"`
	Time     string         `json:"time"`
	Version  string         `json:"version"`
	UptimeS  int64          `json:"uptimeS"`
	Database Database       `json:"database"`
	Runtime  Runtime        `json:"runtime"`
	Demo     bool           `json:"demo"`
	KeyID    string         `json:"secretKeyId"`
	Listen   string         `json:"listenAddr"`
	Counts   map[string]int `json:"counts"`

	Breakers            []resilience.BreakerStatus    `json:"breakers"`
	WindowGate          []resilience.WindowGateStatus `json:"windowGate"`
	CoolingConnections  []Cooling                     `json:"coolingConnections"`
	TerminalConnections []Terminal                    `json:"terminalConnections"`
	ModelLockouts       ModelLockouts                 `json:"modelLockouts"`
	Leases              Leases                        `json:"leases"`
	Affinity            Affinity                      `json:"affinity"`
	Queues              Queues                        `json:"queues"`
	Slots               Slots                         `json:"slots"`
	LearnedToolLimits   []ToolLimit                   `json:"learnedToolLimits"`
	EmergencyFallback   EmergencyFallback             `json:"emergencyFallback"`
	Waiting             Waiting                       `json:"waiting"`
	RequestLog          RequestLog                    `json:"requestLog"`
	Shared              Shared                        `json:"sharedState"`
	// ChangeFeed is the shared mode's listener (absent in embedded mode).
	ChangeFeed *ChangeFeed `json:"changeFeed,omitempty"`

	// At is when the report was built (Time, unformatted).
	At time.Time `json:"-"`
}

// Database is the database section. Status is ok, down (embedded mode:
// nothing can be served without the SQLite file) or degraded (shared mode:
// PostgreSQL is unreachable and the replica serves /v1 from its mirrors).
type Database struct {
	OK            bool    `json:"ok"`
	Status        string  `json:"status"`
	Mode          string  `json:"mode"` // embedded or shared
	PingMs        float64 `json:"pingMs"`
	SchemaVersion string  `json:"schemaVersion"`
	WalBytes      int64   `json:"walBytes"`
	Path          string  `json:"path"`
}

// Runtime is the process section.
type Runtime struct {
	GoVersion      string `json:"goVersion"`
	Goroutines     int    `json:"goroutines"`
	HeapInuseBytes uint64 `json:"heapInuseBytes"`
}

// Cooling is a connection in a running cooldown.
type Cooling struct {
	ID               string `json:"id"`
	Provider         string `json:"provider"`
	Name             string `json:"name"`
	RateLimitedUntil string `json:"rateLimitedUntil"`
	RemainingMs      int64  `json:"remainingMs"`
	BackoffLevel     int    `json:"backoffLevel"`
	LastErrorReason  string `json:"lastErrorReason"`
}

// Terminal is a connection in a terminal state.
type Terminal struct {
	ID             string `json:"id"`
	Provider       string `json:"provider"`
	Name           string `json:"name"`
	TerminalStatus string `json:"terminalStatus"`
	TerminalAt     string `json:"terminalAt,omitempty"`
}

// ModelLockouts counts the active model lockouts.
type ModelLockouts struct {
	Active int `json:"active"`
}

// ChangeFeed is the state of a shared-mode replica's change-feed listener
// (LISTEN/NOTIFY): whether it holds its connection, and when it last reloaded
// every cache from the database (after each reconnect, and when the version
// poll saw a gap).
type ChangeFeed struct {
	Connected       bool   `json:"connected"`
	LastResyncAt    string `json:"lastResyncAt,omitempty"`
	LastResyncAgeMs int64  `json:"lastResyncAgeMs"`
	Reconnects      int64  `json:"reconnects"`
}

// Leases counts the active exclusive leases.
type Leases struct {
	Active int `json:"active"`
}

// Affinity counts the session-affinity pins.
type Affinity struct {
	Pins int `json:"pins"`
}

// Queues sums the request queues: requests waiting and running.
type Queues struct {
	Queued  int `json:"queued"`
	Running int `json:"running"`
}

// Slots sums the max_concurrent slots: dispatches holding one, waiting for
// one, and sent without one since start (fail-open, either cause).
type Slots struct {
	InFlight       int   `json:"inFlight"`
	Waiting        int   `json:"waiting"`
	FailOpenGrants int64 `json:"failOpenGrants"`
}

// ToolLimit is a learned maximum tool count (20-resilience §13.2).
type ToolLimit struct {
	Provider  string `json:"provider"`
	Model     string `json:"model"`
	MaxTools  int    `json:"maxTools"`
	Source    string `json:"source"`
	ExpiresAt string `json:"expiresAt"`
}

// EmergencyFallback is the emergency fallback's switch, target and whether
// the target still resolves (an enabled one that does not makes the report
// degraded).
type EmergencyFallback struct {
	Enabled  bool   `json:"enabled"`
	Target   string `json:"target"`
	Resolves bool   `json:"resolves"`
}

// Waiting counts the requests waiting inside the gateway now, by reason
// (cooldown, slot, queue; every reason present) and by "reason target".
type Waiting struct {
	Total    int            `json:"total"`
	ByReason map[string]int `json:"byReason"`
	ByTarget map[string]int `json:"byTarget"`
}

// RequestLog is the request-log writer's queue.
type RequestLog struct {
	QueueDepth int64 `json:"queueDepth"`
	Dropped    int64 `json:"dropped"`
}

// Shared says how this replica shares its state with a fleet.
type Shared struct {
	// Mode is "embedded" (SQLite, one process) or "shared" (PostgreSQL).
	Mode string `json:"mode"`
	// Replica names this process in a shared deployment.
	Replica string `json:"replica,omitempty"`
	// Redis is "off" (not configured), "up" or "degraded" (unreachable: the
	// limits below hold per replica until it answers).
	Redis string `json:"redis"`
	// Limits is where max_concurrent slots, per-key limits, the request queue
	// and the window gate are counted: "fleet" or "per_replica".
	Limits string `json:"limits"`
	// Reserves is what this replica holds of the fleet's limits beyond its
	// running requests, so that limits with room admit without a round
	// trip (only with Redis).
	Reserves *Reserves `json:"reserves,omitempty"`
}

// Reserves counts a replica's reserves: idle grants (slots, key
// concurrency, queue runs) kept for its next requests, and unspent tokens
// of the token blocks it took from rate buckets.
type Reserves struct {
	SpareGrants int `json:"spareGrants"`
	BlockTokens int `json:"blockTokens"`
}

// Shared-state values.
const (
	ModeEmbedded     = "embedded"
	ModeShared       = "shared"
	RedisOff         = "off"
	RedisUp          = "up"
	RedisDegraded    = "degraded"
	LimitsFleet      = "fleet"
	LimitsPerReplica = "per_replica"
)

// Facts are what the app measured for one report.
type Facts struct {
	Now, StartedAt time.Time
	Version, KeyID string
	Listen         string
	Demo           bool
	Database       Database
	Runtime        Runtime
	RequestLog     RequestLog
	// Ready: this replica has loaded its snapshot of the configuration
	// since it started, so in shared mode (Shared.Mode) it can serve /v1
	// from memory while the database is away.
	Ready bool
	// Feed is the change-feed listener (shared mode only).
	Feed *ChangeFeedFacts
	// Resilience is the read model; its connections are the in-memory
	// ones, so the report lists them even while the database is down.
	Resilience resilience.Snapshot
	// Shared is the replica's shared-state mode (zero: embedded, no Redis).
	Shared Shared
	// ActiveLeases and Pins count the exclusive leases and affinity pins.
	ActiveLeases, Pins int
	// Queues and Slots are the admission mechanisms' totals.
	Queues traffic.QueueTotals
	Slots  traffic.SlotTotals
	// ToolLimits are the learned tool limits in memory.
	ToolLimits []gateway.ToolLimit
	// Emergency is the emergencyFallback section; EmergencyResolves whether
	// its target resolves now.
	Emergency         resilience.EmergencyFallbackSettings
	EmergencyResolves bool
	// Waiting counts the requests waiting now (zero: none).
	Waiting traffic.WaitCounts
}

// ChangeFeedFacts is what the listener reports.
type ChangeFeedFacts struct {
	Connected  bool
	LastResync time.Time // zero: never
	Reconnects int64
}

// Build assembles the report: down when the database does not answer and
// the replica cannot serve without it (embedded mode, or a shared replica
// that never loaded its snapshot), degraded with its reasons (a shared
// database unreachable while the mirrors serve, a change-feed listener
// without its connection, an open or half-open breaker, an enabled terminal
// connection, an emergency fallback whose target does not resolve,
// request-log drops), else ok.
func Build(f Facts) Report {
	r := Report{Status: StatusOK, Reasons: []string{}, Time: f.Now.UTC().Format(timeLayout), At: f.Now, Version: f.Version,
		UptimeS: int64(f.Now.Sub(f.StartedAt).Seconds()), Demo: f.Demo, KeyID: f.KeyID, Listen: f.Listen,
		Database: f.Database, Runtime: f.Runtime, Counts: map[string]int{}, RequestLog: f.RequestLog,
		CoolingConnections: []Cooling{}, TerminalConnections: []Terminal{}, LearnedToolLimits: []ToolLimit{},
		Leases: Leases{Active: f.ActiveLeases}, Affinity: Affinity{Pins: f.Pins},
		Queues: Queues{Queued: f.Queues.Queued, Running: f.Queues.Running},
		Slots: Slots{InFlight: f.Slots.InFlight, Waiting: f.Slots.Waiting,
			FailOpenGrants: f.Slots.FailOpenGrants.QueueFull + f.Slots.FailOpenGrants.Timeout},
		EmergencyFallback: EmergencyFallback{Enabled: f.Emergency.Enabled, Target: f.Emergency.Target, Resolves: f.EmergencyResolves},
		Waiting:           Waiting{Total: f.Waiting.Total, ByReason: f.Waiting.ByReason, ByTarget: f.Waiting.ByTarget},
		Shared:            f.Shared}
	if r.Waiting.ByReason == nil {
		r.Waiting.ByReason = map[string]int{}
		for _, reason := range traffic.WaitReasons {
			r.Waiting.ByReason[reason] = 0
		}
	}
	if r.Waiting.ByTarget == nil {
		r.Waiting.ByTarget = map[string]int{}
	}
	if r.Shared.Mode == "" {
		r.Shared = Shared{Mode: ModeEmbedded, Redis: RedisOff, Limits: LimitsPerReplica}
	}
	shared := r.Shared.Mode == ModeShared
	r.Database.Mode, r.Database.Status = r.Shared.Mode, StatusOK
	for _, l := range f.ToolLimits {
		r.LearnedToolLimits = append(r.LearnedToolLimits, ToolLimit{Provider: l.Provider, Model: l.Model, MaxTools: l.MaxTools,
			Source: l.Source, ExpiresAt: l.ExpiresAt.UTC().Format(timeLayout)})
	}
	sort.Slice(r.LearnedToolLimits, func(i, j int) bool {
		a, b := r.LearnedToolLimits[i], r.LearnedToolLimits[j]
		return a.Provider+"/"+a.Model < b.Provider+"/"+b.Model
	})
	if !f.Database.OK {
		r.Database.Status = StatusDown
		if shared && f.Ready {
			r.Database.Status = StatusDegraded
		} else {
			r.Status = StatusDown
		}
		r.Reasons = append(r.Reasons, "database_unreachable")
	}
	if fd := f.Feed; fd != nil {
		cf := &ChangeFeed{Connected: fd.Connected, Reconnects: fd.Reconnects, LastResyncAgeMs: -1}
		if !fd.LastResync.IsZero() {
			cf.LastResyncAt = fd.LastResync.UTC().Format(timeLayout)
			cf.LastResyncAgeMs = f.Now.Sub(fd.LastResync).Milliseconds()
		}
		r.ChangeFeed = cf
		if !fd.Connected && f.Database.OK {
			r.Reasons = append(r.Reasons, "change_feed_disconnected")
		}
	}
	snap := f.Resilience
	r.Breakers, r.WindowGate = snap.Breakers, snap.WindowGate
	r.ModelLockouts.Active = len(snap.Lockouts)
	for _, b := range r.Breakers {
		if b.State == resilience.BreakerOpen || b.State == resilience.BreakerHalfOpen {
			r.Reasons = append(r.Reasons, "breaker_open:"+b.Provider)
		}
	}
	r.Counts["connections"] = len(snap.Connections)
	terminal := 0
	for _, cs := range snap.Connections {
		c, st := cs.Conn, cs.Conn.State
		switch cs.Condition {
		case resilience.ConditionTerminal:
			if c.Enabled {
				terminal++
			}
			t := Terminal{ID: c.ID, Provider: c.Provider, Name: c.Name, TerminalStatus: st.TerminalStatus}
			if st.TerminalAt != nil {
				t.TerminalAt = st.TerminalAt.UTC().Format(timeLayout)
			}
			r.TerminalConnections = append(r.TerminalConnections, t)
		case resilience.ConditionCooling:
			r.CoolingConnections = append(r.CoolingConnections, Cooling{ID: c.ID, Provider: c.Provider, Name: c.Name,
				RateLimitedUntil: cs.Until.UTC().Format(timeLayout), RemainingMs: cs.Until.Sub(f.Now).Milliseconds(),
				BackoffLevel: st.BackoffLevel, LastErrorReason: st.LastErrorReason})
		}
	}
	if terminal > 0 {
		r.Reasons = append(r.Reasons, "terminal_connections:"+strconv.Itoa(terminal))
	}
	if f.Emergency.Active() && !f.EmergencyResolves {
		r.Reasons = append(r.Reasons, "emergency_fallback_unresolved")
	}
	if f.RequestLog.Dropped > 0 {
		r.Reasons = append(r.Reasons, "request_log_drops")
	}
	if r.Shared.Redis == RedisDegraded {
		r.Reasons = append(r.Reasons, "redis_degraded")
	}
	if r.Status == StatusOK && len(r.Reasons) > 0 {
		r.Status = StatusDegraded
	}
	return r
}

// Public is the body anyone may read: {"status": "ok"}, {"status":
// "down"}, or in shared mode {"status": "degraded"} while the database is
// unreachable and the replica serves from its mirrors (the amendment of
// 40-admin-api §4.1 for several replicas: a load balancer polling it keeps
// every replica in rotation through a database outage). Nothing else is
// revealed: other reasons for a degraded report stay "ok" here.
func (r Report) Public() map[string]string {
	switch {
	case r.Status == StatusDown:
		return map[string]string{"status": StatusDown}
	case r.Database.Status == StatusDegraded:
		return map[string]string{"status": StatusDegraded}
	}
	return map[string]string{"status": StatusOK}
}

// Serving reports whether the replica can answer /v1 now (the readiness of
// a load balancer): everything but down.
func (r Report) Serving() bool { return r.Status != StatusDown }
