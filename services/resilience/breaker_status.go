package resilience

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"switchyard/services"
	"switchyard/services/events"
)

// What the pages, the API and health read of the breakers, and the admin
// resets (20-resilience §2.4).

// BreakerStatus is what health and runtime pages show for one breaker. Reads
// refresh it against the clock first, so an OPEN breaker whose reset time has
// passed is reported HALF_OPEN.
type BreakerStatus struct {
	Provider             string       `json:"provider"`
	Profile              Profile      `json:"profile"`
	State                BreakerState `json:"state"`
	FailureCount         int          `json:"failureCount"`
	DegradationThreshold int          `json:"degradationThreshold"`
	FailureThreshold     int          `json:"failureThreshold"`
	OpenCycleCount       int          `json:"openCycleCount"`
	// EffectiveResetMs is the OPEN duration of the current cycle, escalated
	// after escalateAfterCycles re-opens.
	EffectiveResetMs int64 `json:"effectiveResetMs"`
	// RetryAfterMs is the remaining OPEN time (rounded up), 1000 when
	// HALF_OPEN without a free probe slot, else 0.
	RetryAfterMs      int64      `json:"retryAfterMs"`
	OpenedAt          *time.Time `json:"openedAt"`
	LastFailureAt     *time.Time `json:"lastFailureAt"`
	LastFailureReason string     `json:"lastFailureReason"`
	HalfOpenInFlight  int        `json:"-"`
	HalfOpenRequests  int        `json:"-"`
	Generation        uint64     `json:"-"`
}

// Status reports one breaker, refreshed against the clock (an elapsed OPEN
// turns HALF_OPEN here too). A provider without a breaker is CLOSED with zero
// counters; its thresholds are unknown (zero) because its profile is.
func (r *Breakers) Status(provider string) BreakerStatus {
	b := r.lookup(provider)
	if b == nil {
		return BreakerStatus{Provider: provider, State: BreakerClosed}
	}
	return r.status(b, r.clock.Now())
}

func (r *Breakers) status(b *breaker, now time.Time) BreakerStatus {
	r.refresh(b, now)
	b.mu.Lock()
	defer b.mu.Unlock()
	p := r.profileCfg(b.profile)
	st, gen := b.load()
	eff := effectiveResetMs(p, b.openCycleCount)
	s := BreakerStatus{
		Provider:             b.name,
		Profile:              b.profile,
		State:                breakerStateName(st),
		FailureCount:         b.failureCount,
		DegradationThreshold: p.Degradation(),
		FailureThreshold:     p.FailureThreshold,
		OpenCycleCount:       b.openCycleCount,
		EffectiveResetMs:     eff,
		LastFailureReason:    b.lastFailureReason,
		HalfOpenInFlight:     b.halfOpenInFlight,
		HalfOpenRequests:     p.HalfOpenRequests,
		Generation:           gen,
	}
	switch st {
	case brkOpen:
		s.RetryAfterMs = max(durationCeilMs(b.openedAt.Add(time.Duration(eff)*time.Millisecond).Sub(now)), 1)
	case brkHalfOpen:
		if b.halfOpenInFlight >= p.HalfOpenRequests && (b.probeUntil.IsZero() || now.Before(b.probeUntil)) {
			s.RetryAfterMs = breakerHalfOpenBusyRetry.Milliseconds()
		}
	}
	if !b.openedAt.IsZero() {
		t := b.openedAt
		s.OpenedAt = &t
	}
	if !b.lastFailureAt.IsZero() {
		t := b.lastFailureAt
		s.LastFailureAt = &t
	}
	return s
}

// All reports every breaker that is not CLOSED with a zero count (the ones
// that have a row), sorted by provider id.
func (r *Breakers) All() []BreakerStatus {
	now := r.clock.Now()
	reg := *r.reg.Load()
	out := make([]BreakerStatus, 0, len(reg))
	for _, b := range reg {
		if st, _ := b.load(); st == brkClosed && b.count.Load() == 0 {
			continue
		}
		s := r.status(b, now)
		if s.State == BreakerClosed && s.FailureCount == 0 {
			continue
		}
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b BreakerStatus) int { return cmp.Compare(a.Provider, b.Provider) })
	return out
}

