package views

import (
	"cmp"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"switchyard/services"
	"switchyard/services/events"
	"switchyard/services/human"
	"switchyard/services/leases"
	"switchyard/services/resilience"
	"switchyard/services/traffic"
)

// View models of the Runtime and Health pages, the incident badge and the
// live cells of the Connections page (50-dashboard §2, §6.4, §6.8, §6.12).

// CountdownVM is a deadline shown as "1 m 24 s" in <time data-remaining-ms>;
// app.js ticks it down between polls (50-dashboard §4).
type CountdownVM struct {
	Ms  int64  // remaining milliseconds when rendered
	ISO string // the deadline, RFC 3339
}

// NewCountdownVM is the time left until until at now; nil once it passed.
func NewCountdownVM(until, now time.Time) *CountdownVM {
	if until.IsZero() || !until.After(now) {
		return nil
	}
	return &CountdownVM{Ms: until.Sub(now).Milliseconds(), ISO: RFC3339(until)}
}

// countdownAfter is a countdown of ms from now (a remaining time without a stored deadline).
func countdownAfter(ms int64, now time.Time) *CountdownVM {
	if ms <= 0 {
		return nil
	}
	return NewCountdownVM(now.Add(time.Duration(ms)*time.Millisecond), now)
}

// BadgeVM is a status badge: modifier class, text and icon.
type BadgeVM struct {
	Class string
	Text  string
	Icon  string
}

// NewBreakerBadge shows a breaker state with text and icon (never colour alone).
func NewBreakerBadge(s resilience.BreakerState) BadgeVM {
	switch s {
	case resilience.BreakerOpen:
		return BadgeVM{"open", "open", "ban"}
	case resilience.BreakerHalfOpen:
		return BadgeVM{"half-open", "half-open", "clock"}
	case resilience.BreakerDegraded:
		return BadgeVM{"degraded", "degraded", "alert"}
	}
	return BadgeVM{"closed", "closed", "check"}
}

// reasonText turns a reason code into words ("rate_limit" → "rate limit").
func reasonText(r string) string { return strings.ReplaceAll(r, "_", " ") }

// shortText cuts s to at most 120 characters (the full text goes in a disclosure).
func shortText(s string) (short, full string) {
	if utf8.RuneCountInString(s) > 120 {
		return string([]rune(s)[:119]) + "…", s
	}
	return s, ""
}

// errorHead is "429 rate_limit_exceeded": the status and the upstream code (or reason).
func errorHead(st services.ConnectionState) string {
	var head []string
	if st.LastErrorStatus != 0 {
		head = append(head, strconv.Itoa(st.LastErrorStatus))
	}
	code := st.ErrorCode
	if code == "" {
		code = st.LastErrorReason
	}
	if code != "" {
		head = append(head, code)
	}
	return strings.Join(head, " ")
}

// sig is a short stable digest of the parts a live cell shows.
func sig(parts ...any) string {
	h := fnv.New64a()
	for _, p := range parts {
		fmt.Fprintf(h, "%v\x1f", p)
	}
	return strconv.FormatUint(h.Sum64(), 36)
}

// ---------------------------------------------------------------------------
// Runtime page.

// RuntimePageVM is the whole Runtime page.
type RuntimePageVM struct {
	Summary   RuntimeSummaryVM
	Affinity  AffinityLineVM
	Breakers  BreakersPanelVM
	Cooldowns CooldownsPanelVM
	Models    ModelCooldownsVM
	Leases    LeasesPanelVM
	Queues    QueuesPanelVM
	Waiting   WaitingPanelVM
	Events    EventsPanelVM
}

// RuntimeSummaryVM is the KPI strip: the resilience counts of the Overview.
type RuntimeSummaryVM struct {
	OpenBreakers int
	Cooling      int
	Terminal     int
	Locked       int
	WindowGate   int
}

