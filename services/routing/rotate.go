package routing

import (
	"cmp"
	"math"
	"slices"
)

// RoundRobin rotates the start entry (§10.3). Per combo a ticket t starts at
// 0; each request takes s = t++ and starts at entry ⌊s/L⌋ mod n (L =
// StickyRoundRobinLimit), the rest following in configured order, wrapping.
// When the start entry is unavailable in the snapshot, is skipped by a gate
// (State.OnSkip) or was dispatched and failed (State.OnFailure), the ticket
// is raised to at least (⌊s/L⌋ + 1)·L so the next request starts a fresh
// batch.
type RoundRobin struct {
	state *MemoryState
}

// Name returns "round-robin".
func (*RoundRobin) Name() string { return NameRoundRobin }

// Describe returns the builder line.
func (*RoundRobin) Describe() string { return describe(NameRoundRobin) }

// Order takes a ticket and rotates.
func (r *RoundRobin) Order(req Request, entries []Entry) []Entry {
	n := len(entries)
	if n == 0 {
		return []Entry{}
	}
	limit := uint64(max(req.StickyRoundRobinLimit, 1))
	cs := r.state.combo(req.ComboID)
	cs.mu.Lock()
	s := cs.rrTicket
	cs.rrTicket++
	batch := s / limit
	start := int(batch % uint64(n))
	cs.rrBatch, cs.rrStart, cs.rrLimit = batch, entries[start].ID, limit
	if !entries[start].Available {
		// The walk will skip it at its gate: that is the start entry being
		// skipped, so the next request starts a fresh batch.
		cs.raiseRoundRobin(entries[start].ID)
	}
	cs.mu.Unlock()

	out := make([]Entry, 0, n)
	for i := range n {
		if e := &entries[(start+i)%n]; e.Available {
			out = append(out, *e)
		}
	}
	return appendUnavailable(out, entries)
}

// P2C is the power of two choices (§10.6). Among k available entries (in
// configured order): k = 0 → configured order; k = 1 → it first; otherwise
// i = IntN(k), j = IntN(k−1) (+1 if ≥ i), and the higher score of the two
// goes first (tie: lower index), the rest following in configured order.
// Score = successRate (unknown 0.5) + 1/log₁₀(avgLatencyMs + 10) (unknown
// 0.25) − 0.25 when the breaker is HALF_OPEN, − 0.10 when DEGRADED.
type P2C struct {
	rng *lockedRand
}

// Name returns "p2c".
func (*P2C) Name() string { return NameP2C }

// Describe returns the builder line.
func (*P2C) Describe() string { return describe(NameP2C) }

// Order picks two and puts the better first.
func (p *P2C) Order(req Request, entries []Entry) []Entry {
	k := countAvailable(entries)
	if k < 2 {
		return configured(entries)
	}
	p.rng.mu.Lock()
	i := p.rng.r.IntN(k)
	j := p.rng.r.IntN(k - 1)
	p.rng.mu.Unlock()
	if j >= i {
		j++
	}
	lo, hi := min(i, j), max(i, j)
	a, b := nthAvailable(entries, lo), nthAvailable(entries, hi)
	winner := a
	if P2CScore(req.Stats, entries[b].ID) > P2CScore(req.Stats, entries[a].ID) {
		winner = b
	}
	return front(entries, winner)
}

// P2CScore is the p2c score of an entry from its live metrics (§10.6).
func P2CScore(stats Stats, entryID string) float64 {
	var st EntryStats
	if stats != nil {
		st, _ = stats.EntryStats(entryID)
	}
	score := 0.5
	if st.Samples > 0 {
		score = st.SuccessRate
	}
	if st.OKSamples > 0 {
		score += 1 / math.Log10(max(st.AvgLatencyMs, 0)+10)
	} else {
		score += 0.25
	}
	switch st.Breaker {
	case BreakerHalfOpen:
		score -= 0.25
	case BreakerDegraded:
		score -= 0.10
	}
	return score
}

// Random shuffles all entries for every request (§10.7): Fisher–Yates over
// every entry, available or not, for i = n−1 down to 1, j = IntN(i+1),
// swap(i, j).
type Random struct {
	rng *lockedRand
}

