package resilience

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"switchyard/services"
)

// BreakerState is the state of a provider circuit breaker (20-resilience §2).
type BreakerState string

// Breaker states. DEGRADED and HALF_OPEN never exclude by themselves;
// health-scoring strategies penalise them.
const (
	BreakerClosed   BreakerState = "CLOSED"
	BreakerDegraded BreakerState = "DEGRADED"
	BreakerOpen     BreakerState = "OPEN"
	BreakerHalfOpen BreakerState = "HALF_OPEN"
)

// BreakerSnapshot is the persisted form of one breaker
// (domain_circuit_breakers). Zero times mean "not set" (NULL).
type BreakerSnapshot struct {
	Name              string // canonical provider id
	Profile           Profile
	State             BreakerState
	FailureCount      int
	OpenCycleCount    int
	OpenedAt          time.Time
	LastFailureAt     time.Time
	LastFailureReason string
	Generation        uint64
	UpdatedAt         time.Time
}

// BreakerStore persists breakers. Memory stays authoritative for reads; the
// store only has to bring the state back after a restart.
type BreakerStore interface {
	LoadBreakers(ctx context.Context) ([]BreakerSnapshot, error)
	// SaveBreaker inserts or replaces the row named s.Name.
	SaveBreaker(ctx context.Context, s BreakerSnapshot) error
	// DeleteBreaker removes one row; a missing row is not an error.
	DeleteBreaker(ctx context.Context, name string) error
	DeleteAllBreakers(ctx context.Context) error
}

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

// Internal state codes, packed with the generation into one atomic word so
// the hot path reads both consistently in a single load.
const (
	brkClosed uint64 = iota
	brkDegraded
	brkOpen
	brkHalfOpen
	brkStateBits = 2
	brkStateMask = 1<<brkStateBits - 1
)

// breakerHalfOpenBusyRetry is retryAfter when HALF_OPEN has no free probe slot.
const breakerHalfOpenBusyRetry = time.Second

// breakerFlushInterval bounds count-only writes to one per breaker per second.
const breakerFlushInterval = time.Second

func breakerStateName(st uint64) BreakerState {
	switch st {
	case brkDegraded:
		return BreakerDegraded
	case brkOpen:
		return BreakerOpen
	case brkHalfOpen:
		return BreakerHalfOpen
	}
	return BreakerClosed
}

func breakerStateCode(s BreakerState) (uint64, bool) {
	switch s {
	case BreakerClosed:
		return brkClosed, true
	case BreakerDegraded:
		return brkDegraded, true
	case BreakerOpen:
		return brkOpen, true
	case BreakerHalfOpen:
		return brkHalfOpen, true
	}
	return 0, false
}

// breaker is one provider's breaker. word, count and dirty are written only
// under mu and mirror the locked fields for the lock-free paths.
type breaker struct {
	name  string
	word  atomic.Uint64 // generation<<brkStateBits | state
	count atomic.Int64  // failureCount
	dirty atomic.Bool   // memory differs from the stored row

	mu                sync.Mutex
	profile           Profile
	failureCount      int
	openCycleCount    int
	openedAt          time.Time
	lastFailureAt     time.Time
	lastFailureReason string
	halfOpenInFlight  int
	lastWrite         time.Time
	seq               uint64 // number of snapshots taken

	// writeMu orders store writes of this breaker; written is the seq of the
	// newest snapshot the store holds, so an older snapshot never overwrites
	// a newer one.
	writeMu sync.Mutex
	written uint64

	// open lets Allow answer an OPEN breaker without mu (see openEnd).
	open atomic.Pointer[openEnd]
}

// openEnd is a refusal allowSlow computed under mu: the end of an OPEN
// period, or (busy) a HALF_OPEN breaker whose probes are all out. It is
// valid while the breaker's word (state and generation: every transition
// and every change of openedAt or openCycleCount comes with a new word) and
// the settings (the same BreakerConfig map, see mapIdentity) are those it
// was computed with; the places that lower halfOpenInFlight without a new
// word drop it.
type openEnd struct {
	word  uint64
	cfg   unsafe.Pointer // mapIdentity of the BreakerConfig used
	until time.Time
	busy  bool
}