// BreakersPanelVM is the provider breakers panel with the window gate.
type BreakersPanelVM struct {
	Rows        []BreakerRowVM
	Gate        []WindowGateRowVM
	GateEnabled bool
	Confirm     *ConfirmVM // "Reset all breakers?" opened directly (full page)
}

// BreakerRowVM is one provider breaker.
type BreakerRowVM struct {
	Provider    string // canonical id
	Name        string // catalogue name
	Badge       BadgeVM
	Failures    int
	Threshold   int
	Degradation int
	OpenCycles  int
	LastReason  string
	LastAt      *TimeVM
	RetryIn     *CountdownVM
	Probing     bool // half-open: probe requests decide
}

// NewBreakersPanelVM lists breakers that hold state and the window gate's
// live entries. names maps provider ids to display names, conns connection
// ids to names.
func NewBreakersPanelVM(all []resilience.BreakerStatus, gate []resilience.WindowGateStatus, gateEnabled bool,
	names, conns map[string]string, now time.Time) BreakersPanelVM {
	vm := BreakersPanelVM{GateEnabled: gateEnabled}
	for _, b := range all {
		vm.Rows = append(vm.Rows, NewBreakerRowVM(b, names[b.Provider], now))
	}
	for _, g := range gate {
		r := WindowGateRowVM{Key: g.Key, Provider: g.Provider, ProviderName: orID(names[g.Provider], g.Provider),
			ConnectionID: g.ConnectionID, Failures: g.FailuresInWindow, RetryIn: countdownAfter(g.RetryAfterMs, now)}
		if g.ConnectionID != "" {
			r.Connection = orID(conns[g.ConnectionID], g.ConnectionID)
		}
		vm.Gate = append(vm.Gate, r)
	}
	return vm
}

// NewBreakerRowVM describes one breaker status at now.
func NewBreakerRowVM(b resilience.BreakerStatus, name string, now time.Time) BreakerRowVM {
	r := BreakerRowVM{Provider: b.Provider, Name: orID(name, b.Provider), Badge: NewBreakerBadge(b.State),
		Failures: b.FailureCount, Threshold: b.FailureThreshold, Degradation: b.DegradationThreshold,
		OpenCycles: b.OpenCycleCount, LastReason: reasonText(b.LastFailureReason), LastAt: NewTimeVM(b.LastFailureAt, now),
		Probing: b.State == resilience.BreakerHalfOpen}
	if b.State == resilience.BreakerOpen {
		r.RetryIn = countdownAfter(b.RetryAfterMs, now)
	}
	return r
}

// Empty reports nothing to show: every breaker closed and clean, no gate entry.
func (vm BreakersPanelVM) Empty() bool { return len(vm.Rows) == 0 }

// WindowGateRowVM is one provider (or pinned connection) the window gate holds back.
type WindowGateRowVM struct {
	Key          string
	Provider     string
	ProviderName string
	ConnectionID string
	Connection   string // name, "" for a provider-level entry
	Failures     int
	RetryIn      *CountdownVM
}

// CooldownsPanelVM is the connection cooldowns panel: cooling connections and,
// apart, terminal ones.
type CooldownsPanelVM struct {
	Cooling  []CoolingRowVM
	Terminal []TerminalRowVM
	Confirm  *ConfirmVM
}

// Empty reports no cooling and no terminal connection.
func (vm CooldownsPanelVM) Empty() bool { return len(vm.Cooling) == 0 && len(vm.Terminal) == 0 }

// CoolingRowVM is one cooling connection.
type CoolingRowVM struct {
	ID         string
	Name       string
	Provider   string // display name
	Enabled    bool
	Reason     string
	Backoff    int
	BackoffMax int
	Until      CountdownVM
	ErrorHead  string
	ErrorShort string
	ErrorFull  string
}

// TerminalRowVM is one terminal connection (banned, expired, credits exhausted).
type TerminalRowVM struct {
	ID         string
	Name       string
	Provider   string
	Enabled    bool
	Status     string // "credits exhausted"
	Since      *TimeVM
	ErrorHead  string
	ErrorShort string
	ErrorFull  string
}

