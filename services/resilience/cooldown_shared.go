package resilience

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"switchyard/services"
)

// The fleet side of Cooldowns (decisions.go): the change-feed payload of a
// connection's state, applying other replicas' decisions, the coalesced
// diagnostics and the reconciliation of rows applied locally.

// UseFeed publishes this mirror's decisions on feed and applies the ones
// other replicas publish (ChangeConnectionState).
func (c *Cooldowns) UseFeed(feed services.ChangeFeed) {
	c.pub.log = c.log
	c.pub.set(feed)
	feed.Subscribe(services.ChangeConnectionState, c.onChange)
}

// onChange applies a published connection state; Key "" reloads them all.
func (c *Cooldowns) onChange(ctx context.Context, ch services.Change) error {
	if isOwn(ctx) {
		return nil // what this mirror decided and holds already
	}
	if ch.Key == "" {
		return c.Resync(ctx)
	}
	// Not newer than the mirror (in embedded mode: our own decision, handed
	// back by the local feed): nothing to do, one atomic load. Diagnostics
	// of the mirror's version are merged when later.
	if v, ok := c.entries.Load(ch.Key); ok {
		e := v.(*cooldownEntry)
		if ver := e.ver.Load(); ch.Version < ver || ch.Version == ver && !strings.HasPrefix(ch.Payload, diagnosticsPrefix) {
			return nil
		} else if ch.Version == ver {
			c.mergeDiagnostics(e, ch)
			return nil
		}
	} else if strings.HasPrefix(ch.Payload, diagnosticsPrefix) {
		return nil // a connection this mirror has no state for yet: its next decision brings it
	}
	vs := VersionedState{Version: ch.Version}
	st, diag, ok := decodeState(ch.Payload)
	if ok {
		vs.State = st
	} else {
		cur, err := c.store.LoadState(ctx, ch.Key)
		if errors.Is(err, services.ErrNotFound) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("resilience: re-read connection %s: %w", ch.Key, err)
		}
		vs, diag = cur, true
	}
	e := c.entry(ch.Key)
	e.mu.Lock()
	c.follow(e, vs, diag)
	e.mu.Unlock()
	return nil
}

// mergeDiagnostics takes another replica's later last error for the
// version the mirror holds: diagnostics only, the decision is unchanged
// (no version bump, the pick cache stays valid).
func (c *Cooldowns) mergeDiagnostics(e *cooldownEntry, ch services.Change) {
	st, diag, ok := decodeState(ch.Payload)
	if !ok || !diag {
		return
	}
	// This replica's own diagnostics come back while it holds e.mu (it
	// publishes under it): nothing to merge then. A remote one that meets
	// a decision in progress is dropped too; the row it is about to write
	// carries this replica's own last error, and the next flush the later.
	if !e.mu.TryLock() {
		return
	}
	defer e.mu.Unlock()
	local := e.snapshot()
	if e.ver.Load() != ch.Version || !laterError(st, local) {
		return
	}
	next := cloneConnectionState(local)
	copyDiagnostics(&next, st)
	e.state.Store(&next)
}

// Resync reloads every stored row into the mirror (after lost
// notifications), writing the dirty rows first so the reload keeps what
// they decided.
func (c *Cooldowns) Resync(ctx context.Context) error {
	if err := c.Reconcile(ctx); err != nil {
		c.log.Warn("reconcile before resync", "err", err)
	}
	states, err := c.store.LoadStates(ctx)
	if err != nil {
		return fmt.Errorf("resilience: resync connection states: %w", err)
	}
	for id, vs := range states {
		e := c.entry(id)
		e.mu.Lock()
		c.follow(e, vs, true)
		e.mu.Unlock()
	}
	return nil
}

// follow applies a stored row newer than the mirror's, through the version
// counter the pick cache watches. A row applied locally (dirty) keeps its
// decision merged in, for Reconcile to write. Called with e.mu held.
func (c *Cooldowns) follow(e *cooldownEntry, vs VersionedState, diag bool) {
	local := e.snapshot()
	if v := e.ver.Load(); vs.Version <= v {
		if vs.Version == v && diag && laterError(vs.State, local) {
			// The same decision with a later last error (written by
			// another replica's coalesced diagnostics): take it.
			next := cloneConnectionState(local)
			copyDiagnostics(&next, vs.State)
			e.state.Store(&next)
		}
		return
	}
	st := cloneConnectionState(vs.State)
	st.TestStatus = local.TestStatus
	if !diag || laterError(local, st) {
		copyDiagnostics(&st, local)
	}
	if e.dirty {
		st = mergeExtendOnly(local, st)
	}
	e.state.Store(&st)
	e.ver.Store(vs.Version)
	e.episodeAt = time.Time{}
	c.version.Add(1)
}

