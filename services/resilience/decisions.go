package resilience

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"time"

	"switchyard/services"
)

// Decisions shared by a fleet (scale-out §3.3–§3.5). Every replica runs the
// state machines of this package on its own mirror (memory, read lock-free
// by the request path) and writes each decision to the store with a
// compare-and-set on the row's version (connections.state_version,
// model_lockouts.version, the breaker's generation). A conflict means
// another replica decided first: the row is re-read into the mirror and the
// decision recomputed from it — usually it is now "already cooling", and the
// failure is absorbed — at most casAttempts times, after which the decision
// is applied locally and logged. A decision that only restates diagnostics
// (last_error*, a lockout's last failure) writes no version, publishes
// nothing and is coalesced to one write per second per row.
//
// Each written decision is published on the change feed with its new
// version and a payload that carries the decided fields, so the other
// replicas update their mirrors without a re-read, through the methods that
// bump the mirror's version counter (the gateway's pick cache follows it).
// A change whose version the mirror already holds — in embedded mode every
// change, which the local feed hands back to the process that made it — is
// dropped after one atomic load.
//
// When the store cannot be written, the decision is applied locally (the
// embedded mode's behaviour on a failed write), the row joins a dirty set
// and later writes skip the store for storeRetryAfter; Reconcile merges the
// dirty rows into the store, extend-only (a later deadline, a higher level,
// a terminal state win), once it answers again.

const (
	// casAttempts bounds the compare-and-set attempts of one decision.
	casAttempts = 3
	// diagnosticsInterval bounds diagnostics-only writes per row.
	diagnosticsInterval = time.Second
	// storeRetryAfter is how long decisions skip a store that just failed.
	storeRetryAfter = 2 * time.Second
	// decisionTimeout bounds one store call of a decision, so a store that
	// hangs delays a failing request by at most this much.
	decisionTimeout = 2 * time.Second
	// maxPayloadBytes keeps a change's payload well under PostgreSQL's
	// 8000-byte NOTIFY limit once the feed wraps and escapes it.
	maxPayloadBytes = 3000
)

// storeGuard remembers a failed store write for storeRetryAfter, so a store
// that is down costs one timeout, not one per failing request.
type storeGuard struct {
	until atomic.Int64 // unix ms before which the store is not tried
}

func (g *storeGuard) down(now time.Time) bool { return now.UnixMilli() < g.until.Load() }

func (g *storeGuard) trip(now time.Time) { g.until.Store(now.Add(storeRetryAfter).UnixMilli()) }

func (g *storeGuard) reset() { g.until.Store(0) }

// decisionContext detaches a decision's store call from the request (a
// penalty decided must survive a client that left) and bounds it.
func decisionContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), decisionTimeout)
}

// publisher sends decisions on the change feed; the zero value publishes
// nothing (no feed wired).
type publisher struct {
	feed atomic.Pointer[feedRef]
	log  *slog.Logger
}

type feedRef struct{ f services.ChangeFeed }

func (p *publisher) set(f services.ChangeFeed) { p.feed.Store(&feedRef{f}) }

// publish sends c; a feed that cannot reach the other replicas is logged
// (they catch up at their next resync).
func (p *publisher) publish(ctx context.Context, c services.Change) {
	ref := p.feed.Load()
	if ref == nil || ref.f == nil {
		return
	}
	if err := ref.f.Publish(context.WithValue(context.WithoutCancel(ctx), ownChange{}, true), c); err != nil && p.log != nil {
		p.log.Warn("decision not published", "change", c.Kind, "key", c.Key, "version", c.Version, "err", err)
	}
}

// ownChange marks the context of this process's own publications. The feed
// hands them to the local subscribers synchronously, while the publisher
// may hold the very locks those subscribers take (a lockout clear holds
// every writer out); the mirror already holds what it published, so the
// subscribers return at once (isOwn).
type ownChange struct{}

// isOwn reports whether ctx is that of this process's own publication.
func isOwn(ctx context.Context) bool { return ctx.Value(ownChange{}) != nil }

// UseFeed makes the engine's decisions fleet-wide: every decision is
// published on feed, and the decisions other replicas publish are applied
// to this engine's mirrors. Call it once, before serving.
func (e *Engine) UseFeed(feed services.ChangeFeed) {
	e.Cooldowns.UseFeed(feed)
	e.Lockouts.UseFeed(feed)
	e.Breakers.UseFeed(feed)
}

// FlushDecisions writes what the decisions deferred: coalesced diagnostics,
// batched breaker leaks, and the rows applied locally while the store was
// unreachable (merged extend-only). The app runs it every second and at
// shutdown (force: every pending diagnostic regardless of its age).
func (e *Engine) FlushDecisions(ctx context.Context, force bool) error {
	return errors.Join(
		e.Cooldowns.Flush(ctx, force),
		e.Lockouts.Flush(ctx, force),
		e.Breakers.Flush(ctx),
	)
}

// msOf is t in epoch ms, nil for nil.
func msOf(t *time.Time) *int64 {
	if t == nil {
		return nil
	}
	v := t.UnixMilli()
	return &v
}

// timeOfMs is the UTC instant of ms, nil for nil.
func timeOfMs(v *int64) *time.Time {
	if v == nil {
		return nil
	}
	t := time.UnixMilli(*v).UTC()
	return &t
}