// CooldownConn is one connection with its live state, as the panel needs it.
type CooldownConn struct {
	Conn       services.Connection
	State      services.ConnectionState // live (engine) state
	Provider   string                   // display name
	BackoffMax int
}

// NewCooldownsPanelVM sorts connections into cooling and terminal at now.
func NewCooldownsPanelVM(conns []CooldownConn, now time.Time) CooldownsPanelVM {
	var vm CooldownsPanelVM
	for _, cc := range conns {
		st, c := cc.State, cc.Conn
		short, full := shortText(st.LastError)
		switch {
		case st.TerminalStatus != "":
			vm.Terminal = append(vm.Terminal, TerminalRowVM{ID: c.ID, Name: c.Name, Provider: cc.Provider, Enabled: c.Enabled,
				Status: reasonText(st.TerminalStatus), Since: NewTimeVM(st.TerminalAt, now),
				ErrorHead: errorHead(st), ErrorShort: short, ErrorFull: full})
		case st.RateLimitedUntil != nil && st.RateLimitedUntil.After(now):
			vm.Cooling = append(vm.Cooling, CoolingRowVM{ID: c.ID, Name: c.Name, Provider: cc.Provider, Enabled: c.Enabled,
				Reason: reasonText(cmp.Or(st.CooldownReason, st.LastErrorReason)), Backoff: st.BackoffLevel, BackoffMax: cc.BackoffMax,
				Until: *NewCountdownVM(*st.RateLimitedUntil, now), ErrorHead: errorHead(st), ErrorShort: short, ErrorFull: full})
		}
	}
	return vm
}

// ModelCooldownsVM is the Model Cooldowns card (active model lockouts).
type ModelCooldownsVM struct {
	Enabled bool // modelLockout.enabled: off → entries are listed but not enforced
	Rows    []LockoutRowVM
	Confirm *ConfirmVM
}

// LockoutRowVM is one model lockout.
type LockoutRowVM struct {
	RowID        string
	Provider     string
	ProviderName string
	ConnectionID string
	Connection   string
	Model        string
	Shape        string
	Reason       string
	LastStatus   int
	Failures     int
	LockedAt     *TimeVM
	Expires      *CountdownVM
	Enforced     bool
	Vals         string // hx-vals of Re-enable: {"provider", "connectionId", "model"}
}

// LockoutRowID is the row id and test id of a lockout row.
func LockoutRowID(connectionID string, shape resilience.LockShape, lockKey string) string {
	return RowID(RowLockout, connectionID+"-"+string(shape)+"-"+lockKey)
}

// NewModelCooldownsVM lists active lockouts (longest remaining first, as the
// engine sorts them). names maps providers, conns connections to display names.
func NewModelCooldownsVM(enabled bool, locks []resilience.LockoutStatus, names, conns map[string]string, now time.Time) ModelCooldownsVM {
	vm := ModelCooldownsVM{Enabled: enabled}
	for _, l := range locks {
		vm.Rows = append(vm.Rows, LockoutRowVM{RowID: LockoutRowID(l.ConnectionID, l.Shape, l.LockKey),
			Provider: l.Provider, ProviderName: orID(names[l.Provider], l.Provider), ConnectionID: l.ConnectionID,
			Connection: orID(conns[l.ConnectionID], l.ConnectionID), Model: l.Model, Shape: string(l.Shape),
			Reason: reasonText(string(l.Reason)), LastStatus: l.LastStatus, Failures: l.FailureCount,
			LockedAt: NewTimeVM(&l.LockedAt, now), Expires: NewCountdownVM(l.Until, now), Enforced: l.Enforced,
			Vals: reEnableVals(l.Provider, l.ConnectionID, l.Model)})
	}
	return vm
}

