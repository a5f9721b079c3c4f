package resilience

import (
	"context"
	"errors"

	"switchyard/services"
)

// Admin actions (40-admin-api §3, 50-dashboard §6.4, §6.8). The management
// API and the dashboard call these, so an action and its twin always do the
// same thing.

// ResetBreakers closes every breaker and deletes their rows; it returns how
// many held state.
func (e *Engine) ResetBreakers(ctx context.Context) (int, error) { return e.Breakers.ResetAll(ctx) }

// ResetBreaker closes one provider's breaker; idempotent.
func (e *Engine) ResetBreaker(ctx context.Context, provider string) error {
	return e.Breakers.Reset(ctx, provider)
}

// ClearWindowGate drops every window-gate entry and returns how many were
// cooling or held failures.
func (e *Engine) ClearWindowGate(ctx context.Context) (int, error) { return e.Gate.Clear(ctx) }

// ClearLockouts removes the model lockouts the filter selects (every key
// shape) and returns how many were active.
func (e *Engine) ClearLockouts(ctx context.Context, f LockFilter) (int, error) {
	return e.Lockouts.Clear(ctx, f)
}

// ClearCooldowns clears the cooldowns of conns as a success would, skipping
// terminal connections, then the model lockouts and window-gate entries of
// every non-terminal one (POST /api/resilience/cooldowns). It returns the
// sorted ids and how many lockouts it removed.
func (e *Engine) ClearCooldowns(ctx context.Context, conns []services.Connection) (ClearCooldownsResult, int, error) {
	ids := make([]string, len(conns))
	for i, c := range conns {
		ids[i] = c.ID
	}
	res, err := e.Cooldowns.ClearCooldownsDetailed(ctx, ids)
	if err != nil {
		return res, 0, err
	}
	terminal := make(map[string]bool, len(res.SkippedTerminal))
	for _, id := range res.SkippedTerminal {
		terminal[id] = true
	}
	locks := 0
	for _, c := range conns {
		if terminal[c.ID] {
			continue
		}
		n, err := e.Lockouts.Clear(ctx, LockFilter{ConnectionID: c.ID})
		if err != nil {
			return res, locks, err
		}
		locks += n
		if err := e.Gate.Success(ctx, c.Provider, c.ID); err != nil {
			return res, locks, err
		}
	}
	return res, locks, nil
}

// ResetConnection clears the cooldown, backoff, counters and terminal state
// of c (BD 4), and with lockouts also its model lockouts and window-gate
// entry (POST /api/connections/{id}/reset). A connection deleted meanwhile
// is not an error.
func (e *Engine) ResetConnection(ctx context.Context, c services.Connection, lockouts bool) error {
	if err := e.Cooldowns.Reset(ctx, c.ID); err != nil && !errors.Is(err, services.ErrNotFound) {
		return err
	}
	if !lockouts {
		return nil
	}
	if _, err := e.Lockouts.Clear(ctx, LockFilter{ConnectionID: c.ID}); err != nil {
		return err
	}
	return e.Gate.Success(ctx, c.Provider, c.ID)
}

// ResetState clears a connection's cooldown state only: new credentials
// end a terminal state (BD 4).
func (e *Engine) ResetState(ctx context.Context, id string) error { return e.Cooldowns.Reset(ctx, id) }

// ForgetConnection drops everything the engine holds for a deleted
// connection: its lockouts (rows too) and its cooldown state. The writer of
// the delete runs it once.
func (e *Engine) ForgetConnection(ctx context.Context, id string) error {
	err := e.Lockouts.ForgetConnection(ctx, id)
	e.Cooldowns.Forget(id)
	return err
}

// DropConnection forgets the cooldown state of a connection deleted by any
// process, in memory only: the change feed runs it everywhere, after the
// writer's ForgetConnection deleted the rows.
func (e *Engine) DropConnection(id string) { e.Cooldowns.Forget(id) }

// ActiveLockouts counts the active model lockouts (enforced or not).
func (e *Engine) ActiveLockouts() int { return e.Lockouts.Count() }

// Flush writes everything the decisions deferred (at shutdown): coalesced
// diagnostics, batched breaker leaks, rows applied locally.
func (e *Engine) Flush(ctx context.Context) error { return e.FlushDecisions(ctx, true) }
