package resilience

import (
	"context"
	"fmt"
	"time"
)

// What a request's outcome does to its provider's breaker
// (20-resilience §2): a success leaks the failure count (batched per second
// across the fleet) and closes a HALF_OPEN breaker, a counted failure adds to
// the store's count and opens or re-opens it, an unused probe is given back.

// Success records a successful outcome (2xx, or the first useful stream byte)
// of a request admitted at generation gen. A probe success closes a HALF_OPEN
// breaker with zero counters; otherwise a CLOSED or DEGRADED breaker leaks one
// failure (batched: the store learns the leak at most once per second, or at
// once when it ends DEGRADED). Outcomes of an older generation are ignored.
func (r *Breakers) Success(provider string, gen uint64, probe bool) {
	b := r.lookup(provider)
	if b == nil {
		return
	}
	if st, cur := b.load(); cur != gen || (st == brkClosed && b.count.Load() == 0 && !b.dirty.Load()) {
		return // stale, or nothing to leak: the common case stays lock-free
	}
	ctx := context.Background()
	now := r.clock.Now()
	if probe {
		b.opMu.Lock()
		defer b.opMu.Unlock()
		b.mu.Lock()
		st, cur := b.load()
		if st != brkHalfOpen || cur != gen {
			b.mu.Unlock()
			return
		}
		next := r.snapshotLocked(b, now)
		next.State, next.Generation = BreakerClosed, cur+1
		next.FailureCount, next.OpenCycleCount, next.OpenedAt, next.HalfOpenInFlight, next.ProbeUntil = 0, 0, time.Time{}, 0, time.Time{}
		n := b.failureCount
		b.mu.Unlock()
		if r.cas(ctx, b, cur, n, next, now) {
			r.logTransition(provider, brkHalfOpen, brkClosed, next)
		}
		return
	}
	b.mu.Lock()
	st, cur := b.load()
	if cur != gen || (st != brkClosed && st != brkDegraded) || b.failureCount == 0 {
		b.mu.Unlock()
		return
	}
	b.failureCount--
	b.count.Store(int64(b.failureCount))
	b.pendingLeak++
	p := r.profileCfg(b.profile)
	due := st == brkDegraded && b.failureCount < p.Degradation() ||
		b.lastLeak.IsZero() || now.Sub(b.lastLeak) >= breakerLeakInterval
	b.mu.Unlock()
	if due {
		b.opMu.Lock()
		_ = r.flushLeak(ctx, b, now)
		b.opMu.Unlock()
	}
}

// flushLeak writes the batched success leak of b and the DEGRADED → CLOSED
// transition it may cause. Called with opMu held.
func (r *Breakers) flushLeak(ctx context.Context, b *breaker, now time.Time) error {
	b.mu.Lock()
	n := b.pendingLeak
	st, gen := b.load()
	if n == 0 || st != brkClosed && st != brkDegraded || r.guard.down(now) {
		if st != brkClosed && st != brkDegraded {
			b.pendingLeak = 0 // a transition made the leak moot
		}
		b.mu.Unlock()
		return nil
	}
	b.pendingLeak, b.lastLeak = 0, now
	p := r.profileCfg(b.profile)
	b.mu.Unlock()
	wctx, cancel := decisionContext(ctx)
	row, found, err := r.store.LeakBreaker(wctx, b.name, gen, n, now)
	cancel()
	if err != nil {
		r.guard.trip(now)
		b.mu.Lock()
		b.pendingLeak += n
		b.mu.Unlock()
		return fmt.Errorf("resilience: leak breaker %s: %w", b.name, err)
	}
	r.guard.reset()
	if !found {
		// The leak emptied a CLOSED row (deleted): the others hear of it at
		// this generation, not at a zero row's.
		row = BreakerSnapshot{Name: b.name, Profile: b.profile, State: BreakerClosed, Generation: gen, UpdatedAt: now}
	}
	b.mu.Lock()
	r.followLocked(b, row, found)
	b.mu.Unlock()
	if found && row.State == BreakerDegraded && row.FailureCount < p.Degradation() {
		next := row
		next.State, next.UpdatedAt = BreakerClosed, now
		if r.cas(ctx, b, row.Generation, row.FailureCount, next, now) {
			r.logTransition(b.name, brkDegraded, brkClosed, next)
		}
		return nil
	}
	r.publishRow(ctx, b.name, row, found)
	return nil
}