// reEnableVals is the hx-vals of a Re-enable button.
func reEnableVals(provider, connectionID, model string) string {
	b, _ := json.Marshal(map[string]string{"provider": provider, "connectionId": connectionID, "model": model})
	return string(b)
}

func orID(name, id string) string {
	if name == "" {
		return id
	}
	return name
}

// LeasesPanelVM is the active exclusive leases panel.
type LeasesPanelVM struct {
	Rows    []LeaseRowVM
	Confirm *ConfirmVM // "End this lease?" opened directly (full page)
}

// LeaseRowVM is one active lease. It never carries the owner token or its
// hash: the key, the connection and the generation name a lease.
type LeaseRowVM struct {
	ID           string
	KeyID        string
	KeyName      string // "" when the key is gone
	KeyPrefix    string // "sk-sy-Ab12Cd…", "" when the key is gone
	Provider     string
	ProviderName string
	ConnectionID string
	Connection   string
	Generation   int64
	State        string
	Acquired     *TimeVM
	Renewed      *TimeVM
	Expires      *CountdownVM
}

// KeyLabel names the lease's key: its name, else its id.
func (r LeaseRowVM) KeyLabel() string { return orID(r.KeyName, r.KeyID) }

// NewLeasesPanelVM lists active leases (by connection id, as the service
// sorts them). keys maps key ids to keys, names provider ids and conns
// connection ids to display names. Only the fields shown are copied.
func NewLeasesPanelVM(active []leases.Lease, keys map[string]services.APIKey, names, conns map[string]string, now time.Time) LeasesPanelVM {
	var vm LeasesPanelVM
	for _, l := range active {
		vm.Rows = append(vm.Rows, NewLeaseRowVM(l, keys[l.KeyID], names[l.Provider], conns[l.ConnectionID], now))
	}
	return vm
}

// NewLeaseRowVM describes one lease at now; key is the zero key when it is gone.
func NewLeaseRowVM(l leases.Lease, key services.APIKey, providerName, connName string, now time.Time) LeaseRowVM {
	r := LeaseRowVM{ID: l.ID, KeyID: l.KeyID, KeyName: key.Name, Provider: l.Provider,
		ProviderName: orID(providerName, l.Provider), ConnectionID: l.ConnectionID, Connection: orID(connName, l.ConnectionID),
		Generation: l.Generation, State: string(l.State), Acquired: NewTimeVM(&l.AcquiredAt, now),
		Renewed: NewTimeVM(&l.RenewedAt, now), Expires: NewCountdownVM(l.ExpiresAt, now)}
	if key.Prefix != "" {
		r.KeyPrefix = key.Prefix + "…"
	}
	if l.RenewedAt.Equal(l.AcquiredAt) {
		r.Renewed = nil
	}
	return r
}

// LeaseConfirm is the confirmation of End lease, shown above the leases panel.
func LeaseConfirm(r LeaseRowVM) *ConfirmVM {
	return &ConfirmVM{RowKind: RowLease, ID: r.ID, Action: "End lease", Method: "post",
		Title: "End the lease of " + r.KeyLabel() + " on " + r.Connection + "?",
		Lines: []string{
			"The client's next request with this generation will be rejected as stale.",
			"Connection " + r.Connection + " returns to shared traffic at once; the client has to acquire a new lease to go on.",
		},
		URL: "/runtime/leases/" + r.ID + "/end", Target: "#" + LeasesPanelID, Cancel: "/runtime"}
}

// QueuesPanelVM is the read-only queues and slots panel: the request queue
// of every protected connection and the slot gate of every connection with
// max_concurrent.
type QueuesPanelVM struct {
	Queues   []QueueRowVM
	Slots    []SlotRowVM
	SlotsOff bool // connectionConcurrency.enabled is off: limits are not enforced
}

// Empty reports no protected connection and no concurrency limit.
func (vm QueuesPanelVM) Empty() bool { return len(vm.Queues) == 0 && len(vm.Slots) == 0 }

