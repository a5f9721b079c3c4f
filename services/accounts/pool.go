package accounts

import (
	"cmp"
	"slices"
	"sync/atomic"
)

// Pool is the eligible connections of one pick as columns, for callers that
// keep their candidates between picks (the gateway caches them per provider
// and model): PickPool reads only what the strategy needs, so fill-first and
// random cost the same for 1,000 candidates as for one, and nothing is
// copied per pick.
//
// Candidate i is IDs[i]; the pool must be in configured order (Priority,
// CreatedAt, ID) — PickPool trusts it, unlike Pick. Every column has the
// same length.
type Pool struct {
	IDs []string
	// Backoff[i] is candidate i's BackoffLevel.
	Backoff []int
	// LastUsed[i] holds candidate i's LastUsedAt in Unix milliseconds, 0 =
	// never used; round-robin and least-used load it when they scan.
	LastUsed []*atomic.Int64
	// Src finds candidates by ID and reads the figures p2c compares.
	Src PoolSource
}

// PoolSource is the part of a Pool read on demand.
type PoolSource interface {
	// Index returns i with IDs[i] == id, or -1.
	Index(id string) int
	// Load returns candidate i's InFlight and SuccessRate (negative =
	// unknown).
	Load(i int) (inFlight int, successRate float64)
}

// PickPool is Pick over a Pool: the same strategies with the same state,
// draws and results as Pick given the same candidates in configured order
// (LastUsedAt at millisecond precision). It returns the chosen index into
// p.IDs, or -1 when the pool is empty.
func (s *Selector) PickPool(provider, strategy string, stickyLimit int, p *Pool, failedHere bool) int {
	if len(p.IDs) == 0 {
		return -1
	}
	switch strategy {
	case RoundRobin:
		return s.roundRobinPool(provider, stickyLimit, p, failedHere)
	case P2C:
		return s.p2cPool(p)
	case Random:
		s.rngMu.Lock()
		defer s.rngMu.Unlock()
		return s.rng.IntN(len(p.IDs))
	case LeastUsed:
		return leastUsedPool(p)
	case StrictRandom:
		return s.strictRandomPool(provider, p)
	}
	return 0 // fill-first, and any other name
}

// lastUsedLess is compareLastUsed(a, b) < 0 on Unix milliseconds.
func lastUsedLess(a, b int64) bool {
	switch {
	case b == 0:
		return false
	case a == 0:
		return true
	}
	return a < b
}

func (s *Selector) roundRobinPool(provider string, stickyLimit int, p *Pool, failedHere bool) int {
	if failedHere {
		return lruPool(p)
	}
	ps := s.state(provider)
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.lastID != "" && ps.consecutive < stickyLimit {
		if i := p.Src.Index(ps.lastID); i >= 0 {
			ps.consecutive++
			return i
		}
	}
	i := lruPool(p)
	ps.lastID, ps.consecutive = p.IDs[i], 1
	return i
}

// lruPool is lru over a pool.
func lruPool(p *Pool) int {
	best, bestLU := 0, p.LastUsed[0].Load()
	back := p.Backoff
	for i := 1; i < len(back); i++ {
		d := cmp.Compare(back[i], back[best])
		if d > 0 {
			continue
		}
		lu := p.LastUsed[i].Load()
		if d < 0 || lastUsedLess(lu, bestLU) {
			best, bestLU = i, lu
		}
	}
	return best
}

// leastUsedPool is leastUsed over a pool. A never-used candidate cannot be
// beaten, so the scan stops at the first one.
func leastUsedPool(p *Pool) int {
	best, bestLU := 0, p.LastUsed[0].Load()
	for i := 1; i < len(p.LastUsed) && bestLU != 0; i++ {
		if lu := p.LastUsed[i].Load(); lastUsedLess(lu, bestLU) {
			best, bestLU = i, lu
		}
	}
	return best
}

func (s *Selector) p2cPool(p *Pool) int {
	if len(p.IDs) == 1 {
		return 0
	}
	i, j := s.drawTwo(len(p.IDs))
	cand := func(x int) Candidate {
		inFlight, rate := p.Src.Load(x)
		return Candidate{BackoffLevel: p.Backoff[x], InFlight: inFlight, SuccessRate: rate}
	}
	if p2cBetter(cand(j), cand(i), j < i) {
		return j
	}
	return i
}

func (s *Selector) strictRandomPool(provider string, p *Pool) int {
	ps := s.state(provider)
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if card, i := ps.takeEligiblePool(p); card >= 0 {
		ps.deck = slices.Delete(ps.deck, card, card+1)
		return i
	}
	ps.deck = append(ps.deck[:0], p.IDs...)
	var first string
	first, ps.deck = s.shuffleDeal(ps.deck)
	return p.Src.Index(first)
}

// takeEligiblePool is takeEligible over a pool: the first card of the deck
// that is in the pool, as (deck position, pool index), or -1, -1.
func (ps *providerState) takeEligiblePool(p *Pool) (card, index int) {
	for n, id := range ps.deck {
		if i := p.Src.Index(id); i >= 0 {
			return n, i
		}
	}
	return -1, -1
}
