package resilience

import (
	"cmp"
	"context"
	"encoding/json"
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
	"switchyard/services/events"
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
	// HalfOpenInFlight counts the HALF_OPEN probes out across the fleet;
	// ProbeUntil is when the latest grant lapses, so a probe held by a
	// replica that died stops blocking the breaker then.
	HalfOpenInFlight int
	ProbeUntil       time.Time
}

// gone reports whether s is CLOSED with a zero count: such a breaker has
// no row.
func (s BreakerSnapshot) gone() bool { return s.State == BreakerClosed && s.FailureCount <= 0 }

// BreakerStore holds the breakers as the fleet's authority: counted
// failures are increments (exact however many replicas count), transitions
// compare-and-set the row on its generation and count, probes are granted
// against the fleet-wide in-flight count. A CLOSED breaker with a zero
// count has no row. Implementations: MemoryBreakerStore,
// models.BreakerStore on SQLite and PostgreSQL.
type BreakerStore interface {
	LoadBreakers(ctx context.Context) ([]BreakerSnapshot, error)
	// LoadBreaker returns name's row; found=false when it has none.
	LoadBreaker(ctx context.Context, name string) (row BreakerSnapshot, found bool, err error)
	// CountBreakerFailure adds one counted failure to the row of s.Name
	// when its generation is s.Generation (recording s's last failure,
	// profile and update time), or inserts s with a count of 1 when there is
	// no row. It returns the row after the call; counted=false (and the
	// stored row) when the stored generation differs.
	CountBreakerFailure(ctx context.Context, s BreakerSnapshot) (row BreakerSnapshot, counted bool, err error)
	// LeakBreaker takes n from the count of name's row (not below zero)
	// when its generation is gen and it is CLOSED or DEGRADED; a CLOSED row
	// that reaches zero is deleted. It returns the row after the call
	// (found=false: none).
	LeakBreaker(ctx context.Context, name string, gen uint64, n int, at time.Time) (row BreakerSnapshot, found bool, err error)
	// CompareAndSaveBreaker replaces name's row with s when its generation
	// is gen and its count n (s CLOSED with a zero count deletes it). When
	// not swapped it returns the stored row (found=false: none).
	CompareAndSaveBreaker(ctx context.Context, gen uint64, n int, s BreakerSnapshot) (cur BreakerSnapshot, found, swapped bool, err error)
	// AcquireBreakerProbe counts one more probe out when the row is
	// HALF_OPEN at generation gen with fewer than limit out, or its last
	// grant lapsed (probe_until ≤ now; the count restarts at one). A grant
	// lapses at until. It returns the row after the call.
	AcquireBreakerProbe(ctx context.Context, name string, gen uint64, limit int, now, until time.Time) (row BreakerSnapshot, found, granted bool, err error)
	// ReleaseBreakerProbe gives back one probe of generation gen.
	ReleaseBreakerProbe(ctx context.Context, name string, gen uint64) (row BreakerSnapshot, found bool, err error)
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
	brkGenMask   = 1<<(64-brkStateBits) - 1
)

// breakerHalfOpenBusyRetry is retryAfter when HALF_OPEN has no free probe
// slot; a replica asks the store again after it at the latest.
const breakerHalfOpenBusyRetry = time.Second

// breakerLeakInterval bounds one replica's success-leak writes to one per
// breaker per second (the leak is batched meanwhile).
const breakerLeakInterval = time.Second

// breakerProbeLeaseMin is the shortest life of a probe grant: a grant
// lapses at now + max(resetTimeout, this), so a replica that died holding
// a probe blocks the breaker no longer.
const breakerProbeLeaseMin = 30 * time.Second

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

// breaker is one provider's breaker: the mirror of its row. word and count
// are written only under mu and mirror the locked fields for the lock-free
// paths.
type breaker struct {
	name  string
	word  atomic.Uint64 // generation<<brkStateBits | state
	count atomic.Int64  // failureCount
	// dirty: memory holds a decision the store lacks (a write failed);
	// Flush reconciles it.
	dirty atomic.Bool

	// opMu orders the store calls of this breaker and the mirror updates
	// that follow them. Taken before mu, never while holding it.
	opMu sync.Mutex

	mu                sync.Mutex
	profile           Profile
	failureCount      int
	openCycleCount    int
	openedAt          time.Time
	lastFailureAt     time.Time
	lastFailureReason string
	halfOpenInFlight  int
	probeUntil        time.Time
	// pendingLeak counts successes already taken off failureCount but not
	// yet off the store's count; lastLeak is the last leak write.
	pendingLeak int
	lastLeak    time.Time

	// open lets Allow answer an OPEN breaker without mu (see openEnd).
	open atomic.Pointer[openEnd]
}

// openEnd is a refusal allowSlow computed: the end of an OPEN period, or
// (busy) until when a HALF_OPEN breaker is known to have every probe out.
// It is valid while the breaker's word (state and generation: every
// transition and every change of openedAt or openCycleCount comes with a
// new word) and the settings (the same BreakerConfig map, see mapIdentity)
// are those it was computed with, and before until; the places that lower
// halfOpenInFlight without a new word drop it.
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