// QueueRowVM is the request queue of one limiter key of a protected connection.
type QueueRowVM struct {
	RowID        string
	ConnectionID string
	Connection   string
	Provider     string // display name
	Model        string // per-model limiter keys only
	Enabled      bool
	Queued       int
	Running      int
	RPM          int
	RPMLearned   bool // the upstream's learned limit is below the configured rate
	IntervalMs   int64
	IntLearned   bool // the learned spacing is wider than the configured one
	Concurrent   int
	MaxQueue     int   // 0 = unbounded
	QueueWaitMs  int64 // 0 = no bound
	ExecTimeout  int64 // maxWaitMs
	Throttled    *CountdownVM
	QueueFull    int64
	QueueTimeout int64
	ExecTimeouts int64
}

// SlotRowVM is the slot gate of one connection with max_concurrent.
type SlotRowVM struct {
	ConnectionID      string
	Connection        string
	Provider          string
	Enabled           bool
	InFlight          int
	Limit             int
	Waiting           int
	FailOpenQueueFull int64
	FailOpenTimeout   int64
}

// FailOpen is every dispatch sent without a slot.
func (r SlotRowVM) FailOpen() int64 { return r.FailOpenQueueFull + r.FailOpenTimeout }

// QueueConn is one protected connection with its limiter keys' stats (none
// before its first request) and its effective settings.
type QueueConn struct {
	Conn      services.Connection
	Provider  string // display name
	Stats     []traffic.QueueStats
	Effective traffic.QueueConfig
}

// SlotConn is one connection with max_concurrent and its slot gate's stats
// (nil before its first request).
type SlotConn struct {
	Conn     services.Connection
	Provider string
	Stats    *traffic.SlotStats
}

// NewQueuesPanelVM builds the panel at now; slotsOn is connectionConcurrency.enabled.
func NewQueuesPanelVM(queues []QueueConn, slots []SlotConn, slotsOn bool, now time.Time) QueuesPanelVM {
	vm := QueuesPanelVM{SlotsOff: !slotsOn && len(slots) > 0}
	for _, q := range queues {
		if len(q.Stats) == 0 {
			vm.Queues = append(vm.Queues, newQueueRowVM(q, traffic.QueueStats{Key: traffic.QueueKey(q.Conn.Provider, q.Conn.ID, ""),
				Provider: q.Conn.Provider, ConnectionID: q.Conn.ID, Config: q.Effective}, now))
		}
		for _, st := range q.Stats {
			vm.Queues = append(vm.Queues, newQueueRowVM(q, st, now))
		}
	}
	for _, s := range slots {
		r := SlotRowVM{ConnectionID: s.Conn.ID, Connection: s.Conn.Name, Provider: s.Provider, Enabled: s.Conn.Enabled}
		if s.Conn.MaxConcurrent != nil {
			r.Limit = *s.Conn.MaxConcurrent
		}
		if st := s.Stats; st != nil {
			r.InFlight, r.Waiting = st.InFlight, st.Waiting
			r.FailOpenQueueFull, r.FailOpenTimeout = st.FailOpenGrants.QueueFull, st.FailOpenGrants.Timeout
		}
		vm.Slots = append(vm.Slots, r)
	}
	return vm
}

// QueueRowID is the row id and test id of a connection's request queue
// (with the model on per-model limiter keys).
func QueueRowID(connectionID, model string) string {
	if model == "" {
		return RowID(RowQueue, connectionID)
	}
	return RowID(RowQueue, connectionID+"-"+model)
}