// Name returns "random".
func (*Random) Name() string { return NameRandom }

// Describe returns the builder line.
func (*Random) Describe() string { return describe(NameRandom) }

// Order shuffles.
func (r *Random) Order(_ Request, entries []Entry) []Entry {
	var buf [stackKeys]int
	perm := positionsIn(buf[:], len(entries))
	r.rng.mu.Lock()
	for i := len(perm) - 1; i >= 1; i-- {
		j := r.rng.r.IntN(i + 1)
		perm[i], perm[j] = perm[j], perm[i]
	}
	r.rng.mu.Unlock()
	return emit(entries, perm)
}

// StrictRandom deals entries from a per-combo shuffled deck (§10.13). The
// deck is rebuilt (Fisher–Yates over every entry in configured order, draws
// as Random) when it is empty, holds an id no longer in the combo, or the
// combo has ids the cycle never contained. Each request pops the front card
// c, whose turn counts even if c is unavailable. Order = [c] + cards still
// in the deck (deck order) + entries popped earlier this cycle (configured
// order).
type StrictRandom struct {
	rng   *lockedRand
	state *MemoryState
}

// Name returns "strict-random".
func (*StrictRandom) Name() string { return NameStrictRandom }

// Describe returns the builder line.
func (*StrictRandom) Describe() string { return describe(NameStrictRandom) }

// Order deals one card.
func (s *StrictRandom) Order(req Request, entries []Entry) []Entry {
	if len(entries) == 0 {
		return []Entry{}
	}
	cs := s.state.combo(req.ComboID)
	cs.mu.Lock()
	defer cs.mu.Unlock()
	pos := cs.positions(entries)
	if s.deckStale(cs, entries, pos) {
		s.rebuild(cs, entries)
	}
	c := cs.deck[0]
	cs.deck = cs.deck[1:]
	cs.popped[c] = struct{}{}

	var buf [stackKeys]int
	perm := keysIn(buf[:], len(entries))
	perm = append(perm, pos[c])
	for _, id := range cs.deck {
		perm = append(perm, pos[id])
	}
	for i, e := range entries {
		if _, ok := cs.popped[e.ID]; ok && e.ID != c {
			perm = append(perm, i)
		}
	}
	return emit(entries, perm)
}

// positions maps each entry id to its position, rebuilt only when the
// combo's entry ids changed since the last call. cs.mu is held.
func (cs *comboState) positions(entries []Entry) map[string]int {
	same := cs.pos != nil && len(cs.posIDs) == len(entries)
	for i := 0; same && i < len(entries); i++ {
		same = cs.posIDs[i] == entries[i].ID
	}
	if !same {
		cs.pos = make(map[string]int, len(entries))
		cs.posIDs = cs.posIDs[:0]
		for i, e := range entries {
			cs.pos[e.ID] = i
			cs.posIDs = append(cs.posIDs, e.ID)
		}
	}
	return cs.pos
}

// deckStale reports whether the combo's deck must be rebuilt.
func (s *StrictRandom) deckStale(cs *comboState, entries []Entry, pos map[string]int) bool {
	if len(cs.deck) == 0 {
		return true
	}
	for _, e := range entries {
		if _, ok := cs.cycle[e.ID]; !ok {
			return true // an id the cycle never contained
		}
	}
	for _, id := range cs.deck {
		if _, ok := pos[id]; !ok {
			return true // a card of a removed entry
		}
	}
	return false
}

// rebuild shuffles a new deck over every entry in configured order.
func (s *StrictRandom) rebuild(cs *comboState, entries []Entry) {
	deck := make([]string, len(entries))
	for i, e := range entries {
		deck[i] = e.ID
	}
	s.rng.mu.Lock()
	for i := len(deck) - 1; i >= 1; i-- {
		j := s.rng.r.IntN(i + 1)
		deck[i], deck[j] = deck[j], deck[i]
	}
	s.rng.mu.Unlock()
	cs.deck = deck
	cs.cycle = make(map[string]struct{}, len(deck))
	for _, id := range deck {
		cs.cycle[id] = struct{}{}
	}
	cs.popped = make(map[string]struct{}, len(deck))
}