func (b *breaker) set(st, gen uint64) { b.word.Store((gen&brkGenMask)<<brkStateBits | st) }

// Breakers is the registry of provider circuit breakers, one per canonical
// provider id (20-resilience §2). A provider that never had a counted failure
// has no breaker and is allowed.
//
// Allow is one atomic load while a breaker is CLOSED or DEGRADED. The store
// is the authority a fleet shares (decisions.go): a counted failure is an
// increment there and the transition is decided on the returned row and
// written with a compare-and-set, so the episodes of every replica add up
// exactly; half-open probes are granted by the store, so at most
// halfOpenRequests are out fleet-wide; the success leak is batched to one
// write per breaker per second. Every change of a row is published, and
// the other replicas' mirrors follow it.
type Breakers struct {
	clock services.Clock
	cfg   func() BreakerConfig
	store BreakerStore
	log   *slog.Logger

	// Fleet is set when other processes share the store: probes they hold
	// then survive this process's restart (they lapse at probe_until).
	// Without it Restore gives a HALF_OPEN breaker a fresh allowance.
	Fleet bool

	// Events receives the transitions this process decides (opened,
	// half-open, closed, reset by the admin); nil records nothing.
	Events events.Recorder

	pub   publisher
	guard storeGuard

	reg   atomic.Pointer[map[string]*breaker] // copy-on-write
	regMu sync.Mutex                          // serialises writers of reg
}

