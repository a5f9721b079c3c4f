package resilience

import (
	"context"
	"errors"
	"fmt"
	"time"

	"switchyard/services"
)

// How a Cooldowns decision reaches the store (decisions.go): the
// compare-and-set on the row's version, adopting the stored row on a
// conflict, applying locally when the store fails, the coalesced
// diagnostics, and the side effects of entering a terminal state.

// decide runs one decision on connection id, called with e.mu held:
// compute gives the new state from the mirror's. A change of the routing
// fields is written with a compare-and-set on the mirror's version; on a
// conflict the stored row replaces the mirror and compute runs again on
// it, at most casAttempts times, then the decision is applied locally. A
// change of diagnostics only is coalesced (noteDiagnostics). It returns the
// state before and after the final computation and whether the mirror
// changed. admin: a store error is returned and nothing applied (the
// caller answers the admin), instead of applying locally.
func (c *Cooldowns) decide(ctx context.Context, e *cooldownEntry, id string, now time.Time, admin bool,
	compute func(old services.ConnectionState) services.ConnectionState) (old, st services.ConnectionState, changed bool, err error) {
	for attempt := 1; ; attempt++ {
		old = e.snapshot()
		st = compute(old)
		if e.gone || connectionStateEqual(old, st) {
			return old, st, false, nil
		}
		if sameDecision(old, st) {
			c.noteDiagnostics(ctx, e, id, st, now)
			return old, st, true, nil
		}
		if !admin && c.guard.down(now) {
			c.applyLocally(e, id, st, "store unavailable")
			return old, st, true, nil
		}
		wctx, cancel := decisionContext(ctx)
		cur, swapped, werr := c.store.CompareAndSaveState(wctx, id, e.ver.Load(), st)
		cancel()
		switch {
		case werr == nil && swapped:
			c.guard.reset()
			c.written(ctx, e, id, cur.Version, st, now)
			return old, st, true, nil
		case werr == nil:
			// Another replica decided since the mirror saw the row: follow
			// it, then decide again on what it holds.
			c.adopt(e, cur)
			if attempt < casAttempts {
				continue
			}
			if admin {
				return old, st, false, fmt.Errorf("resilience: connection %s: %w", id, services.ErrConflict)
			}
			c.applyLocally(e, id, st, "compare-and-set kept conflicting")
			return old, st, true, nil
		case errors.Is(werr, services.ErrNotFound):
			c.dropGone(id, e)
			return old, st, false, werr
		case admin:
			return old, st, false, werr
		default:
			c.guard.trip(now)
			c.log.Error("persist connection state", "connectionId", id, "err", werr)
			c.applyLocally(e, id, st, "")
			return old, st, true, nil
		}
	}
}

// written publishes a decision the store took at version v. Called with
// e.mu held.
func (c *Cooldowns) written(ctx context.Context, e *cooldownEntry, id string, v int64, st services.ConnectionState, now time.Time) {
	st = cloneConnectionState(st)
	e.state.Store(&st)
	e.ver.Store(v)
	if e.dirty {
		e.dirty = false
		c.dirty.Add(-1)
	}
	c.clearDiag(e)
	e.lastWrite = now
	c.version.Add(1)
	c.pub.publish(ctx, services.Change{Kind: services.ChangeConnectionState, Key: id, Version: v, Payload: encodeState(st)})
}

// adopt replaces the mirror with a stored row (a conflict's re-read).
// Called with e.mu held.
func (c *Cooldowns) adopt(e *cooldownEntry, cur VersionedState) {
	st := cloneConnectionState(cur.State)
	if local := e.snapshot(); laterError(local, st) {
		copyDiagnostics(&st, local)
	}
	e.state.Store(&st)
	e.ver.Store(cur.Version)
	e.episodeAt = time.Time{}
	c.version.Add(1)
}

// applyLocally keeps a decision the store did not take in memory only and
// marks the row for Reconcile. Called with e.mu held.
func (c *Cooldowns) applyLocally(e *cooldownEntry, id string, st services.ConnectionState, why string) {
	st = cloneConnectionState(st)
	e.state.Store(&st)
	if !e.dirty {
		e.dirty = true
		c.dirty.Add(1)
	}
	c.version.Add(1)
	if why != "" {
		c.log.Warn("connection state applied locally", "connectionId", id, "why", why)
	}
}

// noteDiagnostics records a diagnostics-only change (a failure absorbed by
// a running episode): in memory at once, in the store at most once per
// diagnosticsInterval, without a version or a notification. Called with
// e.mu held.
func (c *Cooldowns) noteDiagnostics(ctx context.Context, e *cooldownEntry, id string, st services.ConnectionState, now time.Time) {
	st = cloneConnectionState(st)
	e.state.Store(&st)
	if e.dirty {
		return // Reconcile writes the whole row
	}
	if !e.lastWrite.IsZero() && now.Sub(e.lastWrite) < diagnosticsInterval || c.guard.down(now) {
		if !e.diag {
			e.diag = true
			c.pending.Add(1)
		}
		return
	}
	_ = c.writeDiagnostics(ctx, e, id, st, now)
}

func (c *Cooldowns) writeDiagnostics(ctx context.Context, e *cooldownEntry, id string, st services.ConnectionState, now time.Time) error {
	wctx, cancel := decisionContext(ctx)
	err := c.store.SaveDiagnostics(wctx, id, st)
	cancel()
	if err != nil {
		c.guard.trip(now)
		c.log.Warn("persist connection diagnostics", "connectionId", id, "err", err)
		if !e.diag {
			e.diag = true
			c.pending.Add(1)
		}
		return fmt.Errorf("resilience: diagnostics of connection %s: %w", id, err)
	}
	c.clearDiag(e)
	e.lastWrite = now
	// The other replicas learn the later last error too (at most once per
	// second per connection, like the write): it is not a decision, but
	// the next one reads it (the backoff ladder restarts after a quiet
	// period measured from last_error_at).
	c.pub.publish(ctx, services.Change{Kind: services.ChangeConnectionState, Key: id, Version: e.ver.Load(), Payload: encodeDiagnostics(st)})
	return nil
}

func (c *Cooldowns) clearDiag(e *cooldownEntry) {
	if e.diag {
		e.diag = false
		c.pending.Add(-1)
	}
	e.diagSeen = false
}

// enteredTerminal logs a connection that entered a terminal state through
// this replica's decision and, for banned with autoDisableBannedAccounts,
// switches it off.
func (c *Cooldowns) enteredTerminal(ctx context.Context, info ConnInfo, old, st services.ConnectionState) {
	if st.TerminalStatus == "" || old.TerminalStatus != "" {
		return
	}
	c.log.Warn("connection entered a terminal state", "connectionId", info.ID, "provider", info.Provider,
		"terminal", st.TerminalStatus, "reason", st.LastErrorReason, "status", st.LastErrorStatus)
	if st.TerminalStatus == TerminalBanned && info.AutoDisableBanned {
		wctx, cancel := decisionContext(ctx)
		defer cancel()
		if err := c.store.SetEnabled(wctx, info.ID, false); err != nil {
			c.log.Error("auto-disable banned connection", "connectionId", info.ID, "err", err)
		}
	}
}

// dropGone forgets a connection the store no longer has. Called with e.mu held.
func (c *Cooldowns) dropGone(id string, e *cooldownEntry) {
	e.gone = true
	if e.dirty {
		e.dirty = false
		c.dirty.Add(-1)
	}
	c.clearDiag(e)
	c.entries.CompareAndDelete(id, e)
	c.version.Add(1)
}
