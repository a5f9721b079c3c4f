package resilience

import (
	"time"

	"switchyard/services"
)

// The read model of the resilience state: what the management API, the
// dashboard, the health report and the metrics show about connections and
// providers. Every one of them renders a ConnectionStatus or a Snapshot, so
// the precedence of a connection's status is decided here, once, and the
// edges only pick words for it.

// Condition is where a connection stands for routing, most severe first:
// terminal > cooling > model_locked > healthy (40-admin-api §3.2). It leaves
// Enabled out: a switched-off connection keeps its condition.
type Condition string

// Connection conditions.
const (
	ConditionTerminal    Condition = "terminal"
	ConditionCooling     Condition = "cooling"
	ConditionModelLocked Condition = "model_locked"
	ConditionHealthy     Condition = "healthy"
)

// SlotUse is a connection's use of its max_concurrent slots: dispatches
// holding a slot and dispatches waiting for one (20-resilience §8).
type SlotUse struct {
	InFlight int
	Waiting  int
}

// ConnectionStatus is one connection's live state as every screen shows it.
type ConnectionStatus struct {
	// Conn is the connection as routing sees it, its State replaced by the
	// engine's live state (the authority for routing; the stored row only
	// when the engine holds nothing for it).
	Conn services.Connection
	// Condition is the routing condition (see Condition).
	Condition Condition
	// Status is the one-word status of 40-admin-api §5 and the metrics:
	// disabled > the terminal status > cooling > active.
	Status string
	// Reason says why the connection is out: its terminal status, else the
	// reason that wrote the running cooldown, else "".
	Reason string
	// Until is the cooldown deadline while the connection is cooling.
	Until *time.Time
	// Backoff is the backoff level; BackoffMax the maxBackoffSteps of the
	// connection's cooldown profile.
	Backoff, BackoffMax int
	// Lockouts are the active model lockouts of the connection, the longest
	// remaining first.
	Lockouts []LockoutStatus
	// Breaker is the provider's circuit breaker.
	Breaker BreakerStatus
	// WindowGate holds the connection back when Blocked (provider_cooldown).
	WindowGate GateHold
	// Quota is gate 10 (a used-up quota window, 30-routing §5), nil when open
	// or unknown.
	Quota *Blocker
	// Slots is the max_concurrent slot use; Queued the requests waiting in
	// the connection's request queue.
	Slots  SlotUse
	Queued int
	// QueueProtected: dispatches go through the request queue (see
	// Document.QueueProtected).
	QueueProtected bool
}

// GateHold is whether the window gate holds a connection back, and for how long.
type GateHold struct {
	Blocked    bool
	RetryAfter time.Duration
}

// Cooling reports a running cooldown (a terminal connection never cools).
func (s ConnectionStatus) Cooling() bool { return s.Condition == ConditionCooling }

// Terminal is the terminal status, "" when none.
func (s ConnectionStatus) Terminal() string { return s.Conn.State.TerminalStatus }

// Snapshot is the whole resilience state at one instant: every connection's
// status in list order (provider in catalogue order, priority, name) and the
// provider-level parts.
type Snapshot struct {
	At          time.Time
	Connections []ConnectionStatus
	// Breakers holds every breaker with state, by provider.
	Breakers []BreakerStatus
	// WindowGate holds the entries that are cooling or hold failures, by key.
	WindowGate []WindowGateStatus
	// Lockouts are every active model lockout, the longest remaining first.
	Lockouts []LockoutStatus
	// Switches of the settings document the screens show beside the state.
	LockoutsEnabled, WindowGateEnabled, SlotsEnabled bool
	byID                                             map[string]int
}

// Connection finds one connection's status by id. A snapshot built as a
// literal (a fake in tests) has no index and is searched in order.
func (s *Snapshot) Connection(id string) (ConnectionStatus, bool) {
	if s.byID == nil {
		for _, c := range s.Connections {
			if c.Conn.ID == id {
				return c, true
			}
		}
		return ConnectionStatus{}, false
	}
	i, ok := s.byID[id]
	if !ok {
		return ConnectionStatus{}, false
	}
	return s.Connections[i], true
}