// remember records a refusal for Allow's lock-free path; b.mu is held.
func (b *breaker) remember(cfg unsafe.Pointer, until time.Time, busy bool) {
	w := b.word.Load()
	if oe := b.open.Load(); oe != nil && oe.word == w && oe.cfg == cfg && oe.until.Equal(until) && oe.busy == busy {
		return
	}
	b.open.Store(&openEnd{word: w, cfg: cfg, until: until, busy: busy})
}

func (b *breaker) load() (st, gen uint64) {
	w := b.word.Load()
	return w & brkStateMask, w >> brkStateBits
}

func (b *breaker) set(st, gen uint64) { b.word.Store(gen<<brkStateBits | st) }

// breakerWrite is one store write decided under mu and carried out after it.
type breakerWrite struct {
	seq  uint64
	del  bool
	snap BreakerSnapshot
}

// Breakers is the registry of provider circuit breakers, one per canonical
// provider id (20-resilience §2). A provider that never had a counted failure
// has no breaker and is allowed.
//
// Allow is lock-free while a breaker is CLOSED or DEGRADED; every other
// transition runs under the breaker's mutex. State changes are written to the
// store before the call returns; changes of the failure count alone are
// coalesced to at most one write per breaker per second (the next event at
// least a second after the last write carries them, Flush writes the rest).
type Breakers struct {
	clock services.Clock
	cfg   func() BreakerConfig
	store BreakerStore
	log   *slog.Logger

	reg   atomic.Pointer[map[string]*breaker] // copy-on-write
	regMu sync.Mutex                          // serialises writers of reg
}

// NewBreakers builds an empty registry; call Restore before serving. store
// may be nil (memory only); log may be nil.
func NewBreakers(clock services.Clock, cfg func() BreakerConfig, store BreakerStore, log *slog.Logger) *Breakers {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	r := &Breakers{clock: clock, cfg: cfg, store: store, log: log.With("component", "breaker")}
	empty := map[string]*breaker{}
	r.reg.Store(&empty)
	return r
}

func (r *Breakers) lookup(provider string) *breaker { return (*r.reg.Load())[provider] }

func (r *Breakers) getOrCreate(provider string, profile Profile) *breaker {
	if b := r.lookup(provider); b != nil {
		return b
	}
	r.regMu.Lock()
	defer r.regMu.Unlock()
	cur := *r.reg.Load()
	if b := cur[provider]; b != nil {
		return b
	}
	b := &breaker{name: provider, profile: profile}
	next := make(map[string]*breaker, len(cur)+1)
	maps.Copy(next, cur)
	next[provider] = b
	r.reg.Store(&next)
	return b
}

// profileCfg returns the thresholds of profile: the configured ones, the
// spec defaults when the profile is not configured, sanitised so a bad value
// cannot wedge a breaker.
func (r *Breakers) profileCfg(profile Profile) BreakerProfile {
	return profileCfgIn(r.config(), profile)
}

// config is the current BreakerConfig (nil without a config source).
func (r *Breakers) config() BreakerConfig {
	if r.cfg == nil {
		return nil
	}
	return r.cfg()
}

// mapIdentity tells BreakerConfig maps apart without reading them. The
// settings build a new map for every document and never change one they
// handed out, so the same identity means the same settings.
func mapIdentity(m BreakerConfig) unsafe.Pointer { return *(*unsafe.Pointer)(unsafe.Pointer(&m)) }

// profileCfgIn is profile's config in m, defaults filled in and bounded.
func profileCfgIn(m BreakerConfig, profile Profile) BreakerProfile {
	p, ok := m[profile]
	if !ok {
		switch profile {
		case services.AuthOAuth:
			d := 5
			p = BreakerProfile{DegradationThreshold: &d, FailureThreshold: 8, ResetTimeoutMs: 60_000,
				HalfOpenRequests: 1, EscalateAfterCycles: 2, MaxBackoffMultiplier: 8}
		case services.AuthLocal:
			p = BreakerProfile{FailureThreshold: 2, ResetTimeoutMs: 15_000,
				HalfOpenRequests: 1, EscalateAfterCycles: 3, MaxBackoffMultiplier: 4}
		default:
			d := 7
			p = BreakerProfile{DegradationThreshold: &d, FailureThreshold: 12, ResetTimeoutMs: 30_000,
				HalfOpenRequests: 1, EscalateAfterCycles: 3, MaxBackoffMultiplier: 4}
		}
	}
	p.FailureThreshold = max(p.FailureThreshold, 1)
	p.HalfOpenRequests = max(p.HalfOpenRequests, 1)
	p.ResetTimeoutMs = max(p.ResetTimeoutMs, 1)
	p.EscalateAfterCycles = max(p.EscalateAfterCycles, 0)
	p.MaxBackoffMultiplier = max(p.MaxBackoffMultiplier, 1)
	return p
}