func newQueueRowVM(q QueueConn, st traffic.QueueStats, now time.Time) QueueRowVM {
	cfg := st.Config
	r := QueueRowVM{RowID: QueueRowID(q.Conn.ID, st.Model), ConnectionID: q.Conn.ID, Connection: q.Conn.Name, Provider: q.Provider,
		Model: st.Model, Enabled: q.Conn.Enabled, Queued: st.Queued, Running: st.Running, RPM: cfg.RequestsPerMinute,
		IntervalMs: cfg.MinTimeBetweenRequestsMs, Concurrent: cfg.ConcurrentRequests, MaxQueue: cfg.MaxQueueDepth,
		QueueWaitMs: cfg.QueueWaitMs, ExecTimeout: cfg.MaxWaitMs, QueueFull: st.Rejections.QueueFull,
		QueueTimeout: st.Rejections.QueueTimeout, ExecTimeouts: st.Rejections.ExecutionTimeout}
	if l := st.Learned; l != nil {
		if l.LimitRequests > 0 && l.LimitRequests < r.RPM {
			r.RPM, r.RPMLearned = l.LimitRequests, true
		}
		if l.MinTimeMs > r.IntervalMs {
			r.IntervalMs, r.IntLearned = l.MinTimeMs, true
		}
		if l.Throttled {
			r.Throttled = NewCountdownVM(l.ResetAt, now)
		}
	}
	return r
}

// ConcurrencyText is a connection's slots in use against its limit ("1 / 2").
func ConcurrencyText(inFlight, limit int) string {
	return strconv.Itoa(inFlight) + " / " + strconv.Itoa(limit)
}

// AffinityLineVM is the Session affinity line of the KPI strip: the live
// session pins, with Clear all pins while there are any.
type AffinityLineVM struct {
	On      bool // sessionAffinity.ttlMs > 0
	Pins    int
	Confirm *ConfirmVM // "Clear all session pins?" opened directly (full page)
}

// Text is "3 active pins", or why there are none.
func (vm AffinityLineVM) Text() string {
	if !vm.On {
		return "off (sessionAffinity.ttlMs is 0), so no session is pinned"
	}
	return human.Plural(vm.Pins, "active pin", "active pins")
}

// AffinityConfirm is the confirmation of Clear all pins.
func AffinityConfirm(pins int) *ConfirmVM {
	return RuntimeConfirm(AffinityLineID, "Clear all session pins?", "Clear all pins", "/runtime/affinity/clear", AffinityLineID,
		human.Plural(pins, "active pin is", "active pins are")+" dropped. Each session's next request is routed afresh and pinned to the connection that answers it.")
}

// EventsPanelVM is the Recent events panel: the last resilience events of
// this replica, newest first.
type EventsPanelVM struct {
	Rows []EventRowVM
	// PerReplica: replicas share state, and the list is this replica's own.
	PerReplica bool
}

// EventRowVM is one event as the panel shows it.
type EventRowVM struct {
	At      *TimeVM
	Event   string // "Cooldown set"
	Icon    string
	Subject string
	Cause   string
}

// EventNames are the display names an event's subject is shown with.
type EventNames struct {
	Providers   map[string]string // provider id → name
	Connections map[string]string // connection id → name
	ProviderOf  map[string]string // connection id → provider id, for events that name only the connection
}

// eventKinds are the words and icon of each event type.
var eventKinds = map[events.Type]struct{ text, icon string }{
	events.BreakerOpened:           {"Breaker opened", "ban"},
	events.BreakerHalfOpen:         {"Breaker half-open", "clock"},
	events.BreakerClosed:           {"Breaker closed", "check"},
	events.CooldownSet:             {"Cooldown set", "clock"},
	events.CooldownCleared:         {"Cooldown cleared", "check"},
	events.LockoutSet:              {"Lockout set", "lock"},
	events.LockoutCleared:          {"Lockout cleared", "check"},
	events.TerminalSet:             {"Terminal state set", "ban"},
	events.TerminalReset:           {"Terminal state reset", "check"},
	events.LeaseEnded:              {"Lease ended", "lock"},
	events.LeaseMoved:              {"Lease moved", "lock"},
	events.EmergencyFallback:       {"Emergency fallback used", "alert"},
	events.EmergencyFallbackFailed: {"Emergency fallback failed", "ban"},
}

