package resilience

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"switchyard/services"
	"switchyard/services/events"
)

// Connection cooldowns and terminal states (20-resilience §4).
//
// Memory is authoritative for reads: one immutable snapshot per connection,
// swapped atomically, so Cooling and State never take a lock. Writes for one
// connection run under that connection's mutex and reach the store before
// they return; no lock spans two connections.

// Ladder constants of §4.3 and the fixed penalties of §1.4.
const (
	// ExpiredRetryMax is the number of auth failures that cool; the next one expires the connection.
	ExpiredRetryMax = 3
	// RejectStreakBan is the rejection streak that bans a connection.
	RejectStreakBan = 3

	authLadderBaseMs       int64 = 120_000
	authLadderWindowMs     int64 = 86_400_000
	rejectStreakWindowMs   int64 = 86_400_000
	rejectStreakFirstMs    int64 = 60_000
	rejectStreakSecondMs   int64 = 300_000
	forbiddenCooldownMs    int64 = 300_000
	quotaDefaultCooldownMs int64 = 3_600_000
	// backoffRestartMs: a failure this long after the previous one restarts the ladder at level 0.
	backoffRestartMs int64 = 600_000
	// lastErrorMaxChars caps the stored last_error.
	lastErrorMaxChars = 1024
)

// cooldownProfileDefaults is the §4 defaults table, used for a profile the
// configuration does not carry (or carries with zero values).
var cooldownProfileDefaults = map[Profile]CooldownProfile{
	services.AuthOAuth:  {BaseCooldownMs: 5_000, MaxBackoffSteps: 8, MaxCooldownMs: 300_000},
	services.AuthAPIKey: {BaseCooldownMs: 3_000, MaxBackoffSteps: 5, MaxCooldownMs: 300_000},
	services.AuthLocal:  {BaseCooldownMs: 1_000, MaxBackoffSteps: 4, MaxCooldownMs: 60_000},
}

const defaultMaxRetryHintMs int64 = 604_800_000

// ConnInfo describes the connection a penalty is applied to, as configured
// when the failure happened.
type ConnInfo struct {
	ID       string
	Provider string
	// Profile is the connection's auth class; it selects the backoff ladder.
	Profile Profile
	// DisableCooling: no timed penalty is written (terminal states still are).
	DisableCooling bool
	// AutoDisableBanned mirrors the autoDisableBannedAccounts setting:
	// entering banned also switches the connection off.
	AutoDisableBanned bool
	// Message and Code are the failure's upstream error message and code
	// (Failure.Message / Failure.Code); they become last_error (scrubbed,
	// ≤ 1 024 chars) and error_code. Unused for egress-lock siblings.
	Message string
	Code    string
	// QuotaResetAt is the learned quota-window reset of this connection
	// (§13.4), zero when unknown; a hint-less connection-scoped
	// quota_exhausted cools until it when it lies in the future.
	QuotaResetAt time.Time
}

// CooldownEffect is what Apply did to one connection.
type CooldownEffect struct {
	// NewEpisode is false when the failure landed during an active cooldown
	// (BD 3); the breaker counts only new episodes (§2.1).
	NewEpisode bool
	// Until is the cooldown deadline after the call, zero when not cooling.
	Until time.Time
	// Terminal is the terminal status after the call, "" when none.
	Terminal string
	// EnteredTerminal is true when this call made the connection terminal.
	EnteredTerminal bool
	// LevelAfter is the backoff level after the call.
	LevelAfter int
}

// Cooldowns holds the connection cooldowns, backoff levels, counters and
// terminal states of every connection: the mirror of the store's rows, read
// lock-free (see decisions.go for how a fleet shares it).
type Cooldowns struct {
	clock   services.Clock
	cfg     func() CooldownConfig
	store   ConnectionStateStore
	log     *slog.Logger
	entries sync.Map // connection id → *cooldownEntry
	// version is bumped after every change of a connection's published
	// state (and after a connection is forgotten), so a reader that cached
	// what Flags, Cooling and BackoffLevel answered knows when to ask again.
	version atomic.Uint64

	// Events receives the cooldowns and terminal states this process sets
	// and clears; nil records nothing.
	Events events.Recorder

	pub   publisher
	guard storeGuard
	// pending counts entries with deferred diagnostics, dirty those applied
	// locally only; Flush skips its scan while both are zero.
	pending atomic.Int64
	dirty   atomic.Int64
}

