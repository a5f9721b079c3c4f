package accounts

import (
	"cmp"
	"math/rand/v2"
	"slices"
	"sync"
	"time"
)

// Candidate is one eligible connection as the selector sees it (already
// filtered by gates 7–12 of 30-routing §5).
type Candidate struct {
	ID string
	// Priority is the configured order: Priority ascending, then CreatedAt,
	// then ID.
	Priority     int
	CreatedAt    time.Time
	BackoffLevel int
	// LastUsedAt is when a dispatch last started on the connection; the zero
	// time means never used.
	LastUsedAt time.Time
	InFlight   int
	// SuccessRate is the recent success ratio in [0, 1]; negative means
	// unknown and counts as 0.5.
	SuccessRate float64
}

// Strategy names accepted by Pick (30-routing §11). Any other name behaves
// as FillFirst.
const (
	FillFirst    = "fill-first"
	RoundRobin   = "round-robin"
	P2C          = "p2c"
	Random       = "random"
	LeastUsed    = "least-used"
	StrictRandom = "strict-random"
)

// Selector picks one connection of a provider. It keeps per-provider state
// (round-robin position, strict-random decks) and is safe for concurrent use:
// each provider's state has its own lock, and the only shared lock is a short
// one around the RNG. Lock order, where both are held: provider, then RNG.
type Selector struct {
	states sync.Map // provider id → *providerState

	rngMu sync.Mutex
	rng   *rand.Rand

	// sortBuf holds *[]Candidate scratch slices for the rare caller that
	// passes candidates out of configured order.
	sortBuf sync.Pool
}

// NewSelector returns a Selector drawing from rng; every random rule makes
// its IntN calls in the order 30-routing §11 names, under one lock per
// Pick, so a seeded rng (tests: rand.New(rand.NewPCG(a, b))) reproduces the
// spec's draws. A nil rng uses the randomly seeded math/rand/v2 top-level
// generator; production passes its own ChaCha8 instance (§9).
func NewSelector(rng *rand.Rand) *Selector {
	if rng == nil {
		rng = rand.New(globalSource{})
	}
	return &Selector{rng: rng}
}

// globalSource draws from math/rand/v2's top-level generator, which is
// randomly seeded and safe for concurrent use.
type globalSource struct{}

func (globalSource) Uint64() uint64 { return rand.Uint64() }

// Pick returns the chosen candidate's ID, or "" when eligible is empty.
//
// eligible should already be in configured order (Priority, CreatedAt, ID);
// Pick checks and, if needed, sorts a private copy, never the caller's slice.
// stickyLimit is round-robin's L (values below 1 act as 1). failedHere says
// this request already failed on this provider: round-robin then takes the
// least-recently-used connection without stickiness and leaves its
// {lastId, consecutive} alone.
func (s *Selector) Pick(provider, strategy string, stickyLimit int, eligible []Candidate, failedHere bool) string {
	if len(eligible) == 0 {
		return ""
	}
	if !inConfiguredOrder(eligible) {
		bp := s.scratch(len(eligible))
		sorted := append((*bp)[:0], eligible...)
		slices.SortStableFunc(sorted, configuredOrder)
		*bp = sorted
		eligible = sorted
		defer func() {
			clear(sorted) // the pool must not keep IDs alive
			s.sortBuf.Put(bp)
		}()
	}
	st, ok := strategies[strategy]
	if !ok {
		st = fillFirst{}
	}
	return eligible[st.pick(s, request{
		provider:    provider,
		stickyLimit: stickyLimit,
		eligible:    eligible,
		failedHere:  failedHere,
	})].ID
}

// Forget drops the state of a provider (e.g. all its connections deleted).
// A Pick already running for the provider finishes on the old state.
func (s *Selector) Forget(provider string) {
	s.states.Delete(provider)
}

// ForgetConnection drops what the provider's state holds about one deleted
// connection: its strict-random card is discarded and, if it is the
// round-robin lastId, the rotation restarts from LRU.
func (s *Selector) ForgetConnection(provider, id string) {
	v, ok := s.states.Load(provider)
	if !ok {
		return
	}
	ps := v.(*providerState)
	ps.mu.Lock()
	defer ps.mu.Unlock()
	ps.deck = slices.DeleteFunc(ps.deck, func(card string) bool { return card == id })
	if ps.lastID == id {
		ps.lastID, ps.consecutive = "", 0
	}
}

