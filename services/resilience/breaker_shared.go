package resilience

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"switchyard/services"
)

// The persistent and fleet side of Breakers (breaker.go): restoring and
// flushing the rows, the compare-and-set against the store, reconciling the
// mirror with the stored row, and following other replicas through the
// change feed (ChangeBreaker).

// Restore loads the stored breakers into memory. Call it once before
// serving. An OPEN breaker keeps its openedAt, so it turns HALF_OPEN on the
// first read after its reset time, downtime included. A restored HALF_OPEN
// breaker gets a fresh probe allowance unless Fleet is set (then the
// probes other replicas hold stay counted until they lapse).
func (r *Breakers) Restore(ctx context.Context) error {
	snaps, err := r.store.LoadBreakers(ctx)
	if err != nil {
		return fmt.Errorf("resilience: restore breakers: %w", err)
	}
	for _, s := range snaps {
		st, ok := breakerStateCode(s.State)
		if !ok || s.Name == "" {
			r.log.Warn("breaker row ignored", "provider", s.Name, "state", s.State)
			continue
		}
		if st == brkClosed && s.FailureCount <= 0 {
			continue
		}
		if st == brkHalfOpen && s.HalfOpenInFlight > 0 && !r.Fleet {
			fresh := s
			fresh.HalfOpenInFlight, fresh.ProbeUntil = 0, time.Time{}
			if _, _, _, err := r.store.CompareAndSaveBreaker(ctx, s.Generation, s.FailureCount, fresh); err != nil {
				return fmt.Errorf("resilience: restore breakers: %w", err)
			}
			s = fresh
		}
		b := r.getOrCreate(s.Name, s.Profile)
		b.mu.Lock()
		r.followLocked(b, s, true)
		b.dirty.Store(false)
		b.mu.Unlock()
	}
	return nil
}

// Flush writes every batched success leak and reconciles the breakers
// applied locally while the store was unreachable. The app runs it every
// second and at shutdown.
func (r *Breakers) Flush(ctx context.Context) error {
	now := r.clock.Now()
	reg := *r.reg.Load()
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(reg)) {
		b := reg[name]
		b.mu.Lock()
		idle := b.pendingLeak == 0 && !b.dirty.Load()
		b.mu.Unlock()
		if idle {
			continue
		}
		b.opMu.Lock()
		if err := r.flushLeak(ctx, b, now); err != nil {
			errs = append(errs, err)
		}
		if b.dirty.Load() {
			if err := r.reconcile(ctx, b, now); err != nil {
				errs = append(errs, err)
			}
		}
		b.opMu.Unlock()
	}
	return errors.Join(errs...)
}

// snapshotLocked is the mirror as a row; b.mu is held.
func (r *Breakers) snapshotLocked(b *breaker, now time.Time) BreakerSnapshot {
	st, gen := b.load()
	return BreakerSnapshot{
		Name:              b.name,
		Profile:           b.profile,
		State:             breakerStateName(st),
		FailureCount:      b.failureCount,
		OpenCycleCount:    b.openCycleCount,
		OpenedAt:          b.openedAt,
		LastFailureAt:     b.lastFailureAt,
		LastFailureReason: b.lastFailureReason,
		Generation:        gen,
		UpdatedAt:         now,
		HalfOpenInFlight:  b.halfOpenInFlight,
		ProbeUntil:        b.probeUntil,
	}
}