// eventCauses are the words of the causes that are not a failure reason.
var eventCauses = map[string]string{
	events.CauseAdmin:           "admin",
	events.CauseSuccess:         "request succeeded",
	events.CauseResetTimeout:    "retry time reached",
	events.CauseProbeSucceeded:  "probe succeeded",
	events.CauseProbeFailed:     "probe failed",
	events.CauseFailuresDecayed: "failures decayed",
	events.CauseEgressLock:      "egress lock",
}

// NewEventsPanelVM describes list (newest first) at now.
func NewEventsPanelVM(list []events.Event, names EventNames, perReplica bool, now time.Time) EventsPanelVM {
	vm := EventsPanelVM{PerReplica: perReplica, Rows: make([]EventRowVM, 0, len(list))}
	for _, e := range list {
		if e.Provider == "" {
			e.Provider = names.ProviderOf[e.ConnectionID]
		}
		kind, ok := eventKinds[e.Type]
		if !ok {
			kind.text, kind.icon = reasonText(string(e.Type)), "info"
		}
		vm.Rows = append(vm.Rows, EventRowVM{At: NewTimeVM(&e.At, now), Event: kind.text, Icon: kind.icon,
			Subject: e.Subject(names.Providers[e.Provider], names.Connections[e.ConnectionID]), Cause: EventCause(e)})
	}
	return vm
}

// EventCause is an event's cause in words: "admin", "rate limit (429)",
// and who acted when an admin's request caused it ("admin · key agent-a
// sk-sy-Ab12", "connection ineligible · admin session 3f2a9c1b04de").
func EventCause(e events.Event) string {
	t := eventCause(e)
	switch {
	case e.Actor == "":
		return t
	case e.Cause == events.CauseAdmin:
		return "admin · " + strings.TrimPrefix(e.Actor, "admin ")
	}
	return t + " · " + e.Actor
}

func eventCause(e events.Event) string {
	if t, ok := eventCauses[e.Cause]; ok {
		return t
	}
	if e.Cause == "" {
		return "—"
	}
	t := reasonText(e.Cause)
	if e.Status != 0 {
		t += " (" + strconv.Itoa(e.Status) + ")"
	}
	return t
}

// RuntimeConfirm is a confirmation of a bulk action of the Runtime page,
// shown in the slot above its panel. target is the panel it refreshes.
func RuntimeConfirm(kind, title, action, url, target string, lines ...string) *ConfirmVM {
	return &ConfirmVM{RowKind: kind, ID: "all", Title: title, Lines: lines, Action: action, Method: "post",
		URL: url, Target: "#" + target, Cancel: "/runtime"}
}

// ---------------------------------------------------------------------------
// Incident badge.

// IncidentsVM is what the top bar's incident badge counts.
type IncidentsVM struct {
	OpenBreakers int
	Terminal     int
	Cooling      int
	Locked       int
	LockoutOff   bool // lockouts are listed while the master switch is off
}

// OpenBreakers counts open and half-open breakers (neither has recovered yet).
func OpenBreakers(all []resilience.BreakerStatus) int {
	n := 0
	for _, b := range all {
		if b.State == resilience.BreakerOpen || b.State == resilience.BreakerHalfOpen {
			n++
		}
	}
	return n
}

// NewIncidentsVM is the badge of open breakers, terminal and cooling
// connections and locked models.
func NewIncidentsVM(breakers []resilience.BreakerStatus, terminal, cooling, locked int, lockoutOn bool) IncidentsVM {
	return IncidentsVM{OpenBreakers: OpenBreakers(breakers), Terminal: terminal, Cooling: cooling, Locked: locked,
		LockoutOff: locked > 0 && !lockoutOn}
}

// Active reports anything worth a badge.
func (vm IncidentsVM) Active() bool {
	return vm.OpenBreakers+vm.Terminal+vm.Cooling+vm.Locked > 0
}

