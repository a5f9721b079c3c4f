package resilience

import (
	"cmp"
	"context"
	"log/slog"
	"maps"
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