// followLocked sets the mirror to a stored row (found=false: there is
// none, so CLOSED with a zero count; a new generation when the mirror was
// OPEN or HALF_OPEN). Successes not yet leaked stay subtracted. b.mu is held.
func (r *Breakers) followLocked(b *breaker, s BreakerSnapshot, found bool) {
	st, gen := b.load()
	if !found {
		g := gen
		if st == brkOpen || st == brkHalfOpen {
			g++
		}
		s = BreakerSnapshot{Name: b.name, Profile: b.profile, State: BreakerClosed, Generation: g}
	}
	code, ok := breakerStateCode(s.State)
	if !ok {
		return
	}
	if s.Profile != "" {
		b.profile = s.Profile
	}
	if s.Generation&brkGenMask != gen {
		b.pendingLeak = 0
	}
	b.failureCount = max(s.FailureCount-b.pendingLeak, 0)
	b.count.Store(int64(b.failureCount))
	b.openCycleCount = max(s.OpenCycleCount, 0)
	b.openedAt, b.lastFailureAt, b.lastFailureReason = s.OpenedAt, s.LastFailureAt, s.LastFailureReason
	if code == brkOpen && b.openedAt.IsZero() {
		b.openedAt = s.UpdatedAt // a damaged row still reopens after one reset time
	}
	b.halfOpenInFlight, b.probeUntil = max(s.HalfOpenInFlight, 0), s.ProbeUntil
	b.open.Store(nil) // openedAt or the probes may differ under an unchanged word
	b.set(code, s.Generation)
}

// cas writes next over the row the mirror read at generation gen with
// count n. Written: the mirror takes next and every replica is told. A
// conflict: the mirror follows the stored row and cas reports false. A
// store error: next is kept in memory (dirty) and counts as written.
// Called with opMu held.
func (r *Breakers) cas(ctx context.Context, b *breaker, gen uint64, n int, next BreakerSnapshot, now time.Time) bool {
	if r.guard.down(now) {
		r.applyLocal(b, next)
		return true
	}
	wctx, cancel := decisionContext(ctx)
	cur, found, swapped, err := r.store.CompareAndSaveBreaker(wctx, gen, n, next)
	cancel()
	if err != nil {
		r.guard.trip(now)
		r.log.Warn("breaker kept in memory: store unavailable", "provider", b.name, "err", err)
		r.applyLocal(b, next)
		return true
	}
	r.guard.reset()
	b.mu.Lock()
	if swapped {
		r.followLocked(b, next, !next.gone())
	} else {
		r.followLocked(b, cur, found)
	}
	b.mu.Unlock()
	if swapped {
		r.publishRow(ctx, b.name, next, !next.gone())
	}
	return swapped
}

func (r *Breakers) applyLocal(b *breaker, next BreakerSnapshot) {
	b.mu.Lock()
	r.followLocked(b, next, !next.gone())
	b.dirty.Store(true)
	b.mu.Unlock()
}

// reconcile merges a breaker applied locally into the stored row without
// weakening it: an OPEN (or HALF_OPEN) row stays; a local OPEN over a
// CLOSED or DEGRADED row is written as a new generation; otherwise the
// higher count wins. Called with opMu held.
func (r *Breakers) reconcile(ctx context.Context, b *breaker, now time.Time) error {
	wctx, cancel := decisionContext(ctx)
	cur, found, err := r.store.LoadBreaker(wctx, b.name)
	cancel()
	if err != nil {
		r.guard.trip(now)
		return fmt.Errorf("resilience: reconcile breaker %s: %w", b.name, err)
	}
	b.mu.Lock()
	local := r.snapshotLocked(b, now)
	p := r.profileCfg(b.profile)
	b.mu.Unlock()
	merged, write := mergeBreaker(local, cur, found, p, now)
	if !write {
		b.mu.Lock()
		r.followLocked(b, cur, found)
		b.dirty.Store(false)
		b.mu.Unlock()
		return nil
	}
	if !found {
		wctx, cancel := decisionContext(ctx)
		err := r.store.SaveBreaker(wctx, merged)
		cancel()
		if err != nil {
			r.guard.trip(now)
			return fmt.Errorf("resilience: reconcile breaker %s: %w", b.name, err)
		}
		b.mu.Lock()
		r.followLocked(b, merged, true)
		b.dirty.Store(false)
		b.mu.Unlock()
		r.publishRow(ctx, b.name, merged, true)
		return nil
	}
	b.dirty.Store(false)
	if !r.cas(ctx, b, cur.Generation, cur.FailureCount, merged, now) {
		b.dirty.Store(true) // moved meanwhile: the next flush merges again
	}
	r.log.Info("breaker reconciled with the store", "provider", b.name, "state", merged.State)
	return nil
}