// Failure records a failed outcome of a request admitted at generation gen.
//
//   - counted: the failure feeds the breaker (20-resilience §1.4).
//   - newEpisode: the failure opened a new penalty episode (its connection was
//     not cooling, its model key not locked); scope-none failures pass true.
//     A counted failure outside a new episode changes nothing (BD 3).
//   - probe: the request was admitted as the HALF_OPEN probe. A counted probe
//     failure re-opens the breaker with openCycleCount+1 whatever newEpisode
//     says; an uncounted one (429, other 4xx, abort, local limit) frees the
//     probe slot like ReleaseProbe, with no transition.
//
// Outcomes of an older generation are ignored. A counted failure is added
// to the store's count at once, and the transition it causes is decided on
// the count the store returns.
func (r *Breakers) Failure(provider string, profile Profile, gen uint64, probe, counted, newEpisode bool, reason string) (opened bool) {
	if !counted {
		if probe {
			r.ReleaseProbe(provider, gen)
		}
		return false
	}
	if !probe && !newEpisode {
		return false
	}
	b := r.getOrCreate(provider, profile)
	b.opMu.Lock()
	defer b.opMu.Unlock()
	ctx := context.Background()
	now := r.clock.Now()
	b.mu.Lock()
	if profile != "" {
		b.profile = profile
	}
	p := r.profileCfg(b.profile)
	st, cur := b.load()
	if cur != gen {
		b.mu.Unlock()
		return false
	}
	switch {
	case probe && st == brkHalfOpen:
		next := r.snapshotLocked(b, now)
		next.State, next.Generation = BreakerOpen, cur+1
		next.OpenCycleCount++
		next.OpenedAt, next.LastFailureAt, next.LastFailureReason = now, now, reason
		next.HalfOpenInFlight, next.ProbeUntil = 0, time.Time{}
		n := b.failureCount
		b.mu.Unlock()
		if r.cas(ctx, b, cur, n, next, now) {
			r.logTransition(provider, brkHalfOpen, brkOpen, next)
			return true
		}
		return false
	case !probe && (st == brkClosed || st == brkDegraded):
		snap := r.snapshotLocked(b, now)
		snap.LastFailureAt, snap.LastFailureReason = now, reason
		b.mu.Unlock()
		return r.countFailure(ctx, b, snap, p, now)
	default:
		b.mu.Unlock()
	}
	return false
}

// countFailure adds one counted failure in the store and writes the
// transition the returned count calls for, and reports whether this
// replica opened the breaker. Called with opMu held.
func (r *Breakers) countFailure(ctx context.Context, b *breaker, snap BreakerSnapshot, p BreakerProfile, now time.Time) (opened bool) {
	if r.guard.down(now) {
		return r.localFailure(b, snap, p, now)
	}
	// The transition is decided on the store's count: give it this
	// replica's batched leak first.
	b.mu.Lock()
	pending := b.pendingLeak > 0
	b.mu.Unlock()
	if pending {
		_ = r.flushLeak(ctx, b, now)
	}
	wctx, cancel := decisionContext(ctx)
	row, counted, err := r.store.CountBreakerFailure(wctx, snap)
	cancel()
	if err != nil {
		r.guard.trip(now)
		r.log.Warn("breaker failure kept in memory: store unavailable", "provider", b.name, "err", err)
		return r.localFailure(b, snap, p, now)
	}
	r.guard.reset()
	b.mu.Lock()
	r.followLocked(b, row, true)
	b.mu.Unlock()
	if !counted {
		return false // the fleet moved to another generation: this outcome is stale
	}
	for range casAttempts {
		next, from, to, ok := failureTransition(row, p, now)
		if !ok {
			r.publishRow(ctx, b.name, row, true)
			return false
		}
		if r.cas(ctx, b, row.Generation, row.FailureCount, next, now) {
			r.logTransition(b.name, from, to, next)
			return to == brkOpen
		}
		// The row moved (another replica counted or transitioned): decide
		// again on what it holds now.
		b.mu.Lock()
		st, gen := b.load()
		row = r.snapshotLocked(b, now)
		b.mu.Unlock()
		if (st != brkClosed && st != brkDegraded) || gen != snap.Generation {
			return false
		}
	}
	return false
}