func (s *Selector) scratch(n int) *[]Candidate {
	if v := s.sortBuf.Get(); v != nil {
		bp := v.(*[]Candidate)
		if cap(*bp) >= n {
			return bp
		}
	}
	b := make([]Candidate, 0, n)
	return &b
}

// state returns the provider's state, creating it on first use.
func (s *Selector) state(provider string) *providerState {
	if v, ok := s.states.Load(provider); ok {
		return v.(*providerState)
	}
	v, _ := s.states.LoadOrStore(provider, &providerState{})
	return v.(*providerState)
}

// providerState is the per-provider selection state of §9's table.
type providerState struct {
	mu sync.Mutex

	// Account round-robin.
	lastID      string
	consecutive int

	// Strict-random deck, next card first.
	deck []string
	// eligibleSet is scratch for deck scans, reused so a steady state does
	// not allocate.
	eligibleSet map[string]struct{}
}

// request is one Pick as a strategy sees it; eligible is non-empty and in
// configured order.
type request struct {
	provider    string
	stickyLimit int
	eligible    []Candidate
	failedHere  bool
}

// strategy chooses an index into req.eligible.
type strategy interface {
	pick(s *Selector, req request) int
}

var (
	_ strategy = fillFirst{}
	_ strategy = roundRobin{}
	_ strategy = p2c{}
	_ strategy = random{}
	_ strategy = leastUsed{}
	_ strategy = strictRandom{}
)

var strategies = map[string]strategy{
	FillFirst:    fillFirst{},
	RoundRobin:   roundRobin{},
	P2C:          p2c{},
	Random:       random{},
	LeastUsed:    leastUsed{},
	StrictRandom: strictRandom{},
}

// fillFirst takes the first eligible connection.
type fillFirst struct{}

func (fillFirst) pick(*Selector, request) int { return 0 }

// roundRobin stays on lastId for up to L consecutive requests, then moves to
// the least-recently-used connection.
type roundRobin struct{}

func (roundRobin) pick(s *Selector, req request) int {
	if req.failedHere {
		// Fallback after a failure on this provider: no stickiness, and the
		// rotation is left as it was.
		return lru(req.eligible)
	}
	ps := s.state(req.provider)
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.lastID != "" && ps.consecutive < req.stickyLimit {
		if i := indexOf(req.eligible, ps.lastID); i >= 0 {
			ps.consecutive++
			return i
		}
	}
	i := lru(req.eligible)
	ps.lastID, ps.consecutive = req.eligible[i].ID, 1
	return i
}

// lru orders by backoff level ascending, then lastUsedAt ascending with
// never-used first, then configured order, and returns the first.
func lru(c []Candidate) int {
	best := 0
	for i := 1; i < len(c); i++ {
		if d := cmp.Compare(c[i].BackoffLevel, c[best].BackoffLevel); d < 0 ||
			d == 0 && compareLastUsed(c[i].LastUsedAt, c[best].LastUsedAt) < 0 {
			best = i
		}
	}
	return best
}

// drawTwo draws two distinct indexes below k (k ≥ 2), uniformly.
func (s *Selector) drawTwo(k int) (i, j int) {
	s.rngMu.Lock()
	i = s.rng.IntN(k)
	j = s.rng.IntN(k - 1)
	s.rngMu.Unlock()
	if j >= i {
		j++
	}
	return i, j
}

// p2c draws two distinct connections and keeps the better one.
type p2c struct{}

func (p2c) pick(s *Selector, req request) int {
	if len(req.eligible) == 1 {
		return 0
	}
	i, j := s.drawTwo(len(req.eligible))
	if p2cBetter(req.eligible[j], req.eligible[i], j < i) {
		return j
	}
	return i
}

// p2cBetter reports whether a beats b: fewer in-flight, then lower backoff
// level, then higher success rate (unknown 0.5), then configured order
// (aFirst says a comes first in it).
func p2cBetter(a, b Candidate, aFirst bool) bool {
	if a.InFlight != b.InFlight {
		return a.InFlight < b.InFlight
	}
	if a.BackoffLevel != b.BackoffLevel {
		return a.BackoffLevel < b.BackoffLevel
	}
	if ra, rb := successRate(a), successRate(b); ra != rb {
		return ra > rb
	}
	return aFirst
}