// NewBreakers builds an empty registry; call Restore before serving. store
// may be nil (memory only); log may be nil.
func NewBreakers(clock services.Clock, cfg func() BreakerConfig, store BreakerStore, log *slog.Logger) *Breakers {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if store == nil {
		store = NewMemoryBreakerStore()
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
// allocation, no store). An OPEN breaker whose reset time has passed turns
// HALF_OPEN here (lazily, against the clock), with this caller as its
// probe; probes are granted by the store, fleet-wide.
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
	if ok, retry := r.recorded(b, w); ok {
		return false, false, w >> brkStateBits, retry
	}
	return r.allowSlow(b, profile)
}

// recorded answers a refusal allowSlow recorded, while it holds.
func (r *Breakers) recorded(b *breaker, w uint64) (bool, time.Duration) {
	oe := b.open.Load()
	if oe == nil || oe.word != w || mapIdentity(r.config()) != oe.cfg {
		return false, 0
	}
	now := r.clock.Now()
	if !now.Before(oe.until) {
		return false, 0
	}
	if oe.busy {
		return true, breakerHalfOpenBusyRetry
	}
	return true, oe.until.Sub(now)
}

func (r *Breakers) allowSlow(b *breaker, profile Profile) (bool, bool, uint64, time.Duration) {
	b.opMu.Lock()
	defer b.opMu.Unlock()
	if ok, retry := r.recorded(b, b.word.Load()); ok { // another caller asked meanwhile
		_, gen := b.load()
		return false, false, gen, retry
	}
	ctx := context.Background()
	now := r.clock.Now()
	b.mu.Lock()
	if b.profile == "" {
		b.profile = profile
	}
	cfg := r.config()
	p := profileCfgIn(cfg, b.profile)
	st, gen := b.load()
	if st == brkOpen {
		until := b.openedAt.Add(time.Duration(effectiveResetMs(p, b.openCycleCount)) * time.Millisecond)
		if now.Before(until) {
			b.remember(mapIdentity(cfg), until, false)
			b.mu.Unlock()
			return false, false, gen, until.Sub(now)
		}
		// Due: HALF_OPEN, with this caller as the first probe.
		next := r.snapshotLocked(b, now)
		next.State, next.Generation = BreakerHalfOpen, gen+1
		next.HalfOpenInFlight, next.ProbeUntil = 1, probeLease(p, now)
		n := b.failureCount
		b.mu.Unlock()
		if r.cas(ctx, b, gen, n, next, now) {
			r.logTransition(b.name, brkOpen, brkHalfOpen, next)
			return true, true, gen + 1, 0
		}
		// Another replica moved the breaker first: decide on what it holds.
		b.mu.Lock()
		st, gen = b.load()
	}
	switch st {
	case brkClosed, brkDegraded:
		b.mu.Unlock()
		return true, false, gen, 0
	case brkOpen:
		until := b.openedAt.Add(time.Duration(effectiveResetMs(p, b.openCycleCount)) * time.Millisecond)
		b.remember(mapIdentity(cfg), until, false)
		b.mu.Unlock()
		return false, false, gen, max(until.Sub(now), time.Millisecond)
	}
	b.mu.Unlock()
	// HALF_OPEN: ask the store for a probe slot.
	granted := r.acquireProbe(ctx, b, gen, p, now)
	b.mu.Lock()
	defer b.mu.Unlock()
	if granted {
		return true, true, gen, 0
	}
	st, cur := b.load()
	switch {
	case st == brkClosed || st == brkDegraded:
		return true, false, cur, 0
	case st == brkHalfOpen:
		until := now.Add(breakerHalfOpenBusyRetry)
		if !b.probeUntil.IsZero() && b.probeUntil.Before(until) && b.probeUntil.After(now) {
			until = b.probeUntil
		}
		b.remember(mapIdentity(cfg), until, true)
		return false, false, cur, breakerHalfOpenBusyRetry
	}
	until := b.openedAt.Add(time.Duration(effectiveResetMs(p, b.openCycleCount)) * time.Millisecond)
	return false, false, cur, max(until.Sub(now), time.Millisecond)
}

// probeLease is when a probe granted at now lapses.
func probeLease(p BreakerProfile, now time.Time) time.Time {
	return now.Add(max(time.Duration(p.ResetTimeoutMs)*time.Millisecond, breakerProbeLeaseMin))
}

// acquireProbe asks the store for one HALF_OPEN probe of generation gen;
// with the store unreachable the mirror's count decides (per replica).
// Called with opMu held.
func (r *Breakers) acquireProbe(ctx context.Context, b *breaker, gen uint64, p BreakerProfile, now time.Time) bool {
	if !r.guard.down(now) {
		wctx, cancel := decisionContext(ctx)
		row, found, granted, err := r.store.AcquireBreakerProbe(wctx, b.name, gen, p.HalfOpenRequests, now, probeLease(p, now))
		cancel()
		if err == nil {
			r.guard.reset()
			b.mu.Lock()
			r.followLocked(b, row, found)
			b.mu.Unlock()
			if granted {
				r.publishRow(ctx, b.name, row, found) // the others show the probe out
			}
			return granted
		}
		r.guard.trip(now)
		r.log.Warn("breaker probe: store unavailable, granted by this replica alone", "provider", b.name, "err", err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if st, cur := b.load(); st != brkHalfOpen || cur != gen || b.halfOpenInFlight >= p.HalfOpenRequests {
		return false
	}
	b.halfOpenInFlight++
	return true
}

// refresh applies the lazy OPEN → HALF_OPEN transition of a read (§2.1),
// written to the store (once per reset period: the first replica to read
// it moves the row, the others follow).
func (r *Breakers) refresh(b *breaker, now time.Time) {
	due := func() (bool, uint64) {
		st, gen := b.load()
		if st != brkOpen {
			return false, gen
		}
		p := r.profileCfg(b.profile)
		return now.Sub(b.openedAt) >= time.Duration(effectiveResetMs(p, b.openCycleCount))*time.Millisecond, gen
	}
	b.mu.Lock()
	ok, _ := due()
	b.mu.Unlock()
	if !ok {
		return
	}
	b.opMu.Lock()
	defer b.opMu.Unlock()
	b.mu.Lock()
	ok, gen := due()
	if !ok {
		b.mu.Unlock()
		return
	}
	next := r.snapshotLocked(b, now)
	next.State, next.Generation, next.HalfOpenInFlight, next.ProbeUntil = BreakerHalfOpen, gen+1, 0, time.Time{}
	n := b.failureCount
	b.mu.Unlock()
	if r.cas(context.Background(), b, gen, n, next, now) {
		r.logTransition(b.name, brkOpen, brkHalfOpen, next)
	}
}

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
	r.recordReset(provider, was)
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
		r.recordReset(name, was[i])
	}
	return n, nil
}

// recordReset records the admin closing a breaker that was not closed.
func (r *Breakers) recordReset(provider string, was uint64) {
	if r.Events != nil && was != brkClosed {
		r.Events.Record(events.Event{Type: events.BreakerClosed, Provider: provider, Cause: events.CauseAdmin})
	}
}

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

// logTransition logs and records a transition this process decided (every
// decided transition comes through here; mirrors following another
// replica's decision do not).
func (r *Breakers) logTransition(provider string, from, to uint64, s BreakerSnapshot) {
	r.recordTransition(provider, from, to, s.LastFailureReason)
	args := []any{"provider", provider, "from", breakerStateName(from), "to", breakerStateName(to),
		"failureCount", s.FailureCount, "openCycleCount", s.OpenCycleCount}
	if to == brkOpen {
		r.log.Warn("breaker opened", append(args, "reason", s.LastFailureReason)...)
		return
	}
	r.log.Info("breaker state changed", args...)
}

// recordTransition records an opened, half-open or closed breaker; a move
// into DEGRADED is not an event (the breaker still lets everything through).
func (r *Breakers) recordTransition(provider string, from, to uint64, reason string) {
	if r.Events == nil {
		return
	}
	e := events.Event{Provider: provider}
	switch to {
	case brkOpen:
		e.Type, e.Cause = events.BreakerOpened, reason
		if from == brkHalfOpen {
			e.Cause = cmp.Or(reason, events.CauseProbeFailed)
		}
	case brkHalfOpen:
		e.Type, e.Cause = events.BreakerHalfOpen, events.CauseResetTimeout
	case brkClosed:
		e.Type, e.Cause = events.BreakerClosed, events.CauseFailuresDecayed
		if from == brkHalfOpen {
			e.Cause = events.CauseProbeSucceeded
		}
	default:
		return
	}
	r.Events.Record(e)
}

// durationCeilMs rounds a positive duration up to whole milliseconds, so a running
// timer never reports 0.
func durationCeilMs(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Millisecond - 1) / time.Millisecond)
}