// Names maps connection ids to names (from memory: no store is read).
func (s *Snapshot) Names() map[string]string {
	out := make(map[string]string, len(s.Connections))
	for _, c := range s.Connections {
		out[c.Conn.ID] = c.Conn.Name
	}
	return out
}

// Counts are the figures of the Runtime page's KPI strip and the incident badge.
type Counts struct {
	// Cooling and Terminal count enabled connections only: a switched-off
	// connection is out of rotation anyway.
	Cooling, Terminal int
	// Locked counts active model lockouts (enforced or not).
	Locked int
	// WindowGate counts the window-gate entries that are cooling.
	WindowGate int
}

// Counts derives the summary figures.
func (s *Snapshot) Counts() Counts {
	var n Counts
	for _, c := range s.Connections {
		if !c.Conn.Enabled {
			continue
		}
		switch c.Condition {
		case ConditionTerminal:
			n.Terminal++
		case ConditionCooling:
			n.Cooling++
		}
	}
	n.Locked = len(s.Lockouts)
	for _, g := range s.WindowGate {
		if g.RetryAfterMs > 0 {
			n.WindowGate++
		}
	}
	return n
}

// TrafficReader reads what the admission mechanisms hold per connection
// (services/traffic: slots and request queues); the engine does not own them.
type TrafficReader interface {
	// SlotUse is the max_concurrent slot use of every connection with slots, by id.
	SlotUse() map[string]SlotUse
	// Queued is the number of requests waiting in each connection's request queue, by id.
	Queued() map[string]int
}

// QuotaReader reads gate 10 of a connection (the gateway's quota gate).
type QuotaReader interface {
	QuotaBlocker(c *services.Connection) *Blocker
}

// StatusSources are the parts of the read model the engine does not own.
type StatusSources struct {
	// Connections lists the connections as routing sees them (the gateway's
	// in-memory snapshot) in list order. Reading it never touches a store.
	Connections func() []services.Connection
	// Traffic and Quota may be nil: no slot use, queue or quota gate is shown.
	Traffic TrafficReader
	Quota   QuotaReader
}

// Monitor composes the read model from the engine and the sources.
type Monitor struct {
	engine *Engine
	src    StatusSources
}

// NewMonitor builds the read model over engine.
func NewMonitor(engine *Engine, src StatusSources) *Monitor {
	return &Monitor{engine: engine, src: src}
}

// Snapshot reads the whole state now, over the connections routing sees.
func (m *Monitor) Snapshot() Snapshot {
	var conns []services.Connection
	if m.src.Connections != nil {
		conns = m.src.Connections()
	}
	return m.SnapshotOf(conns)
}

// SnapshotOf reads the whole state now, over conns (for a screen that
// loaded its connections itself; their order is kept).
func (m *Monitor) SnapshotOf(conns []services.Connection) Snapshot {
	e := m.engine
	now := e.clock.Now()
	s := Snapshot{At: now, Breakers: e.Breakers.All(), WindowGate: e.Gate.Entries(),
		Lockouts: e.Lockouts.List(LockFilter{}), LockoutsEnabled: e.Lockouts.Enabled(),
		WindowGateEnabled: e.Gate.Enabled(), SlotsEnabled: e.document().ConnectionConcurrency.Enabled}
	byConn := map[string][]LockoutStatus{}
	for _, l := range s.Lockouts {
		byConn[l.ConnectionID] = append(byConn[l.ConnectionID], l)
	}
	var slots map[string]SlotUse
	var queued map[string]int
	if m.src.Traffic != nil {
		slots, queued = m.src.Traffic.SlotUse(), m.src.Traffic.Queued()
	}
	s.Connections = make([]ConnectionStatus, len(conns))
	s.byID = make(map[string]int, len(conns))
	breakers := map[string]BreakerStatus{}
	for i, c := range conns {
		b, ok := breakers[c.Provider]
		if !ok {
			b = e.Breakers.Status(c.Provider)
			breakers[c.Provider] = b
		}
		st := m.status(c, byConn[c.ID], b, now)
		st.Slots, st.Queued = slots[c.ID], queued[c.ID]
		s.Connections[i] = st
		s.byID[c.ID] = i
	}
	return s
}