// Version changes after every write that can change what Flags, Cooling
// or BackoffLevel answer; time alone (a deadline passing) does not change
// it. Read it before the state it guards.
func (c *Cooldowns) Version() uint64 { return c.version.Load() }

// cooldownEntry is the state of one connection. state is replaced, never
// mutated, so readers may use the snapshot without the mutex.
type cooldownEntry struct {
	mu    sync.Mutex // serialises writers of this connection
	state atomic.Pointer[services.ConnectionState]
	// ver is the store version the mirror holds (written under mu, read
	// without it by the feed's not-newer check).
	ver  atomic.Int64
	gone bool // forgotten (connection deleted); guarded by mu
	// episodeAt is when the running cooldown began, zero when unknown (loaded
	// or replaced state); guarded by mu. The egress lock measures its floor
	// from it, so a repeat within one episode does not push the deadline.
	episodeAt time.Time
	// Guarded by mu: dirty = the mirror holds a decision the store lacks;
	// diag = diagnostics newer than the store's, diagSeen = still so at the
	// previous flush; lastWrite = the last store write of the row.
	dirty     bool
	diag      bool
	diagSeen  bool
	lastWrite time.Time
}

func (e *cooldownEntry) snapshot() services.ConnectionState {
	if p := e.state.Load(); p != nil {
		return *p
	}
	return services.ConnectionState{}
}