func successRate(c Candidate) float64 {
	if c.SuccessRate < 0 {
		return 0.5
	}
	return c.SuccessRate
}

// random takes eligible[IntN(k)].
type random struct{}

func (random) pick(s *Selector, req request) int {
	s.rngMu.Lock()
	defer s.rngMu.Unlock()
	return s.rng.IntN(len(req.eligible))
}

// leastUsed takes the oldest lastUsedAt (never used first); ties keep
// configured order.
type leastUsed struct{}

func (leastUsed) pick(_ *Selector, req request) int {
	c := req.eligible
	best := 0
	for i := 1; i < len(c); i++ {
		if compareLastUsed(c[i].LastUsedAt, c[best].LastUsedAt) < 0 {
			best = i
		}
	}
	return best
}

// strictRandom deals from a per-provider deck so every connection is used
// once per round before any repeats.
type strictRandom struct{}

func (strictRandom) pick(s *Selector, req request) int {
	ps := s.state(req.provider)
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if card, i := ps.takeEligible(req.eligible); card >= 0 {
		ps.deck = slices.Delete(ps.deck, card, card+1)
		return i
	}
	// No card is eligible now (or the deck is empty): rebuild from the
	// current eligible list. Cards left in the old deck — cooling or deleted
	// connections — are discarded with it.
	ps.deck = ps.deck[:0]
	for _, c := range req.eligible {
		ps.deck = append(ps.deck, c.ID)
	}
	var first string
	first, ps.deck = s.shuffleDeal(ps.deck)
	return indexOf(req.eligible, first)
}

// shuffleDeal shuffles a new deck (Fisher–Yates under the selector's rng)
// and deals its first card.
func (s *Selector) shuffleDeal(deck []string) (string, []string) {
	s.rngMu.Lock()
	for i := len(deck) - 1; i > 0; i-- {
		j := s.rng.IntN(i + 1)
		deck[i], deck[j] = deck[j], deck[i]
	}
	s.rngMu.Unlock()
	first := deck[0]
	return first, slices.Delete(deck, 0, 1)
}

// takeEligible finds the first card of the deck that is eligible now and
// returns its deck position and eligible index, or -1, -1.
func (ps *providerState) takeEligible(eligible []Candidate) (card, index int) {
	if len(ps.deck) == 0 {
		return -1, -1
	}
	// Usually the top card is eligible: one linear scan, no set.
	if i := indexOf(eligible, ps.deck[0]); i >= 0 {
		return 0, i
	}
	if ps.eligibleSet == nil {
		ps.eligibleSet = make(map[string]struct{}, len(eligible))
	}
	clear(ps.eligibleSet)
	for _, c := range eligible {
		ps.eligibleSet[c.ID] = struct{}{}
	}
	for n, id := range ps.deck[1:] {
		if _, ok := ps.eligibleSet[id]; ok {
			return n + 1, indexOf(eligible, id)
		}
	}
	return -1, -1
}

func indexOf(c []Candidate, id string) int {
	for i := range c {
		if c[i].ID == id {
			return i
		}
	}
	return -1
}

// compareLastUsed orders lastUsedAt ascending with never used (zero) first.
func compareLastUsed(a, b time.Time) int {
	switch az, bz := a.IsZero(), b.IsZero(); {
	case az && bz:
		return 0
	case az:
		return -1
	case bz:
		return 1
	}
	return a.Compare(b)
}

// configuredOrder is priority ascending, then created, then id.
func configuredOrder(a, b Candidate) int { return compareConfigured(&a, &b) }

// compareConfigured is configuredOrder by pointer: the defensive check runs
// on every Pick over every candidate, and copying two Candidates per step
// would dominate it.
func compareConfigured(a, b *Candidate) int {
	if a.Priority != b.Priority {
		return cmp.Compare(a.Priority, b.Priority)
	}
	if d := a.CreatedAt.Compare(b.CreatedAt); d != 0 {
		return d
	}
	return cmp.Compare(a.ID, b.ID)
}

func inConfiguredOrder(c []Candidate) bool {
	for i := 1; i < len(c); i++ {
		if compareConfigured(&c[i-1], &c[i]) > 0 {
			return false
		}
	}
	return true
}