// LeastUsed sorts by the per-(combo, entry) count of dispatches started
// (State.OnDispatch), ascending, ties configured order (§10.8). An entry
// first seen starts at the current minimum of the combo's counts (0 for the
// first entries), so a new entry does not absorb all traffic.
type LeastUsed struct {
	state *MemoryState
}

// Name returns "least-used".
func (*LeastUsed) Name() string { return NameLeastUsed }

// Describe returns the builder line.
func (*LeastUsed) Describe() string { return describe(NameLeastUsed) }

// Order sorts by dispatch count.
func (l *LeastUsed) Order(req Request, entries []Entry) []Entry {
	type keyed struct {
		pos int
		n   uint64
	}
	var buf [stackKeys]keyed
	ks := keysIn(buf[:], len(entries))
	cs := l.state.combo(req.ComboID)
	cs.mu.Lock()
	if cs.used == nil {
		cs.used = make(map[string]uint64, len(entries))
	}
	minimum, anyKnown, unseen := uint64(0), false, false
	for _, e := range entries {
		n, ok := cs.used[e.ID]
		if !ok {
			unseen = true
			continue
		}
		if !anyKnown || n < minimum {
			minimum, anyKnown = n, true
		}
	}
	if unseen {
		for _, e := range entries {
			if _, ok := cs.used[e.ID]; !ok {
				cs.used[e.ID] = minimum
			}
		}
	}
	if len(cs.used) > len(entries) {
		// Entries were removed from the combo: forget their counts.
		keep := make(map[string]struct{}, len(entries))
		for _, e := range entries {
			keep[e.ID] = struct{}{}
		}
		for id := range cs.used {
			if _, ok := keep[id]; !ok {
				delete(cs.used, id)
			}
		}
	}
	for i, e := range entries {
		if e.Available {
			ks = append(ks, keyed{pos: i, n: cs.used[e.ID]})
		}
	}
	cs.mu.Unlock()
	slices.SortStableFunc(ks, func(a, b keyed) int { return cmp.Compare(a.n, b.n) })
	out := make([]Entry, 0, len(entries))
	for _, k := range ks {
		out = append(out, entries[k.pos])
	}
	return appendUnavailable(out, entries)
}

// LKGP starts with the entry that last succeeded for the combo (§10.15):
// the recorded entry first, the rest in configured order. A record naming
// an entry no longer in the combo is deleted and ignored. Records are
// written by State.OnSuccess, only for combos this strategy orders, and
// persisted through the state's LKGPStore.
type LKGP struct {
	state *MemoryState
}

// Name returns "lkgp".
func (*LKGP) Name() string { return NameLKGP }

// Describe returns the builder line.
func (*LKGP) Describe() string { return describe(NameLKGP) }

// Order moves the recorded entry to the front.
func (l *LKGP) Order(req Request, entries []Entry) []Entry {
	cs := l.state.combo(req.ComboID)
	cs.mu.Lock()
	cs.lkgpActive = true
	rec, has := cs.lkgp, cs.hasLKGP
	cs.mu.Unlock()
	if !has {
		return configured(entries)
	}
	for i := range entries {
		if entries[i].ID == rec.EntryID {
			return front(entries, i)
		}
	}
	// The recorded entry was removed from the combo.
	cs.mu.Lock()
	stale := cs.hasLKGP && cs.lkgp.EntryID == rec.EntryID
	if stale {
		cs.hasLKGP, cs.lkgp, cs.lkgpDirty = false, LKGPRecord{}, true
	}
	cs.mu.Unlock()
	if stale {
		l.state.persist(req.ComboID, cs)
	}
	return configured(entries)
}

// PreferredConnection returns the recorded connection when entryID is the
// combo's last known good entry (§11 step 3); the account selector uses it
// if it is eligible.
func (l *LKGP) PreferredConnection(comboID, entryID string) (string, bool) {
	cs := l.state.peek(comboID)
	if cs == nil {
		return "", false
	}
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if !cs.hasLKGP || cs.lkgp.EntryID != entryID || cs.lkgp.ConnectionID == "" {
		return "", false
	}
	return cs.lkgp.ConnectionID, true
}