func mergeBreaker(local, stored BreakerSnapshot, found bool, p BreakerProfile, now time.Time) (BreakerSnapshot, bool) {
	if !found {
		return local, !local.gone()
	}
	if stored.State == BreakerOpen || stored.State == BreakerHalfOpen {
		return stored, false
	}
	m := stored
	m.UpdatedAt = now
	if local.State == BreakerOpen {
		m.State, m.Generation, m.OpenedAt = BreakerOpen, stored.Generation+1, local.OpenedAt
		m.FailureCount = max(stored.FailureCount, local.FailureCount)
		m.LastFailureAt, m.LastFailureReason = local.LastFailureAt, local.LastFailureReason
		return m, true
	}
	if local.FailureCount <= stored.FailureCount {
		return stored, false
	}
	m.FailureCount, m.LastFailureAt, m.LastFailureReason = local.FailureCount, local.LastFailureAt, local.LastFailureReason
	if next, _, _, ok := failureTransition(m, p, now); ok {
		m = next
	}
	return m, true
}

// UseFeed publishes this mirror's breaker changes on feed and applies the
// ones other replicas publish (ChangeBreaker).
func (r *Breakers) UseFeed(feed services.ChangeFeed) {
	r.pub.log = r.log
	r.pub.set(feed)
	feed.Subscribe(services.ChangeBreaker, r.onChange)
}

func (r *Breakers) publishRow(ctx context.Context, name string, s BreakerSnapshot, found bool) {
	r.pub.publish(ctx, services.Change{Kind: services.ChangeBreaker, Key: name, Version: int64(s.Generation & (1<<62 - 1)),
		Payload: encodeBreaker(s, found)})
}

func (r *Breakers) onChange(ctx context.Context, ch services.Change) error {
	if isOwn(ctx) {
		return nil // what this mirror decided and holds already
	}
	if ch.Key == "" {
		return r.Resync(ctx)
	}
	s, found, ok := decodeBreaker(ch.Payload)
	if !ok {
		return r.Resync(ctx)
	}
	s.Name = ch.Key
	b := r.lookup(ch.Key)
	if b == nil {
		if !found {
			return nil
		}
		b = r.getOrCreate(ch.Key, s.Profile)
	}
	b.mu.Lock()
	st, gen := b.load()
	switch {
	case s.Generation&brkGenMask < gen:
		b.mu.Unlock()
		return nil // older than the mirror
	case s.Generation&brkGenMask == gen && sameBreaker(r.snapshotLocked(b, s.UpdatedAt), s, found, st):
		b.mu.Unlock()
		return nil // what the mirror holds (in embedded mode: our own change)
	case s.Generation&brkGenMask > gen:
		r.followLocked(b, s, found) // a new generation is always newer
		b.mu.Unlock()
		return nil
	}
	b.mu.Unlock()
	// Same generation, other counts (failures, leaks, probes out): the
	// changes of two replicas may arrive in either order, so the payload
	// cannot say which is newer; the store can.
	r.followStored(ctx, b, s, found)
	return nil
}