// NewCooldowns builds the connection cooldown state machine. cfg is read at
// every evaluation, so settings changes apply to the next failure; a nil cfg
// uses the defaults of §4. A nil store keeps state in memory only; a nil log
// discards.
func NewCooldowns(clock services.Clock, cfg func() CooldownConfig, store ConnectionStateStore, log *slog.Logger) *Cooldowns {
	if cfg == nil {
		cfg = func() CooldownConfig { return CooldownConfig{} }
	}
	if store == nil {
		store = NewMemoryConnectionStateStore()
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Cooldowns{clock: clock, cfg: cfg, store: store, log: log.With("component", "cooldowns")}
}

// Load replaces the in-memory state with the stored one (at start). A
// deadline that passed meanwhile is simply expired when read.
func (c *Cooldowns) Load(ctx context.Context) error {
	states, err := c.store.LoadStates(ctx)
	if err != nil {
		return fmt.Errorf("resilience: load connection states: %w", err)
	}
	c.entries.Range(func(k, _ any) bool {
		if _, ok := states[k.(string)]; !ok {
			c.Forget(k.(string))
		}
		return true
	})
	for id, vs := range states {
		c.replace(id, vs)
	}
	return nil
}

// State returns the state of connection id (the zero state when unknown).
// Lazy: an expired deadline is returned as stored; compare it with Now or
// use Cooling.
func (c *Cooldowns) State(id string) services.ConnectionState {
	v, ok := c.entries.Load(id)
	if !ok {
		return services.ConnectionState{}
	}
	return cloneConnectionState(v.(*cooldownEntry).snapshot())
}

// Flags returns the terminal status of connection id and the reason that
// wrote its cooldown deadline (CooldownReason; not the latest error reason,
// which absorbed failures overwrite) without copying its state: the
// selector reads them for every candidate. Lock-free, never writes.
func (c *Cooldowns) Flags(id string) (terminalStatus, cooldownReason string) {
	v, ok := c.entries.Load(id)
	if !ok {
		return "", ""
	}
	p := v.(*cooldownEntry).state.Load()
	if p == nil {
		return "", ""
	}
	return p.TerminalStatus, p.CooldownReason
}

// BackoffLevel returns connection id's backoff level without copying its
// state (the selector ranks candidates by it). Lock-free, never writes.
func (c *Cooldowns) BackoffLevel(id string) int {
	v, ok := c.entries.Load(id)
	if !ok {
		return 0
	}
	if p := v.(*cooldownEntry).state.Load(); p != nil {
		return p.BackoffLevel
	}
	return 0
}

// Cooling reports whether connection id is cooling now and until when.
// Terminal connections are not cooling (they are excluded for good).
// Lock-free, never writes.
func (c *Cooldowns) Cooling(id string) (until time.Time, cooling bool) {
	v, ok := c.entries.Load(id)
	if !ok {
		return time.Time{}, false
	}
	p := v.(*cooldownEntry).state.Load()
	if p == nil || p.RateLimitedUntil == nil || p.TerminalStatus != "" {
		return time.Time{}, false
	}
	if !p.RateLimitedUntil.After(c.clock.Now()) {
		return time.Time{}, false
	}
	return *p.RateLimitedUntil, true
}

// Replace sets the in-memory state of connection id without writing it:
// for a created connection, or after new credentials were stored together
// with the cleared state (the connection store wrote the row). The version
// the mirror holds is kept.
func (c *Cooldowns) Replace(id string, st services.ConnectionState) {
	e := c.entry(id)
	e.mu.Lock()
	st = cloneConnectionState(st)
	e.state.Store(&st)
	e.gone = false
	e.episodeAt = time.Time{}
	e.mu.Unlock()
	c.version.Add(1)
}

// replace sets the mirror of id to a stored row.
func (c *Cooldowns) replace(id string, vs VersionedState) {
	e := c.entry(id)
	e.mu.Lock()
	st := cloneConnectionState(vs.State)
	e.state.Store(&st)
	e.ver.Store(vs.Version)
	e.gone = false
	e.episodeAt = time.Time{}
	e.mu.Unlock()
	c.version.Add(1)
}

// Forget drops connection id from memory (the connection was deleted).
func (c *Cooldowns) Forget(id string) {
	v, ok := c.entries.LoadAndDelete(id)
	if !ok {
		return
	}
	e := v.(*cooldownEntry)
	e.mu.Lock()
	e.gone = true
	if e.dirty {
		e.dirty = false
		c.dirty.Add(-1)
	}
	c.clearDiag(e)
	e.mu.Unlock()
	c.version.Add(1)
}

func (c *Cooldowns) entry(id string) *cooldownEntry {
	if v, ok := c.entries.Load(id); ok {
		return v.(*cooldownEntry)
	}
	v, _ := c.entries.LoadOrStore(id, &cooldownEntry{})
	return v.(*cooldownEntry)
}

// now is the clock truncated to the millisecond, the precision of the
// stored columns, so a reloaded state compares exactly like the live one.
func (c *Cooldowns) now() time.Time {
	return c.clock.Now().UTC().Truncate(time.Millisecond)
}

func (c *Cooldowns) profile(p Profile) (CooldownProfile, CooldownConfig) {
	cfg := c.cfg()
	def, ok := cooldownProfileDefaults[p]
	if !ok {
		def = cooldownProfileDefaults[services.AuthAPIKey]
	}
	prof, ok := cfg.Profiles[p]
	if !ok {
		return def, cfg
	}
	if prof.BaseCooldownMs <= 0 {
		prof.BaseCooldownMs = def.BaseCooldownMs
	}
	if prof.MaxCooldownMs <= 0 {
		prof.MaxCooldownMs = def.MaxCooldownMs
	}
	if prof.MaxBackoffSteps < 0 {
		prof.MaxBackoffSteps = def.MaxBackoffSteps
	}
	return prof, cfg
}

// backoffMs is the §4.1 step at level: min(base × 2^min(level, maxSteps), maxCooldownMs).
func backoffMs(base int64, level int, prof CooldownProfile) int64 {
	steps := min(max(level, 0), prof.MaxBackoffSteps, 40)
	d := base
	for range steps {
		if d >= prof.MaxCooldownMs {
			break
		}
		d *= 2
	}
	return min(d, prof.MaxCooldownMs)
}

// clampHint floors a hint at 1 s and caps it at maxRetryHintMs (the
// classifier already does; repeated so no caller can exceed the cap). A cap
// too large for a time.Duration saturates instead of overflowing (which
// would turn every hint into 0).
func clampHint(h time.Duration, cfg CooldownConfig) time.Duration {
	if h <= 0 {
		return 0
	}
	h = max(h, time.Second)
	capMs := cfg.MaxRetryHintMs
	if capMs <= 0 {
		capMs = defaultMaxRetryHintMs
	}
	if capMs > int64(math.MaxInt64/time.Millisecond) {
		return h
	}
	return min(h, time.Duration(capMs)*time.Millisecond)
}

// terminalOf returns the terminal status a classification creates at once
// (ban markers, ban rules, credits), "" when none. The ladders are separate.
func terminalOf(cls Classification) string {
	if cls.Terminal != "" {
		return cls.Terminal
	}
	if cls.Scope != ScopeConnection {
		return ""
	}
	switch {
	case cls.Ban:
		return TerminalBanned
	case cls.Reason == ReasonCreditsExhausted:
		return TerminalCreditsExhausted
	}
	return ""
}

// Apply applies one classified failure of connection info.ID (20-resilience
// §1.6 step 2 and the connection part of step 4). cls.Scope must be the
// effective scope, after the lockout override: a timed penalty is written
// only for ScopeConnection, while last_error* is recorded for every scope.
// caller_error, client_abort and local_limit change nothing (BD 2), and a
// terminal connection is never rewritten.
//
// The decision is computed from the mirror and written with a
// compare-and-set before Apply returns (a conflict re-reads and
// recomputes, so concurrent failures on several replicas make one
// episode); a failure the mirror shows inside an open episode only
// restates diagnostics, which are coalesced. A store error is logged and
// memory keeps the new state (reconciled later).
func (c *Cooldowns) Apply(ctx context.Context, info ConnInfo, cls Classification) CooldownEffect {
	switch cls.Reason {
	case ReasonCallerError, ReasonClientAbort, ReasonLocalLimit:
		st, now := c.State(info.ID), c.now()
		return effectOf(st, now, !coolingAt(st, now), false)
	}
	e := c.entry(info.ID)
	e.mu.Lock()
	defer e.mu.Unlock()
	now := c.now()
	var (
		eff     CooldownEffect
		episode bool
	)
	old, st, changed, _ := c.decide(ctx, e, info.ID, now, false, func(old services.ConnectionState) services.ConnectionState {
		var st services.ConnectionState
		st, eff, episode = c.failureState(old, info, cls, now)
		return st
	})
	if changed {
		if episode {
			e.episodeAt = now
		}
		c.enteredTerminal(ctx, info, old, st)
		switch {
		case st.TerminalStatus != "" && old.TerminalStatus == "":
			c.record(events.TerminalSet, info.Provider, info.ID, string(cls.Reason), cls.Status)
		case episode:
			c.record(events.CooldownSet, info.Provider, info.ID, string(cls.Reason), cls.Status)
		}
	}
	return eff
}

// record hands one event to Events (nil: nothing).
func (c *Cooldowns) record(t events.Type, provider, id, cause string, status int) {
	if c.Events != nil {
		c.Events.Record(events.Event{Type: t, Provider: provider, ConnectionID: id, Cause: cause, Status: status})
	}
}

// recordAdmin records an admin's change of connection id, naming the
// admin ctx carries.
func (c *Cooldowns) recordAdmin(ctx context.Context, t events.Type, id string) {
	if c.Events != nil {
		c.Events.Record(events.Event{Type: t, ConnectionID: id, Cause: events.CauseAdmin, Actor: events.ActorOf(ctx)})
	}
}

// Preview is what Apply would do to a connection in state from, without
// doing it: the classify dry run (POST /api/resilience/classify) reads the
// same decision the attempt loop applies.
func (c *Cooldowns) Preview(info ConnInfo, cls Classification, from services.ConnectionState) CooldownEffect {
	now := c.now()
	switch cls.Reason {
	case ReasonCallerError, ReasonClientAbort, ReasonLocalLimit:
		return effectOf(from, now, !coolingAt(from, now), false)
	}
	_, eff, _ := c.failureState(cloneConnectionState(from), info, cls, now)
	return eff
}

// failureState is the §4 state machine: the state after one classified
// failure at now, its effect, and whether it opened a cooldown episode.
func (c *Cooldowns) failureState(old services.ConnectionState, info ConnInfo, cls Classification, now time.Time) (services.ConnectionState, CooldownEffect, bool) {
	cooling := coolingAt(old, now)
	if old.TerminalStatus != "" {
		// BD 4: a terminal connection is never rewritten by a later failure.
		return old, effectOf(old, now, !cooling, false), false
	}
	prof, cfg := c.profile(info.Profile)
	prevErrAt := old.LastErrorAt
	st := old
	recordLastError(&st, info, cls, now)
	hint := clampHint(cls.Hint, cfg)

	if term := terminalOf(cls); term != "" {
		enterTerminal(&st, term, now)
		return st, effectOf(st, now, !cooling, true), false
	}
	if cls.Scope != ScopeConnection {
		return st, effectOf(st, now, !cooling, false), false
	}
	if cooling {
		// Episode (BD 3, §4.2): no level or counter change, never shorter;
		// only a later-ending hint extends the deadline, and the deadline
		// then belongs to this failure's reason.
		if hint > 0 && !info.DisableCooling {
			if end := now.Add(hint); end.After(*st.RateLimitedUntil) {
				st.RateLimitedUntil = &end
				st.CooldownReason = string(cls.Reason)
			}
		}
		return st, effectOf(st, now, false, false), false
	}
	level := st.BackoffLevel
	if prevErrAt != nil && now.Sub(*prevErrAt) > time.Duration(backoffRestartMs)*time.Millisecond {
		level = 0
	}
	cooldownMs, level, terminal := failureCooldown(&st, prof, cfg, info, cls, hint, level, now)
	if terminal {
		return st, effectOf(st, now, true, true), false
	}
	if hint > 0 {
		cooldownMs = hint.Milliseconds() // BD 6: a hint replaces every non-terminal default
	}
	episode := false
	if !info.DisableCooling {
		until := now.Add(time.Duration(cooldownMs) * time.Millisecond)
		st.RateLimitedUntil = &until
		st.CooldownReason = string(cls.Reason)
		st.BackoffLevel = level
		episode = true
	}
	return st, effectOf(st, now, true, false), episode
}

// failureCooldown is the length of the cooldown episode one failure opens
// (§4.1–§4.4): a rule's cooldown or the backoff ladder, the auth ladder, the
// refusal streak, the quota reset, the forbidden pause. It moves st's
// counters and returns the next backoff level; terminal means the failure
// ended the connection instead (st is terminal then).
func failureCooldown(st *services.ConnectionState, prof CooldownProfile, cfg CooldownConfig, info ConnInfo, cls Classification, hint time.Duration, level int, now time.Time) (cooldownMs int64, nextLevel int, terminal bool) {
	switch {
	case cls.RuleID != "" || cls.CooldownMs > 0:
		// A rule's reason and scope are final; its cooldownMs replaces the
		// base, else the §4.1 ladder runs (§1.2, acceptance C1).
		base := prof.BaseCooldownMs
		if cls.CooldownMs > 0 {
			base = cls.CooldownMs
		}
		cooldownMs = backoffMs(base, level, prof)
		if hint == 0 {
			level = min(level+1, prof.MaxBackoffSteps)
		}
	case cls.Reason == ReasonAuthError:
		// §4.3: restart at 1 when the previous counted auth failure is more
		// than 24 h old, measured from last_auth_fail_at (never from
		// last_error_at, which unrelated failures move).
		count := st.AuthFailCount + 1
		if st.AuthFailCount == 0 || st.LastAuthFailAt == nil ||
			now.Sub(*st.LastAuthFailAt) > time.Duration(authLadderWindowMs)*time.Millisecond {
			count = 1
		}
		st.AuthFailCount = count
		at := now
		st.LastAuthFailAt = &at
		if count > ExpiredRetryMax {
			st.LastError = scrubLastError(fmt.Sprintf("%d consecutive authentication failures; last: %s", count, st.LastError))
			enterTerminal(st, TerminalExpired, now)
			return 0, level, true
		}
		cooldownMs = authLadderBaseMs << (count - 1)
	case cls.Reason == ReasonRequestRejected:
		streak := 1
		if st.LastRejectAt != nil && now.Sub(*st.LastRejectAt) <= time.Duration(rejectStreakWindowMs)*time.Millisecond {
			streak = st.RejectStreak + 1
		}
		st.RejectStreak = streak
		at := now
		st.LastRejectAt = &at
		if streak >= RejectStreakBan {
			st.LastError = scrubLastError(fmt.Sprintf("%d consecutive request refusals within 24 h; last: %s", streak, st.LastError))
			enterTerminal(st, TerminalBanned, now)
			return 0, level, true
		}
		cooldownMs = rejectStreakFirstMs
		if streak == 2 {
			cooldownMs = rejectStreakSecondMs
		}
	case cls.Reason == ReasonQuotaExhausted:
		cooldownMs = quotaDefaultCooldownMs
		switch {
		case !info.QuotaResetAt.IsZero() && info.QuotaResetAt.After(now):
			cooldownMs = info.QuotaResetAt.Sub(now).Milliseconds()
		case cls.Detail == "daily_quota":
			cooldownMs = nextUTCMidnight(now).Sub(now).Milliseconds()
		}
		if capMs := cfg.MaxRetryHintMs; capMs > 0 {
			cooldownMs = min(cooldownMs, capMs)
		}
	case cls.Reason == ReasonForbidden:
		cooldownMs = forbiddenCooldownMs
	default: // rate_limit, server_error, transient and anything else connection-scoped
		cooldownMs = backoffMs(prof.BaseCooldownMs, level, prof)
		if hint == 0 {
			level = min(level+1, prof.MaxBackoffSteps)
		}
	}
	return cooldownMs, level, false
}

// Success records a 2xx (or first useful stream byte) on connection id:
// deadline, level, auth_fail_count and reject_streak are cleared in one
// write, only if any was set; last_error* stays for display. A terminal
// state is kept.
func (c *Cooldowns) Success(ctx context.Context, id string) {
	v, ok := c.entries.Load(id)
	if !ok {
		return
	}
	e := v.(*cooldownEntry)
	if !hasRoutingState(e.snapshot()) { // the common case: no lock, no write
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	old, _, changed, _ := c.decide(ctx, e, id, c.now(), false, func(old services.ConnectionState) services.ConnectionState {
		st := old
		clearRoutingState(&st)
		return st
	})
	if changed && old.RateLimitedUntil != nil {
		c.record(events.CooldownCleared, "", id, events.CauseSuccess, 0)
	}
}

// Reset is the admin reset (POST /api/connections/{id}/reset): every field
// of §4 is cleared, the terminal state included. enabled is not changed.
// The store is written first (whatever another replica decided meanwhile:
// the admin's reset wins); an error leaves memory as it was.
func (c *Cooldowns) Reset(ctx context.Context, id string) error {
	e := c.entry(id)
	e.mu.Lock()
	defer e.mu.Unlock()
	old := e.snapshot()
	st := services.ConnectionState{TestStatus: old.TestStatus}
	wctx, cancel := decisionContext(ctx)
	defer cancel()
	cur, _, err := c.store.CompareAndSaveState(wctx, id, -1, st)
	if err != nil {
		if errors.Is(err, services.ErrNotFound) {
			c.dropGone(id, e)
		}
		return fmt.Errorf("resilience: reset connection %s: %w", id, err)
	}
	c.written(ctx, e, id, cur.Version, st, c.now())
	switch {
	case old.TerminalStatus != "":
		c.recordAdmin(ctx, events.TerminalReset, id)
	case hasRoutingState(old):
		c.recordAdmin(ctx, events.CooldownCleared, id)
	}
	return nil
}

// ClearCooldownsResult sorts the targeted connections of a bulk clear.
type ClearCooldownsResult struct {
	Cleared         []string // routing state cleared as on success
	Unchanged       []string // nothing set (unknown ids included)
	SkippedTerminal []string
}

// ClearCooldowns clears deadline, level, auth_fail_count and reject_streak
// of the given connections (nil = every known connection), as a success
// would, skipping terminal ones (POST /api/resilience/cooldowns). It returns
// how many were cleared.
func (c *Cooldowns) ClearCooldowns(ctx context.Context, ids []string) (cleared int, err error) {
	res, err := c.ClearCooldownsDetailed(ctx, ids)
	return len(res.Cleared), err
}

// ClearCooldownsDetailed is ClearCooldowns reporting each targeted
// connection. Unknown ids count as unchanged (this component does not know
// which connections exist; the caller reports notFound). It stops at the
// first store error.
func (c *Cooldowns) ClearCooldownsDetailed(ctx context.Context, ids []string) (ClearCooldownsResult, error) {
	var res ClearCooldownsResult
	if ids == nil {
		c.entries.Range(func(k, _ any) bool {
			ids = append(ids, k.(string))
			return true
		})
	}
	for _, id := range ids {
		v, ok := c.entries.Load(id)
		if !ok {
			res.Unchanged = append(res.Unchanged, id)
			continue
		}
		e := v.(*cooldownEntry)
		e.mu.Lock()
		var terminal bool
		_, _, changed, err := c.decide(ctx, e, id, c.now(), true, func(old services.ConnectionState) services.ConnectionState {
			terminal = old.TerminalStatus != ""
			if terminal || !hasRoutingState(old) {
				return old
			}
			st := old
			clearRoutingState(&st)
			return st
		})
		e.mu.Unlock()
		switch {
		case err != nil:
			return res, fmt.Errorf("resilience: clear cooldown of %s: %w", id, err)
		case terminal:
			res.SkippedTerminal = append(res.SkippedTerminal, id)
		case changed:
			res.Cleared = append(res.Cleared, id)
			c.recordAdmin(ctx, events.CooldownCleared, id)
		default:
			res.Unchanged = append(res.Unchanged, id)
		}
	}
	return res, nil
}