// failureTransition is the transition a CLOSED or DEGRADED row with the
// given count calls for (§2.1), if any.
func failureTransition(row BreakerSnapshot, p BreakerProfile, now time.Time) (next BreakerSnapshot, from, to uint64, ok bool) {
	from, _ = breakerStateCode(row.State)
	next = row
	next.UpdatedAt = now
	switch {
	case from != brkClosed && from != brkDegraded:
		return next, from, from, false
	case row.FailureCount >= p.FailureThreshold:
		next.State, next.Generation, next.OpenedAt = BreakerOpen, row.Generation+1, now
		next.HalfOpenInFlight, next.ProbeUntil = 0, time.Time{}
		return next, from, brkOpen, true
	case from == brkClosed && row.FailureCount >= p.Degradation():
		next.State = BreakerDegraded
		return next, from, brkDegraded, true
	}
	return next, from, from, false
}

// localFailure is a counted failure decided in memory alone (the store is
// unreachable): the single-process rules, reconciled later. It reports
// whether it opened the breaker.
func (r *Breakers) localFailure(b *breaker, snap BreakerSnapshot, p BreakerProfile, now time.Time) (opened bool) {
	b.mu.Lock()
	st, cur := b.load()
	if cur != snap.Generation || st != brkClosed && st != brkDegraded {
		b.mu.Unlock()
		return false
	}
	b.failureCount++
	b.count.Store(int64(b.failureCount))
	b.lastFailureAt, b.lastFailureReason = snap.LastFailureAt, snap.LastFailureReason
	next, from, to, ok := failureTransition(r.snapshotLocked(b, now), p, now)
	if ok {
		r.followLocked(b, next, true)
	}
	b.dirty.Store(true)
	b.mu.Unlock()
	if ok {
		r.logTransition(b.name, from, to, next)
	}
	return ok && to == brkOpen
}

// ReleaseProbe frees the probe slot of a request admitted as probe at
// generation gen that ended without a verdict on the provider (429, other
// 4xx, client abort, local limit, or never dispatched). No transition.
func (r *Breakers) ReleaseProbe(provider string, gen uint64) {
	b := r.lookup(provider)
	if b == nil {
		return
	}
	b.opMu.Lock()
	defer b.opMu.Unlock()
	// The mirror's probe count is the fleet's (other replicas' probes
	// included, possibly behind), so it does not decide whether this
	// probe goes back to the store: the store only takes back what is out.
	b.mu.Lock()
	st, cur := b.load()
	ok := st == brkHalfOpen && cur == gen
	b.mu.Unlock()
	if !ok {
		return
	}
	now := r.clock.Now()
	if !r.guard.down(now) {
		wctx, cancel := decisionContext(context.Background())
		row, found, err := r.store.ReleaseBreakerProbe(wctx, b.name, gen)
		cancel()
		if err == nil {
			b.mu.Lock()
			r.followLocked(b, row, found)
			b.open.Store(nil) // fewer probes out: no longer busy
			b.mu.Unlock()
			if found && row.Generation == gen {
				r.publishRow(context.Background(), b.name, row, found)
			}
			return
		}
		r.guard.trip(now)
	}
	b.mu.Lock()
	if st, cur := b.load(); st == brkHalfOpen && cur == gen && b.halfOpenInFlight > 0 {
		b.halfOpenInFlight--
		b.open.Store(nil)
	}
	b.mu.Unlock()
}