// Connection reads one connection's status now.
func (m *Monitor) Connection(c services.Connection) ConnectionStatus {
	e := m.engine
	now := e.clock.Now()
	st := m.status(c, e.Lockouts.List(LockFilter{ConnectionID: c.ID}), e.Breakers.Status(c.Provider), now)
	if m.src.Traffic != nil {
		st.Slots, st.Queued = m.src.Traffic.SlotUse()[c.ID], m.src.Traffic.Queued()[c.ID]
	}
	return st
}

func (m *Monitor) status(c services.Connection, locks []LockoutStatus, breaker BreakerStatus, now time.Time) ConnectionStatus {
	e := m.engine
	c.State = e.liveState(c)
	st := ConnectionStatus{Conn: c, Status: c.Status(now), Backoff: c.State.BackoffLevel, Lockouts: locks, Breaker: breaker,
		BackoffMax: e.Cooldowns.maxBackoffSteps(c.AuthClass), QueueProtected: e.document().QueueProtected(&c)}
	switch {
	case c.State.TerminalStatus != "":
		st.Condition, st.Reason = ConditionTerminal, c.State.TerminalStatus
	case c.State.RateLimitedUntil != nil && c.State.RateLimitedUntil.After(now):
		st.Condition, st.Reason, st.Until = ConditionCooling, c.State.CooldownReason, c.State.RateLimitedUntil
	case len(locks) > 0:
		st.Condition = ConditionModelLocked
	default:
		st.Condition = ConditionHealthy
	}
	st.WindowGate = e.WindowGateHold(c.Provider, c.ID)
	if m.src.Quota != nil {
		st.Quota = m.src.Quota.QuotaBlocker(&c)
	}
	return st
}

// liveState is a connection's state as the engine holds it in memory. A
// connection the engine holds nothing for shows its stored row; the test
// status always comes from the row (the engine does not own it).
// Breaker is one provider's breaker, refreshed against the clock.
func (e *Engine) Breaker(provider string) BreakerStatus { return e.Breakers.Status(provider) }

// WindowGateHold reports whether the window gate holds back a target of
// provider (pinning connectionID, or "") and for how long.
func (e *Engine) WindowGateHold(provider, connectionID string) GateHold {
	b, blocked := e.Gate.Block(provider, connectionID)
	return GateHold{Blocked: blocked, RetryAfter: b.RetryAfter}
}

func (e *Engine) liveState(c services.Connection) services.ConnectionState {
	st := e.Cooldowns.State(c.ID)
	if !hasState(st) {
		return c.State
	}
	st.TestStatus = c.State.TestStatus
	return st
}

// document is the current settings document (the zero one without a source).
func (e *Engine) document() *Document {
	if e.doc == nil {
		return &Document{}
	}
	return e.doc()
}

// maxBackoffSteps is maxBackoffSteps of a cooldown profile as configured.
func (c *Cooldowns) maxBackoffSteps(p Profile) int {
	if c.cfg == nil {
		return 0
	}
	return c.cfg().Profiles[p].MaxBackoffSteps
}

func hasState(st services.ConnectionState) bool {
	return st.RateLimitedUntil != nil || st.BackoffLevel != 0 || st.TerminalStatus != "" || st.LastError != "" ||
		st.LastErrorStatus != 0 || st.LastErrorReason != "" || st.LastErrorAt != nil || st.AuthFailCount != 0 ||
		st.RejectStreak != 0 || st.LastRejectAt != nil
}

// QueueProtected reports whether a connection's dispatches go through the
// request queue: its own switch (BD 13), else
// requestQueue.autoEnableApiKeyProviders for API-key connections. The
// gateway admits by it and every screen shows it.
func (d *Document) QueueProtected(c *services.Connection) bool {
	if c.RateLimitProtection != nil {
		return *c.RateLimitProtection
	}
	return d.RequestQueue.AutoEnableApiKeyProviders && c.AuthClass == services.AuthAPIKey
}