// effectiveResetMs is resetTimeoutMs while openCycleCount ≤ escalateAfterCycles,
// else min(resetTimeoutMs × 2^(openCycleCount − escalateAfterCycles),
// resetTimeoutMs × maxBackoffMultiplier).
func effectiveResetMs(p BreakerProfile, openCycles int) int64 {
	ceiling := p.ResetTimeoutMs * int64(p.MaxBackoffMultiplier)
	if openCycles <= p.EscalateAfterCycles {
		return p.ResetTimeoutMs
	}
	exp := openCycles - p.EscalateAfterCycles
	if exp >= 30 {
		return ceiling
	}
	return min(p.ResetTimeoutMs<<exp, ceiling)
}

// Allow reports whether a request may be sent to provider now. ok=false
// excludes every target of the provider as circuit_open with retryAfter.
// probe=true admits the request as the HALF_OPEN probe: its outcome must be
// reported with Success, Failure (probe=true) or ReleaseProbe. gen is the
// generation to pass back with the outcome.
//
// CLOSED and DEGRADED are answered from one atomic load (no lock, no
// allocation). An OPEN breaker whose reset time has passed turns HALF_OPEN
// here (lazily, against the clock).
func (r *Breakers) Allow(provider string, profile Profile) (ok bool, probe bool, gen uint64, retryAfter time.Duration) {
	b := r.lookup(provider)
	if b == nil {
		return true, false, 0, 0
	}
	w := b.word.Load()
	if w&brkStateMask <= brkDegraded {
		return true, false, w >> brkStateBits, 0
	}
	// OPEN and not yet due for the half-open probe, or HALF_OPEN with every
	// probe out: answered from what allowSlow recorded, without the mutex.
	if oe := b.open.Load(); oe != nil && oe.word == w && mapIdentity(r.config()) == oe.cfg {
		if oe.busy {
			return false, false, w >> brkStateBits, breakerHalfOpenBusyRetry
		}
		if now := r.clock.Now(); now.Before(oe.until) {
			return false, false, w >> brkStateBits, oe.until.Sub(now)
		}
	}
	return r.allowSlow(b, profile)
}

func (r *Breakers) allowSlow(b *breaker, profile Profile) (bool, bool, uint64, time.Duration) {
	now := r.clock.Now()
	b.mu.Lock()
	if b.profile == "" {
		b.profile = profile
	}
	cfg := r.config()
	p := profileCfgIn(cfg, b.profile)
	op, transitioned := r.refreshLocked(b, p, now)
	st, gen := b.load()
	var (
		ok, probe bool
		retry     time.Duration
	)
	switch st {
	case brkClosed, brkDegraded:
		ok = true
	case brkOpen:
		until := b.openedAt.Add(time.Duration(effectiveResetMs(p, b.openCycleCount)) * time.Millisecond)
		retry = until.Sub(now)
		b.remember(mapIdentity(cfg), until, false)
	case brkHalfOpen:
		if b.halfOpenInFlight < p.HalfOpenRequests {
			b.halfOpenInFlight++
			ok, probe = true, true
		} else {
			retry = breakerHalfOpenBusyRetry
			b.remember(mapIdentity(cfg), time.Time{}, true)
		}
	}
	b.mu.Unlock()
	if transitioned {
		r.logTransition(b.name, brkOpen, brkHalfOpen, op.snap)
		_ = r.write(context.Background(), b, op)
	}
	return ok, probe, gen, retry
}