// followStored brings the mirror to the stored row after a same-generation
// change from another replica. When one of this replica's own store calls
// on b is in progress (it holds opMu), that call follows the row it gets
// back, which is at least as new; so is the synchronous delivery of this
// replica's own publication, made under opMu. A store that cannot be read
// leaves the payload's row.
func (r *Breakers) followStored(ctx context.Context, b *breaker, s BreakerSnapshot, found bool) {
	if !b.opMu.TryLock() {
		return
	}
	defer b.opMu.Unlock()
	if !r.guard.down(r.clock.Now()) {
		rctx, cancel := decisionContext(ctx)
		row, ok, err := r.store.LoadBreaker(rctx, b.name)
		cancel()
		if err == nil {
			s, found = row, ok
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.dirty.Load() {
		return // a local decision waits for its reconcile
	}
	if _, gen := b.load(); found && s.Generation&brkGenMask < gen {
		return
	}
	r.followLocked(b, s, found)
}

// sameBreaker reports whether the mirror (as a row) already is s.
func sameBreaker(mine, s BreakerSnapshot, found bool, st uint64) bool {
	if !found {
		return st == brkClosed && mine.FailureCount == 0
	}
	return mine.State == s.State && mine.FailureCount == s.FailureCount && mine.OpenCycleCount == s.OpenCycleCount &&
		mine.OpenedAt.Equal(s.OpenedAt) && mine.HalfOpenInFlight == s.HalfOpenInFlight && mine.ProbeUntil.Equal(s.ProbeUntil)
}

// Resync reloads every stored breaker into the mirror (after lost
// notifications or a bulk reset); a breaker without a row is CLOSED.
func (r *Breakers) Resync(ctx context.Context) error {
	if err := r.Flush(ctx); err != nil {
		r.log.Warn("flush before resync", "err", err)
	}
	snaps, err := r.store.LoadBreakers(ctx)
	if err != nil {
		return fmt.Errorf("resilience: resync breakers: %w", err)
	}
	seen := make(map[string]bool, len(snaps))
	for _, s := range snaps {
		if _, ok := breakerStateCode(s.State); !ok || s.Name == "" {
			continue
		}
		seen[s.Name] = true
		b := r.getOrCreate(s.Name, s.Profile)
		b.mu.Lock()
		if !b.dirty.Load() {
			r.followLocked(b, s, true)
		}
		b.mu.Unlock()
	}
	for name, b := range *r.reg.Load() {
		if seen[name] {
			continue
		}
		b.mu.Lock()
		if !b.dirty.Load() {
			if st, _ := b.load(); st != brkClosed || b.failureCount != 0 {
				r.followLocked(b, BreakerSnapshot{}, false)
			}
		}
		b.mu.Unlock()
	}
	return nil
}

// breakerPayload is a breaker row on the change feed (epoch ms, short
// names); X marks a breaker without a row (CLOSED, count 0).
type breakerPayload struct {
	G  uint64 `json:"g"`
	S  string `json:"s,omitempty"`
	P  string `json:"p,omitempty"`
	N  int    `json:"n,omitempty"`
	C  int    `json:"c,omitempty"`
	O  int64  `json:"o,omitempty"`
	LF int64  `json:"lf,omitempty"`
	LR string `json:"lr,omitempty"`
	H  int    `json:"h,omitempty"`
	PU int64  `json:"pu,omitempty"`
	U  int64  `json:"u,omitempty"`
	X  bool   `json:"x,omitempty"`
}

func msOrZero(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

func timeOrZero(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms).UTC()
}

func encodeBreaker(s BreakerSnapshot, found bool) string {
	p := breakerPayload{G: s.Generation, P: string(s.Profile), U: msOrZero(s.UpdatedAt), X: !found}
	if found {
		p.S, p.N, p.C, p.O = string(s.State), s.FailureCount, s.OpenCycleCount, msOrZero(s.OpenedAt)
		p.LF, p.LR, p.H, p.PU = msOrZero(s.LastFailureAt), s.LastFailureReason, s.HalfOpenInFlight, msOrZero(s.ProbeUntil)
	}
	b, _ := json.Marshal(p)
	return string(b)
}

func decodeBreaker(payload string) (s BreakerSnapshot, found, ok bool) {
	var p breakerPayload
	if payload == "" || json.Unmarshal([]byte(payload), &p) != nil {
		return BreakerSnapshot{}, false, false
	}
	s = BreakerSnapshot{Generation: p.G, Profile: Profile(p.P), UpdatedAt: timeOrZero(p.U), State: BreakerClosed}
	if p.X {
		return s, false, true
	}
	s.State, s.FailureCount, s.OpenCycleCount, s.OpenedAt = BreakerState(p.S), p.N, p.C, timeOrZero(p.O)
	s.LastFailureAt, s.LastFailureReason, s.HalfOpenInFlight, s.ProbeUntil = timeOrZero(p.LF), p.LR, p.H, timeOrZero(p.PU)
	return s, true, true
}