// resetBreakerLocked sets CLOSED with zero counters and a new generation, so
// outcomes of requests admitted before the reset are ignored. It reports
// whether the breaker held any state.
func resetBreakerLocked(b *breaker) (had bool, was uint64) {
	st, gen := b.load()
	had = st != brkClosed || b.failureCount != 0
	b.set(brkClosed, gen+1)
	b.failureCount, b.openCycleCount, b.halfOpenInFlight, b.pendingLeak = 0, 0, 0, 0
	b.open.Store(nil) // fewer probes out: no longer busy
	b.count.Store(0)
	b.dirty.Store(false)
	b.openedAt, b.lastFailureAt, b.lastFailureReason, b.probeUntil = time.Time{}, time.Time{}, "", time.Time{}
	return had, st
}

// Reset sets provider's breaker CLOSED with zero counters and deletes its
// row; every replica follows. Idempotent; an unknown provider is not an
// error.
func (r *Breakers) Reset(ctx context.Context, provider string) error {
	b := r.lookup(provider)
	if b == nil {
		if err := r.store.DeleteBreaker(ctx, provider); err != nil {
			return fmt.Errorf("resilience: reset breaker %s: %w", provider, err)
		}
		return nil
	}
	b.opMu.Lock()
	defer b.opMu.Unlock()
	now := r.clock.Now()
	b.mu.Lock()
	had, was := resetBreakerLocked(b)
	if had {
		r.log.Info("breaker reset", "provider", provider)
	}
	snap := r.snapshotLocked(b, now)
	b.mu.Unlock()
	if err := r.store.DeleteBreaker(ctx, provider); err != nil {
		b.dirty.Store(true)
		return fmt.Errorf("resilience: reset breaker %s: %w", provider, err)
	}
	r.publishRow(ctx, provider, snap, false)
	r.recordReset(ctx, provider, was)
	return nil
}

// ResetAll sets every breaker CLOSED with zero counters and deletes every
// row; every replica follows. It returns how many breakers held state.
func (r *Breakers) ResetAll(ctx context.Context) (int, error) {
	reg := *r.reg.Load()
	names := slices.Sorted(maps.Keys(reg))
	// Every store call of these breakers waits (opMu, in name order; no
	// other path holds two), so none lands after the bulk delete.
	for _, name := range names {
		reg[name].opMu.Lock()
	}
	n := 0
	was := make([]uint64, len(names))
	for i, name := range names {
		b := reg[name]
		b.mu.Lock()
		var had bool
		if had, was[i] = resetBreakerLocked(b); had {
			n++
		}
		b.mu.Unlock()
	}
	err := r.store.DeleteAllBreakers(ctx)
	for _, name := range names {
		if err != nil {
			reg[name].dirty.Store(true)
		}
		reg[name].opMu.Unlock()
	}
	if n > 0 {
		r.log.Info("breakers reset", "count", n)
	}
	if err != nil {
		return n, fmt.Errorf("resilience: reset breakers: %w", err)
	}
	// The other replicas reload: rows they hold and this one does not are
	// gone too.
	r.pub.publish(ctx, services.Change{Kind: services.ChangeBreaker})
	for i, name := range names {
		r.recordReset(ctx, name, was[i])
	}
	return n, nil
}

// recordReset records the admin closing a breaker that was not closed.
func (r *Breakers) recordReset(ctx context.Context, provider string, was uint64) {
	if r.Events != nil && was != brkClosed {
		r.Events.Record(events.Event{Type: events.BreakerClosed, Provider: provider, Cause: events.CauseAdmin, Actor: events.ActorOf(ctx)})
	}
}