// refreshLocked applies the lazy OPEN → HALF_OPEN transition. It returns the
// write to perform after unlocking.
func (r *Breakers) refreshLocked(b *breaker, p BreakerProfile, now time.Time) (breakerWrite, bool) {
	st, gen := b.load()
	if st != brkOpen {
		return breakerWrite{}, false
	}
	reset := time.Duration(effectiveResetMs(p, b.openCycleCount)) * time.Millisecond
	if now.Sub(b.openedAt) < reset {
		return breakerWrite{}, false
	}
	b.set(brkHalfOpen, gen+1)
	b.halfOpenInFlight = 0
	b.open.Store(nil) // fewer probes out: no longer busy
	return r.snapshotLocked(b, now), true
}

// snapshotLocked captures the breaker for the store and marks it clean.
func (r *Breakers) snapshotLocked(b *breaker, now time.Time) breakerWrite {
	st, gen := b.load()
	b.seq++
	b.lastWrite = now
	b.dirty.Store(false)
	op := breakerWrite{seq: b.seq, snap: BreakerSnapshot{
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
	}}
	// A CLOSED breaker with count 0 has no row.
	op.del = st == brkClosed && b.failureCount == 0
	return op
}

// write carries out op unless the store already holds a newer snapshot. A
// failed write leaves the breaker dirty so the next flush retries it.
func (r *Breakers) write(ctx context.Context, b *breaker, op breakerWrite) error {
	if r.store == nil {
		return nil
	}
	b.writeMu.Lock()
	defer b.writeMu.Unlock()
	if op.seq <= b.written {
		return nil
	}
	var err error
	if op.del {
		err = r.store.DeleteBreaker(ctx, b.name)
	} else {
		err = r.store.SaveBreaker(ctx, op.snap)
	}
	if err != nil {
		b.dirty.Store(true)
		r.log.Warn("breaker write failed", "provider", b.name, "err", err)
		return fmt.Errorf("resilience: save breaker %s: %w", b.name, err)
	}
	b.written = op.seq
	return nil
}

// flushDueLocked returns a write of pending count-only changes when the last
// write is at least a second old.
func (r *Breakers) flushDueLocked(b *breaker, now time.Time) (breakerWrite, bool) {
	if !b.dirty.Load() || (!b.lastWrite.IsZero() && now.Sub(b.lastWrite) < breakerFlushInterval) {
		return breakerWrite{}, false
	}
	return r.snapshotLocked(b, now), true
}