// Flush writes deferred diagnostics (those due, and those already pending
// at the previous call; every one with force) and reconciles the rows
// applied locally.
func (c *Cooldowns) Flush(ctx context.Context, force bool) error {
	if c.pending.Load() == 0 && c.dirty.Load() == 0 {
		return nil
	}
	now := c.now()
	var errs []error
	if c.dirty.Load() > 0 && (force || !c.guard.down(now)) {
		errs = append(errs, c.Reconcile(ctx))
	}
	if c.pending.Load() > 0 {
		c.entries.Range(func(k, v any) bool {
			e := v.(*cooldownEntry)
			e.mu.Lock()
			defer e.mu.Unlock()
			if !e.diag || e.dirty || e.gone {
				return true
			}
			if !force && !e.diagSeen && now.Sub(e.lastWrite) < diagnosticsInterval {
				e.diagSeen = true
				return true
			}
			if !force && c.guard.down(now) {
				return true
			}
			if err := c.writeDiagnostics(ctx, e, k.(string), e.snapshot(), now); err != nil {
				errs = append(errs, err)
				return false
			}
			return true
		})
	}
	return errors.Join(errs...)
}

// Reconcile writes the rows applied locally while the store could not be
// written, merged extend-only with what the store holds now: the later
// deadline, the higher level and counters, a terminal state win. It stops
// at the first store error (the rows stay dirty).
func (c *Cooldowns) Reconcile(ctx context.Context) error {
	if c.dirty.Load() == 0 {
		return nil
	}
	var err error
	c.entries.Range(func(k, v any) bool {
		e := v.(*cooldownEntry)
		e.mu.Lock()
		defer e.mu.Unlock()
		if e.dirty && !e.gone {
			err = c.reconcileLocked(ctx, e, k.(string))
		}
		return err == nil
	})
	return err
}

func (c *Cooldowns) reconcileLocked(ctx context.Context, e *cooldownEntry, id string) error {
	now := c.now()
	for range casAttempts {
		wctx, cancel := decisionContext(ctx)
		cur, err := c.store.LoadState(wctx, id)
		cancel()
		if errors.Is(err, services.ErrNotFound) {
			c.dropGone(id, e)
			return nil
		}
		if err != nil {
			c.guard.trip(now)
			return fmt.Errorf("resilience: reconcile connection %s: %w", id, err)
		}
		local := e.snapshot()
		merged := mergeExtendOnly(local, cur.State)
		if sameDecision(merged, cur.State) {
			// The store holds at least as much: follow it.
			e.dirty = false
			c.dirty.Add(-1)
			e.ver.Store(cur.Version)
			e.state.Store(&merged)
			c.version.Add(1)
			if laterError(local, cur.State) {
				return c.writeDiagnostics(ctx, e, id, merged, now)
			}
			return nil
		}
		wctx, cancel = decisionContext(ctx)
		res, swapped, err := c.store.CompareAndSaveState(wctx, id, cur.Version, merged)
		cancel()
		if err != nil {
			c.guard.trip(now)
			return fmt.Errorf("resilience: reconcile connection %s: %w", id, err)
		}
		if swapped {
			c.guard.reset()
			c.written(ctx, e, id, res.Version, merged, now)
			c.log.Info("connection state reconciled with the store", "connectionId", id, "version", res.Version)
			return nil
		}
	}
	return nil // still conflicting: the next flush tries again
}

// mergeExtendOnly merges a state decided locally into the stored one
// without weakening either: a terminal state wins (the stored one first),
// else the later deadline (with its reason), the higher backoff level,
// auth-failure count and rejection streak; the later diagnostics.
func mergeExtendOnly(local, stored services.ConnectionState) services.ConnectionState {
	m := cloneConnectionState(stored)
	switch {
	case stored.TerminalStatus != "":
	case local.TerminalStatus != "":
		m.TerminalStatus, m.TerminalAt = local.TerminalStatus, cloneTimePtr(local.TerminalAt)
		m.RateLimitedUntil, m.CooldownReason, m.BackoffLevel = nil, "", 0
	default:
		if local.RateLimitedUntil != nil && (m.RateLimitedUntil == nil || local.RateLimitedUntil.After(*m.RateLimitedUntil)) {
			m.RateLimitedUntil, m.CooldownReason = cloneTimePtr(local.RateLimitedUntil), local.CooldownReason
		}
		m.BackoffLevel = max(m.BackoffLevel, local.BackoffLevel)
		if local.AuthFailCount > m.AuthFailCount {
			m.AuthFailCount, m.LastAuthFailAt = local.AuthFailCount, cloneTimePtr(local.LastAuthFailAt)
		}
		if local.RejectStreak > m.RejectStreak {
			m.RejectStreak, m.LastRejectAt = local.RejectStreak, cloneTimePtr(local.LastRejectAt)
		}
	}
	if laterError(local, m) {
		copyDiagnostics(&m, local)
	}
	m.TestStatus = local.TestStatus
	return m
}