// Danger is set when something is out of service (open breaker, terminal connection).
func (vm IncidentsVM) Danger() bool { return vm.OpenBreakers+vm.Terminal > 0 }

// Text is "2 breakers open · 1 model locked".
func (vm IncidentsVM) Text() string {
	var parts []string
	if vm.OpenBreakers > 0 {
		parts = append(parts, human.Plural(vm.OpenBreakers, "breaker", "breakers")+" open")
	}
	if vm.Terminal > 0 {
		parts = append(parts, human.Plural(vm.Terminal, "connection", "connections")+" terminal")
	}
	if vm.Cooling > 0 {
		parts = append(parts, human.Plural(vm.Cooling, "connection", "connections")+" cooling")
	}
	if vm.Locked > 0 {
		t := human.Plural(vm.Locked, "model", "models") + " locked"
		if vm.LockoutOff {
			t += " (lockout off)"
		}
		parts = append(parts, t)
	}
	return strings.Join(parts, " · ")
}

// ---------------------------------------------------------------------------
// Health page.

// HealthVM is the admin health report as the Health panel shows it.
type HealthVM struct {
	Status     string // ok, degraded, down
	Reasons    []string
	Version    string
	GoVersion  string
	Uptime     string
	Listen     string
	Demo       bool
	DBOK       bool
	DBShared   bool // the fleet's PostgreSQL database, not the embedded file
	DBPath     string
	DBSchema   string
	DBPing     string
	DBWal      string
	LogQueue   int64
	LogDropped int64
	KeyID      string
	Goroutines int
	Heap       string
	Breakers   []BreakerCountVM // breakers holding state, by state
	Cooling    int
	Terminal   int
	Locked     int
	WindowGate int
	// Fleet: how this replica shares state (mode, replica, Redis, limits).
	SharedMode, Replica, Redis, Limits string
	// Reserves is what this replica holds of the fleet's limits beyond its
	// running requests (nil without Redis).
	Reserves *ReservesVM
	// FeedConnected and FeedResync describe the change-feed listener of a
	// shared-mode replica (FeedResync "" when it never resynced).
	FeedConnected bool
	FeedResync    string
	Generated     *TimeVM
}

// ReservesVM counts a replica's spare grants and unspent block tokens.
type ReservesVM struct{ SpareGrants, BlockTokens int }

// BreakerCountVM is how many breakers are in one state.
type BreakerCountVM struct {
	Badge BadgeVM
	N     int
}

// CountBreakers counts breakers by state, in the order open, half-open,
// degraded, closed, leaving out states no breaker is in.
func CountBreakers(all []resilience.BreakerStatus) []BreakerCountVM {
	var out []BreakerCountVM
	for _, st := range []resilience.BreakerState{resilience.BreakerOpen, resilience.BreakerHalfOpen, resilience.BreakerDegraded, resilience.BreakerClosed} {
		n := 0
		for _, b := range all {
			if b.State == st {
				n++
			}
		}
		if n > 0 {
			out = append(out, BreakerCountVM{Badge: NewBreakerBadge(st), N: n})
		}
	}
	return out
}

// HealthBadge is the overall status as a badge.
func (vm HealthVM) HealthBadge() BadgeVM {
	switch vm.Status {
	case "ok":
		return BadgeVM{"ok", "ok", "check"}
	case "down":
		return BadgeVM{"error", "down", "ban"}
	}
	return BadgeVM{"warning", vm.Status, "alert"}
}

// HealthReason turns a report reason into a sentence part
// ("breaker_open:openai" → "breaker open: openai").
func HealthReason(r string) string {
	code, arg, _ := strings.Cut(r, ":")
	if arg == "" {
		return reasonText(code)
	}
	return reasonText(code) + ": " + arg
}

// HumanBytes renders a size as "512 B", "12.3 KiB", "4.0 MiB".
func HumanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return strconv.FormatInt(n, 10) + " B"
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 4; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTP"[exp])
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}