// Success records a successful outcome (2xx, or the first useful stream byte)
// of a request admitted at generation gen. A probe success closes a HALF_OPEN
// breaker with zero counters; otherwise a CLOSED or DEGRADED breaker leaks one
// failure. Outcomes of an older generation are ignored.
func (r *Breakers) Success(provider string, gen uint64, probe bool) {
	b := r.lookup(provider)
	if b == nil {
		return
	}
	if st, cur := b.load(); cur != gen || (st == brkClosed && b.count.Load() == 0 && !b.dirty.Load()) {
		return // stale, or nothing to leak: the common case stays lock-free
	}
	now := r.clock.Now()
	b.mu.Lock()
	p := r.profileCfg(b.profile)
	st, cur := b.load()
	if cur != gen {
		b.mu.Unlock()
		return
	}
	var (
		op         breakerWrite
		write      bool
		transition bool
		to         uint64
	)
	switch {
	case probe && st == brkHalfOpen:
		b.set(brkClosed, cur+1)
		b.failureCount, b.openCycleCount = 0, 0
		b.count.Store(0)
		b.halfOpenInFlight = 0
		b.open.Store(nil) // fewer probes out: no longer busy
		b.openedAt = time.Time{}
		op, write, transition, to = r.snapshotLocked(b, now), true, true, brkClosed
	case st == brkClosed || st == brkDegraded:
		if b.failureCount > 0 {
			b.failureCount--
			b.count.Store(int64(b.failureCount))
			b.dirty.Store(true)
		}
		if st == brkDegraded && b.failureCount < p.Degradation() {
			b.set(brkClosed, cur)
			op, write, transition, to = r.snapshotLocked(b, now), true, true, brkClosed
		} else {
			op, write = r.flushDueLocked(b, now)
		}
	}
	b.mu.Unlock()
	if transition {
		r.logTransition(provider, st, to, op.snap)
	}
	if write {
		_ = r.write(context.Background(), b, op)
	}
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
// Outcomes of an older generation are ignored.
func (r *Breakers) Failure(provider string, profile Profile, gen uint64, probe, counted, newEpisode bool, reason string) {
	if !counted {
		if probe {
			r.ReleaseProbe(provider, gen)
		}
		return
	}
	if !probe && !newEpisode {
		return
	}
	b := r.getOrCreate(provider, profile)
	now := r.clock.Now()
	b.mu.Lock()
	if profile != "" {
		b.profile = profile
	}
	p := r.profileCfg(b.profile)
	st, cur := b.load()
	if cur != gen {
		b.mu.Unlock()
		return
	}
	var (
		op         breakerWrite
		write      bool
		transition bool
		to         uint64
	)
	switch {
	case probe && st == brkHalfOpen:
		b.openCycleCount++
		b.openedAt = now
		b.lastFailureAt, b.lastFailureReason = now, reason
		b.halfOpenInFlight = 0
		b.open.Store(nil) // fewer probes out: no longer busy
		b.set(brkOpen, cur+1)
		op, write, transition, to = r.snapshotLocked(b, now), true, true, brkOpen
	case !probe && (st == brkClosed || st == brkDegraded):
		b.failureCount++
		b.count.Store(int64(b.failureCount))
		b.lastFailureAt, b.lastFailureReason = now, reason
		b.dirty.Store(true)
		switch {
		case b.failureCount >= p.FailureThreshold:
			b.openedAt = now
			b.set(brkOpen, cur+1)
			transition, to = true, brkOpen
		case st == brkClosed && b.failureCount >= p.Degradation():
			b.set(brkDegraded, cur)
			transition, to = true, brkDegraded
		}
		if transition {
			op, write = r.snapshotLocked(b, now), true
		} else {
			op, write = r.flushDueLocked(b, now)
		}
	}
	b.mu.Unlock()
	if transition {
		r.logTransition(provider, st, to, op.snap)
	}
	if write {
		_ = r.write(context.Background(), b, op)
	}
}

// ReleaseProbe frees the probe slot of a request admitted as probe at
// generation gen that ended without a verdict on the provider (429, other
// 4xx, client abort, local limit, or never dispatched). No transition.
func (r *Breakers) ReleaseProbe(provider string, gen uint64) {
	b := r.lookup(provider)
	if b == nil {
		return
	}
	b.mu.Lock()
	if st, cur := b.load(); st == brkHalfOpen && cur == gen && b.halfOpenInFlight > 0 {
		b.halfOpenInFlight--
		b.open.Store(nil) // fewer probes out: no longer busy
	}
	b.mu.Unlock()
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
	b.mu.Lock()
	p := r.profileCfg(b.profile)
	op, transitioned := r.refreshLocked(b, p, now)
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
		s.RetryAfterMs = durationCeilMs(b.openedAt.Add(time.Duration(eff) * time.Millisecond).Sub(now))
	case brkHalfOpen:
		if b.halfOpenInFlight >= p.HalfOpenRequests {
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
	b.mu.Unlock()
	if transitioned {
		r.logTransition(b.name, brkOpen, brkHalfOpen, op.snap)
		_ = r.write(context.Background(), b, op)
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
func resetBreakerLocked(b *breaker) bool {
	st, gen := b.load()
	had := st != brkClosed || b.failureCount != 0
	b.set(brkClosed, gen+1)
	b.failureCount, b.openCycleCount, b.halfOpenInFlight = 0, 0, 0
	b.open.Store(nil) // fewer probes out: no longer busy
	b.count.Store(0)
	b.openedAt, b.lastFailureAt, b.lastFailureReason = time.Time{}, time.Time{}, ""
	return had
}

// Reset sets provider's breaker CLOSED with zero counters and deletes its
// row. Idempotent; an unknown provider is not an error.
func (r *Breakers) Reset(ctx context.Context, provider string) error {
	b := r.lookup(provider)
	if b == nil {
		if r.store == nil {
			return nil
		}
		if err := r.store.DeleteBreaker(ctx, provider); err != nil {
			return fmt.Errorf("resilience: reset breaker %s: %w", provider, err)
		}
		return nil
	}
	now := r.clock.Now()
	b.mu.Lock()
	if resetBreakerLocked(b) {
		r.log.Info("breaker reset", "provider", provider)
	}
	op := r.snapshotLocked(b, now) // CLOSED, count 0: a delete
	b.mu.Unlock()
	return r.write(ctx, b, op)
}

// ResetAll sets every breaker CLOSED with zero counters and deletes every
// row. It returns how many breakers held state.
func (r *Breakers) ResetAll(ctx context.Context) (int, error) {
	now := r.clock.Now()
	reg := *r.reg.Load()
	names := slices.Sorted(maps.Keys(reg))
	n := 0
	seqs := make([]uint64, len(names))
	for i, name := range names {
		b := reg[name]
		b.mu.Lock()
		if resetBreakerLocked(b) {
			n++
		}
		seqs[i] = r.snapshotLocked(b, now).seq
		b.mu.Unlock()
	}
	if n > 0 {
		r.log.Info("breakers reset", "count", n)
	}
	if r.store == nil {
		return n, nil
	}
	// Hold every write lock (in name order; no other path holds two) so no
	// older snapshot lands after the bulk delete. A snapshot newer than the
	// reset that was written already is deleted with the rest, so its
	// breaker is marked dirty for the next flush.
	var rewrite []*breaker
	for i, name := range names {
		b := reg[name]
		b.writeMu.Lock()
		if b.written > seqs[i] {
			rewrite = append(rewrite, b)
		}
		b.written = max(b.written, seqs[i])
	}
	err := r.store.DeleteAllBreakers(ctx)
	for _, name := range names {
		reg[name].writeMu.Unlock()
	}
	if err != nil {
		rewrite = slices.Collect(maps.Values(reg))
	}
	for _, b := range rewrite {
		b.dirty.Store(true)
	}
	if err != nil {
		return n, fmt.Errorf("resilience: reset breakers: %w", err)
	}
	return n, nil
}

// Restore loads the stored breakers into memory. Call it once before
// serving. A restored HALF_OPEN breaker gets a fresh probe allowance (probe
// slots live in memory only); an OPEN one keeps its openedAt, so it turns
// HALF_OPEN on the first read after its reset time, downtime included.
func (r *Breakers) Restore(ctx context.Context) error {
	if r.store == nil {
		return nil
	}
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
		b := r.getOrCreate(s.Name, s.Profile)
		b.mu.Lock()
		b.profile = s.Profile
		b.failureCount = max(s.FailureCount, 0)
		b.count.Store(int64(b.failureCount))
		b.openCycleCount = max(s.OpenCycleCount, 0)
		b.openedAt, b.lastFailureAt, b.lastFailureReason = s.OpenedAt, s.LastFailureAt, s.LastFailureReason
		if st == brkOpen && b.openedAt.IsZero() {
			b.openedAt = s.UpdatedAt // a damaged row still reopens after one reset time
		}
		b.halfOpenInFlight = 0
		b.lastWrite = s.UpdatedAt
		b.dirty.Store(false)
		b.open.Store(nil) // openedAt may differ under an unchanged word
		b.set(st, s.Generation&(1<<(64-brkStateBits)-1))
		b.mu.Unlock()
	}
	return nil
}

// Flush writes every pending count-only change. The app calls it on
// shutdown; nothing else needs it for correctness.
func (r *Breakers) Flush(ctx context.Context) error {
	now := r.clock.Now()
	reg := *r.reg.Load()
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(reg)) {
		b := reg[name]
		if !b.dirty.Load() {
			continue
		}
		b.mu.Lock()
		op := r.snapshotLocked(b, now)
		b.mu.Unlock()
		if err := r.write(ctx, b, op); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (r *Breakers) logTransition(provider string, from, to uint64, s BreakerSnapshot) {
	args := []any{"provider", provider, "from", breakerStateName(from), "to", breakerStateName(to),
		"failureCount", s.FailureCount, "openCycleCount", s.OpenCycleCount}
	if to == brkOpen {
		r.log.Warn("breaker opened", append(args, "reason", s.LastFailureReason)...)
		return
	}
	r.log.Info("breaker state changed", args...)
}

// durationCeilMs rounds a positive duration up to whole milliseconds, so a running
// timer never reports 0.
func durationCeilMs(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Millisecond - 1) / time.Millisecond)
}