// sameDecision reports whether a and b agree on every routing field (they
// may differ in diagnostics and the test status).
func sameDecision(a, b services.ConnectionState) bool {
	return timePtrEqual(a.RateLimitedUntil, b.RateLimitedUntil) && a.BackoffLevel == b.BackoffLevel &&
		a.TerminalStatus == b.TerminalStatus && timePtrEqual(a.TerminalAt, b.TerminalAt) &&
		a.AuthFailCount == b.AuthFailCount && timePtrEqual(a.LastAuthFailAt, b.LastAuthFailAt) &&
		a.CooldownReason == b.CooldownReason && a.RejectStreak == b.RejectStreak &&
		timePtrEqual(a.LastRejectAt, b.LastRejectAt)
}

// laterError reports whether a's last error is later than b's.
func laterError(a, b services.ConnectionState) bool {
	return a.LastErrorAt != nil && (b.LastErrorAt == nil || a.LastErrorAt.After(*b.LastErrorAt))
}

// copyDiagnostics copies the last_error* fields of from into st.
func copyDiagnostics(st *services.ConnectionState, from services.ConnectionState) {
	st.LastError, st.LastErrorReason, st.LastErrorStatus = from.LastError, from.LastErrorReason, from.LastErrorStatus
	st.ErrorCode, st.LastErrorAt = from.ErrorCode, cloneTimePtr(from.LastErrorAt)
}

// statePayload is a connection state on the change feed: epoch ms, short
// names. D says the diagnostics are included (they are left out, and the
// receiver keeps its own, when they would make the payload too long). O
// marks a diagnostics-only change (the decision fields are the version's,
// unchanged); it is encoded first, so receivers tell it by diagnosticsPrefix.
type statePayload struct {
	O  bool   `json:"o,omitempty"`
	U  *int64 `json:"u,omitempty"`
	L  int    `json:"l,omitempty"`
	R  string `json:"r,omitempty"`
	T  string `json:"t,omitempty"`
	TA *int64 `json:"ta,omitempty"`
	A  int    `json:"a,omitempty"`
	AA *int64 `json:"aa,omitempty"`
	S  int    `json:"s,omitempty"`
	SA *int64 `json:"sa,omitempty"`
	D  bool   `json:"d,omitempty"`
	E  string `json:"e,omitempty"`
	ER string `json:"er,omitempty"`
	ES int    `json:"es,omitempty"`
	EC string `json:"ec,omitempty"`
	EA *int64 `json:"ea,omitempty"`
}

// payloadErrorRunes caps last_error on the feed (the store keeps 1 024).
const payloadErrorRunes = 512

func encodeState(st services.ConnectionState) string {
	p := statePayload{U: msOf(st.RateLimitedUntil), L: st.BackoffLevel, R: st.CooldownReason, T: st.TerminalStatus,
		TA: msOf(st.TerminalAt), A: st.AuthFailCount, AA: msOf(st.LastAuthFailAt), S: st.RejectStreak, SA: msOf(st.LastRejectAt),
		D: true, E: truncateRunes(st.LastError, payloadErrorRunes), ER: st.LastErrorReason, ES: st.LastErrorStatus,
		EC: st.ErrorCode, EA: msOf(st.LastErrorAt)}
	b, _ := json.Marshal(p)
	if len(b) > maxPayloadBytes {
		p.D, p.E, p.ER, p.ES, p.EC, p.EA = false, "", "", 0, "", nil
		b, _ = json.Marshal(p)
	}
	return string(b)
}

// diagnosticsPrefix starts the payload of a diagnostics-only change.
const diagnosticsPrefix = `{"o":true`

// encodeDiagnostics is the payload of a diagnostics-only change of st.
func encodeDiagnostics(st services.ConnectionState) string {
	p := statePayload{O: true, D: true, E: truncateRunes(st.LastError, payloadErrorRunes), ER: st.LastErrorReason,
		ES: st.LastErrorStatus, EC: st.ErrorCode, EA: msOf(st.LastErrorAt)}
	b, _ := json.Marshal(p)
	return string(b)
}

func decodeState(payload string) (st services.ConnectionState, diag, ok bool) {
	var p statePayload
	if payload == "" || json.Unmarshal([]byte(payload), &p) != nil {
		return services.ConnectionState{}, false, false
	}
	st = services.ConnectionState{RateLimitedUntil: timeOfMs(p.U), BackoffLevel: p.L, CooldownReason: p.R,
		TerminalStatus: p.T, TerminalAt: timeOfMs(p.TA), AuthFailCount: p.A, LastAuthFailAt: timeOfMs(p.AA),
		RejectStreak: p.S, LastRejectAt: timeOfMs(p.SA)}
	if p.D {
		st.LastError, st.LastErrorReason, st.LastErrorStatus, st.ErrorCode = p.E, p.ER, p.ES, p.EC
		st.LastErrorAt = timeOfMs(p.EA)
	}
	return st, p.D, true
}
