package routing

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// Acceptance cases of 30-routing §10, one test per strategy. RNG values are
// asserted twice: against a fresh PCG (the numbers the spec prints) and
// through the orders they produce.

func TestPrioritySpec(t *testing.T) {
	reg, _, _ := newReg(t, 1, 1)
	p := reg[NamePriority]
	// (1) all available.
	wantOrder(t, p.Order(Request{}, ents("A", "B", "C")), "A", "B", "C")
	// (2) A's provider breaker open → A unavailable → last.
	wantOrder(t, p.Order(Request{}, ents("A!", "B", "C")), "B", "C", "A")
	// (3) is the attempt loop's (fallback header); the order is (1).
}

func TestFillFirstSpec(t *testing.T) {
	reg, _, _ := newReg(t, 1, 1)
	f := reg[NameFillFirst]
	wantOrder(t, f.Order(Request{}, ents("A", "B")), "A", "B")
	// (2) A's only connection quota-gated → unavailable; B serves.
	wantOrder(t, f.Order(Request{}, ents("A!", "B")), "B", "A")
}

func TestWeightedSpec1(t *testing.T) {
	wantDraws(t, 8, 8, []int{100, 100, 100, 100, 100}, 4, 27, 74, 56, 96)
	reg, _, _ := newReg(t, 8, 8)
	w := reg[NameWeighted]
	es := ents("A:60", "B:30", "C:10")
	var firsts []string
	var orders [][]Entry
	for range 5 {
		o := w.Order(Request{ComboID: "cb"}, es)
		orders = append(orders, o)
		firsts = append(firsts, o[0].ID)
	}
	if fmt.Sprint(firsts) != "[A A B A C]" {
		t.Fatalf("first entries %v, want [A A B A C]", firsts)
	}
	wantOrder(t, orders[2], "B", "A", "C")
	wantOrder(t, orders[4], "C", "A", "B")
}

func TestWeightedSpec2(t *testing.T) {
	wantDraws(t, 8, 8, []int{4, 4, 4}, 1, 0, 3)
	reg, _, src := newReg(t, 8, 8)
	w := reg[NameWeighted]
	req := Request{ComboID: "cb"}
	wantOrder(t, w.Order(req, ents("A:0", "B:3", "C:1")), "B", "C", "A")
	wantOrder(t, w.Order(req, ents("A:0", "B:3", "C:1")), "B", "C", "A")
	wantOrder(t, w.Order(req, ents("A:0", "B:3", "C:1")), "C", "B", "A")
	// B's breaker open: W = 1, IntN(1) = 0 (one RNG call) → C.
	before := src.calls.Load()
	wantOrder(t, w.Order(req, ents("A:0", "B:3!", "C:1")), "C", "A", "B")
	if n := src.calls.Load() - before; n != 1 {
		t.Fatalf("W = 1 made %d RNG calls, want 1 (IntN(1))", n)
	}
	// B and C unavailable: W = 0, IntN(k = 1) = 0 → A.
	wantOrder(t, w.Order(req, ents("A:0", "B:3!", "C:1!")), "A", "B", "C")
	// Nothing available: no draw, configured order.
	before = src.calls.Load()
	wantOrder(t, w.Order(req, ents("A:0!", "B:3!", "C:1!")), "A", "B", "C")
	if n := src.calls.Load() - before; n != 0 {
		t.Fatalf("no available entry made %d RNG calls", n)
	}
}

func TestWeightedSpec3Sticky(t *testing.T) {
	// A 0, B 3, C 1 with PCG(8,8) first draws B (IntN(4) = 1).
	reg, st, src := newReg(t, 8, 8)
	w := reg[NameWeighted]
	es := ents("A:0", "B:3", "C:1")
	req := Request{ComboID: "cb", StickyWeightedLimit: 3}
	wantOrder(t, w.Order(req, es), "B", "C", "A")
	st.OnSuccess("cb", "B", "c1")
	for i := 2; i <= 3; i++ {
		before := src.calls.Load()
		wantOrder(t, w.Order(req, es), "B", "C", "A")
		if n := src.calls.Load() - before; n != 0 {
			t.Fatalf("request %d: %d RNG calls, want 0 (sticky)", i, n)
		}
		st.OnSuccess("cb", "B", "c1")
	}
	// Three consecutive successes reached L: request 4 draws again (the
	// second PCG(8,8) value, IntN(4) = 0 → B).
	before := src.calls.Load()
	wantOrder(t, w.Order(req, es), "B", "C", "A")
	if n := src.calls.Load() - before; n != 1 {
		t.Fatalf("request 4: %d RNG calls, want 1", n)
	}

	// A failure clears stickiness: the next request draws (IntN(4) = 3 → C).
	st.OnFailure("cb", "B")
	before = src.calls.Load()
	wantOrder(t, w.Order(req, es), "C", "B", "A")
	if n := src.calls.Load() - before; n != 1 {
		t.Fatalf("after failure: %d RNG calls, want 1", n)
	}
	// C is now sticky; while it is unavailable a fresh draw happens.
	before = src.calls.Load()
	o := w.Order(req, ents("A:0", "B:3", "C:1!"))
	if n := src.calls.Load() - before; n != 1 || o[0].ID != "B" {
		t.Fatalf("sticky unavailable: order %v with %d RNG calls, want B first after 1 call", ids(o), n)
	}
}

func TestRoundRobinSpec(t *testing.T) {
	starts := func(t *testing.T, limit, n int) string {
		reg, _, _ := newReg(t, 1, 1)
		rr := reg[NameRoundRobin]
		var s []string
		for range n {
			s = append(s, rr.Order(Request{ComboID: "cb", StickyRoundRobinLimit: limit}, ents("A", "B", "C"))[0].ID)
		}
		return fmt.Sprint(s)
	}
	// (1) L = 1 → A, B, C, A.
	if got := starts(t, 1, 4); got != "[A B C A]" {
		t.Fatalf("L=1 starts %s", got)
	}
	// (2) L = 2 → A, A, B, B, C, C.
	if got := starts(t, 2, 6); got != "[A A B B C C]" {
		t.Fatalf("L=2 starts %s", got)
	}
	// (3) L = 2; request 3 (s = 2, start B) fails on B, served by C →
	// ticket 3 raised to 4; request 4 (s = 4) starts at C.
	reg, st, _ := newReg(t, 1, 1)
	rr := reg[NameRoundRobin]
	req := Request{ComboID: "cb", StickyRoundRobinLimit: 2}
	es := ents("A", "B", "C")
	wantOrder(t, rr.Order(req, es), "A", "B", "C")
	wantOrder(t, rr.Order(req, es), "A", "B", "C")
	wantOrder(t, rr.Order(req, es), "B", "C", "A")
	st.OnDispatch("cb", "B")
	st.OnFailure("cb", "B")
	st.OnSuccess("cb", "C", "x")
	wantOrder(t, rr.Order(req, es), "C", "A", "B")
	wantOrder(t, rr.Order(req, es), "C", "A", "B") // s = 5, same batch
	wantOrder(t, rr.Order(req, es), "A", "B", "C") // s = 6
}

func TestRoundRobinSkipsAndUnavailableStart(t *testing.T) {
	reg, st, _ := newReg(t, 1, 1)
	rr := reg[NameRoundRobin]
	req := Request{ComboID: "cb", StickyRoundRobinLimit: 3}
	// Start A unavailable in the snapshot: it goes last and the batch ends.
	wantOrder(t, rr.Order(req, ents("A!", "B", "C")), "B", "C", "A")
	wantOrder(t, rr.Order(req, ents("A", "B", "C")), "B", "C", "A") // s = 3 → B
	// B skipped by a gate at re-check → fresh batch: s = 6 → C.
	st.OnSkip("cb", "B")
	wantOrder(t, rr.Order(req, ents("A", "B", "C")), "C", "A", "B")
	// A failure of an entry that is not the batch start changes nothing.
	st.OnFailure("cb", "A")
	wantOrder(t, rr.Order(req, ents("A", "B", "C")), "C", "A", "B") // s = 7
}

// p2cStats are the metrics of the §10.6 cases.
func p2cStats() StatsMap {
	return StatsMap{
		"A": {Samples: 100, SuccessRate: 0.90, OKSamples: 90, AvgLatencyMs: 400},
		"B": {Samples: 100, SuccessRate: 0.99, OKSamples: 99, AvgLatencyMs: 300},
		"D": {Samples: 100, SuccessRate: 0.50, OKSamples: 50, AvgLatencyMs: 2000},
	}
}

func TestP2CScores(t *testing.T) {
	st := p2cStats()
	for id, want := range map[string]float64{"A": 1.2827, "B": 1.3914, "C": 0.75, "D": 0.8027} {
		if got := P2CScore(st, id); math.Abs(got-want) > 0.00005 {
			t.Errorf("score %s = %.4f, want %.4f", id, got, want)
		}
	}
	half := p2cStats()
	b := half["B"]
	b.Breaker = BreakerHalfOpen
	half["B"] = b
	if got := P2CScore(half, "B"); math.Abs(got-1.1414) > 0.00005 {
		t.Errorf("half-open B = %.4f, want 1.1414", got)
	}
	deg := p2cStats()
	a := deg["A"]
	a.Breaker = BreakerDegraded
	deg["A"] = a
	if got := P2CScore(deg, "A"); math.Abs(got-1.1827) > 0.00005 {
		t.Errorf("degraded A = %.4f, want 1.1827", got)
	}
	if got := P2CScore(nil, "X"); got != 0.75 {
		t.Errorf("nil stats score %v, want 0.75", got)
	}
}

func TestP2CSpec(t *testing.T) {
	wantDraws(t, 2, 2, []int{4, 3, 4, 3}, 3, 2, 2, 1)
	for _, tc := range []struct {
		name   string
		stats  StatsMap
		second []string
	}{
		{"closed", p2cStats(), []string{"B", "A", "C", "D"}},
		// (3) B half-open: 1.1414, still beats C (0.75).
		{"B half-open", func() StatsMap {
			s := p2cStats()
			b := s["B"]
			b.Breaker = BreakerHalfOpen
			s["B"] = b
			return s
		}(), []string{"B", "A", "C", "D"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg, _, _ := newReg(t, 2, 2)
			p := reg[NameP2C]
			req := Request{ComboID: "cb", Stats: tc.stats}
			es := ents("A", "B", "C", "D")
			// (1) IntN(4) = 3, IntN(3) = 2 → pair (D, C) → D.
			wantOrder(t, p.Order(req, es), "D", "A", "B", "C")
			// (2) IntN(4) = 2, IntN(3) = 1 → pair (C, B) → B.
			wantOrder(t, p.Order(req, es), tc.second...)
		})
	}
}

func TestP2CFewAvailable(t *testing.T) {
	reg, _, src := newReg(t, 2, 2)
	p := reg[NameP2C]
	wantOrder(t, p.Order(Request{}, ents("A!", "B", "C!")), "B", "A", "C")
	wantOrder(t, p.Order(Request{}, ents("A!", "B!")), "A", "B")
	if n := src.calls.Load(); n != 0 {
		t.Fatalf("k < 2 made %d RNG calls", n)
	}
	// k = 3 (indexes into the available A, C, D): whatever the pair, the
	// unavailable B goes to the tail.
	o := p.Order(Request{Stats: p2cStats()}, ents("A", "B!", "C", "D"))
	if o[len(o)-1].ID != "B" {
		t.Fatalf("unavailable B not last: %v", ids(o))
	}
}

func TestRandomSpec(t *testing.T) {
	wantDraws(t, 1, 2, []int{4, 3, 2, 4, 3, 2}, 0, 1, 0, 2, 0, 0)
	reg, _, src := newReg(t, 1, 2)
	r := reg[NameRandom]
	es := ents("A", "B", "C", "D")
	// (1) 0, 1, 0 → [C, D, B, A].
	wantOrder(t, r.Order(Request{}, es), "C", "D", "B", "A")
	// (2) 2, 0, 0 → [B, D, A, C].
	wantOrder(t, r.Order(Request{}, es), "B", "D", "A", "C")
	// (3) one entry → no RNG call.
	before := src.calls.Load()
	wantOrder(t, r.Order(Request{}, ents("A")), "A")
	if n := src.calls.Load() - before; n != 0 {
		t.Fatalf("one entry made %d RNG calls", n)
	}
	// Unavailable entries are shuffled too (same calls) but go last in
	// configured order: PCG(1,2) again → [C, D, B, A] minus D → [C, B, A, D].
	reg2, _, _ := newReg(t, 1, 2)
	wantOrder(t, reg2[NameRandom].Order(Request{}, ents("A", "B", "C", "D!")), "C", "B", "A", "D")
}

func TestStrictRandomSpec(t *testing.T) {
	wantDraws(t, 2, 2, []int{3, 2, 3, 2}, 0, 0, 1, 1)
	reg, _, src := newReg(t, 2, 2)
	s := reg[NameStrictRandom]
	req := Request{ComboID: "cb"}
	es := ents("A", "B", "C")
	// (1) deck built with 0, 0 → [B, C, A].
	wantOrder(t, s.Order(req, es), "B", "C", "A")
	wantOrder(t, s.Order(req, es), "C", "A", "B")
	wantOrder(t, s.Order(req, es), "A", "B", "C")
	if n := src.calls.Load(); n != 2 {
		t.Fatalf("one cycle made %d RNG calls, want 2", n)
	}
	// (2) request 4 rebuilds with 1, 1 → deck [A, C, B].
	wantOrder(t, s.Order(req, es), "A", "C", "B")
}

func TestStrictRandomTurnsAndRebuilds(t *testing.T) {
	reg, _, src := newReg(t, 2, 2)
	s := reg[NameStrictRandom]
	req := Request{ComboID: "cb"}
	// Deck [B, C, A]; B unavailable: its turn is used, it goes last.
	wantOrder(t, s.Order(req, ents("A", "B!", "C")), "C", "A", "B")
	wantOrder(t, s.Order(req, ents("A", "B", "C")), "C", "A", "B")
	// D added: the cycle never contained it → rebuild (2 → 3 RNG calls).
	before := src.calls.Load()
	o := s.Order(req, ents("A", "B", "C", "D"))
	if n := src.calls.Load() - before; n != 3 {
		t.Fatalf("rebuild with 4 entries made %d RNG calls, want 3", n)
	}
	if len(o) != 4 {
		t.Fatalf("order %v", ids(o))
	}
	// Remove an entry still in the deck → rebuild again.
	deckHead := o[1].ID
	var rest []string
	for _, id := range []string{"A", "B", "C", "D"} {
		if id != deckHead {
			rest = append(rest, id)
		}
	}
	before = src.calls.Load()
	o = s.Order(req, ents(rest...))
	if n := src.calls.Load() - before; n != 2 || len(o) != 3 {
		t.Fatalf("removal: %d RNG calls, order %v; want a rebuild over 3", n, ids(o))
	}
}

func TestLeastUsedSpec(t *testing.T) {
	reg, st, _ := newReg(t, 1, 1)
	l := reg[NameLeastUsed]
	req := Request{ComboID: "cb"}
	es := ents("A", "B", "C")
	wantOrder(t, l.Order(req, es), "A", "B", "C") // all first seen at 0
	for id, n := range map[string]int{"A": 5, "B": 2, "C": 2} {
		for range n {
			st.OnDispatch("cb", id)
		}
	}
	// (1) A 5, B 2, C 2 → [B, C, A]; B dispatched → [C, B, A].
	wantOrder(t, l.Order(req, es), "B", "C", "A")
	st.OnDispatch("cb", "B")
	wantOrder(t, l.Order(req, es), "C", "B", "A")
	// (2) D added while the minimum is 2 → D starts at 2, ties by position.
	wantOrder(t, l.Order(req, ents("A", "B", "C", "D")), "C", "D", "B", "A")
	if n, _ := st.LeastUsedCount("cb", "D"); n != 2 {
		t.Fatalf("D starts at %d, want 2", n)
	}
	// Unavailable entries go last in configured order whatever their count.
	wantOrder(t, l.Order(req, ents("A", "B", "C!", "D")), "D", "B", "A", "C")
	// Removing an entry forgets its count.
	l.Order(req, ents("B", "C", "D"))
	if _, ok := st.LeastUsedCount("cb", "A"); ok {
		t.Fatal("count of removed A kept")
	}
}

func TestCostOptimizedSpec(t *testing.T) {
	reg, _, _ := newReg(t, 1, 1)
	c := reg[NameCostOptimized]
	prices := map[string]Price{"A": {3.00, 15.00}, "B": {0.15, 0.60}, "D": {0.15, 0.50}}
	req := Request{Prices: func(_, model string) (Price, bool) { p, ok := prices[model]; return p, ok }}
	wantOrder(t, c.Order(req, ents("A", "B", "C", "D")), "D", "B", "A", "C")
	// All unknown → configured order.
	wantOrder(t, c.Order(Request{}, ents("A", "B", "C", "D")), "A", "B", "C", "D")
	// A reference entry has no price even if the lookup would answer.
	es := ents("A", "B", "C", "D")
	es[1].ComboRef, es[1].Provider, es[1].Model = "inner", "", ""
	wantOrder(t, c.Order(req, es), "D", "A", "B", "C")
	// Unavailable D goes last.
	wantOrder(t, c.Order(req, ents("A", "B", "C", "D!")), "B", "A", "C", "D")
}

func TestLKGPSpec(t *testing.T) {
	ctx := context.Background()
	store := NewMemoryLKGPStore()
	clock := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	st, err := NewMemoryState(ctx, StateOptions{LKGP: store, Now: func() time.Time { return clock }})
	if err != nil {
		t.Fatal(err)
	}
	reg := NewRegistry(nil, st)
	l := reg[NameLKGP]
	pref := l.(ConnectionPreferrer)
	req := Request{ComboID: "cb"}
	es := ents("A", "B", "C")

	// No record → configured order; success on B via c7 records {B, c7}.
	wantOrder(t, l.Order(req, es), "A", "B", "C")
	st.OnFailure("cb", "A")
	st.OnSuccess("cb", "B", "c7")
	// (1) record {B, c7} → [B, A, C]; B is served by c7 if eligible.
	wantOrder(t, l.Order(req, es), "B", "A", "C")
	if c, ok := pref.PreferredConnection("cb", "B"); !ok || c != "c7" {
		t.Fatalf("preferred = %q %v, want c7", c, ok)
	}
	if _, ok := pref.PreferredConnection("cb", "A"); ok {
		t.Fatal("A has no preferred connection")
	}
	// (2) c7 cooling → normal account choice; success on c9 rewrites.
	clock = clock.Add(time.Minute)
	st.OnSuccess("cb", "B", "c9")
	rec, _ := st.LKGP("cb")
	if rec.EntryID != "B" || rec.ConnectionID != "c9" || !rec.UpdatedAt.Equal(clock) {
		t.Fatalf("record %+v, want {B c9 %v}", rec, clock)
	}
	// A success that changes nothing writes nothing.
	clock = clock.Add(time.Minute)
	st.OnSuccess("cb", "B", "c9")
	if rec2, _ := st.LKGP("cb"); !rec2.UpdatedAt.Equal(rec.UpdatedAt) {
		t.Fatal("unchanged success rewrote the record")
	}
	// (3) restart → the record survives.
	st2, err := NewMemoryState(ctx, StateOptions{LKGP: store})
	if err != nil {
		t.Fatal(err)
	}
	l2 := NewRegistry(nil, st2)[NameLKGP]
	wantOrder(t, l2.Order(req, es), "B", "A", "C")
	if c, ok := l2.(ConnectionPreferrer).PreferredConnection("cb", "B"); !ok || c != "c9" {
		t.Fatalf("after restart preferred = %q, want c9", c)
	}
	// Recorded B unavailable: it goes last like any unavailable entry.
	wantOrder(t, l2.Order(req, ents("A", "B!", "C")), "A", "C", "B")
	// A record naming a removed entry is deleted and ignored.
	wantOrder(t, l2.Order(req, ents("A", "C")), "A", "C")
	if _, ok := st2.LKGP("cb"); ok {
		t.Fatal("stale record kept in memory")
	}
	if recs, _ := store.Load(ctx); len(recs) != 0 {
		t.Fatalf("stale record kept in store: %+v", recs)
	}
}

func TestLKGPOnlyForLKGPCombos(t *testing.T) {
	ctx := context.Background()
	store := NewMemoryLKGPStore()
	st, _ := NewMemoryState(ctx, StateOptions{LKGP: store})
	reg := NewRegistry(nil, st)
	reg[NamePriority].Order(Request{ComboID: "other"}, ents("A", "B"))
	reg[NameRoundRobin].Order(Request{ComboID: "other"}, ents("A", "B"))
	st.OnSuccess("other", "B", "c1")
	if recs, _ := store.Load(ctx); len(recs) != 0 {
		t.Fatalf("non-lkgp combo wrote %+v", recs)
	}
	// Forget removes the stored record of a deleted combo.
	reg[NameLKGP].Order(Request{ComboID: "cb"}, ents("A", "B"))
	st.OnSuccess("cb", "A", "c1")
	if recs, _ := store.Load(ctx); len(recs) != 1 {
		t.Fatalf("records %+v, want 1", recs)
	}
	st.Forget("cb")
	if recs, _ := store.Load(ctx); len(recs) != 0 {
		t.Fatalf("Forget kept %+v", recs)
	}
}

func TestContextOptimizedSpec(t *testing.T) {
	reg, _, _ := newReg(t, 1, 1)
	c := reg[NameContextOptimized]
	windows := map[string]int{"A": 32_000, "B": 200_000, "D": 128_000}
	lookup := func(_, model string) (int, bool) { w, ok := windows[model]; return w, ok }
	es := ents("A", "B", "C", "D")
	// (1) est 50 000 + 4096 = 54 096 → [B, D, C, A].
	req := Request{PromptTokens: 50_000, MaxOutputTokens: 4096, Context: lookup}
	if req.RequiredTokens() != 54_096 {
		t.Fatalf("required %d", req.RequiredTokens())
	}
	wantOrder(t, c.Order(req, es), "B", "D", "C", "A")
	// (2) est 1000 (max_tokens unset → 4096; required 5096) → [B, D, A, C].
	req = Request{PromptTokens: 1000, Context: lookup}
	if req.RequiredTokens() != 5096 {
		t.Fatalf("required %d", req.RequiredTokens())
	}
	wantOrder(t, c.Order(req, es), "B", "D", "A", "C")
	// (3) A 128k ties D → [B, A, D, C].
	windows["A"] = 128_000
	wantOrder(t, c.Order(req, es), "B", "A", "D", "C")
	// Several too small: largest first; unavailable last.
	req = Request{PromptTokens: 150_000, Context: lookup}
	wantOrder(t, c.Order(req, es), "B", "C", "A", "D")
	wantOrder(t, c.Order(req, ents("A", "B!", "C", "D")), "C", "A", "D", "B")
	if EstimateTokens(4001) != 1001 || EstimateTokens(4000) != 1000 || EstimateTokens(0) != 0 {
		t.Fatal("EstimateTokens is not ⌈B/4⌉")
	}
}

// cacheCands are the candidates of §10.17.
func cacheCands() []Entry {
	return []Entry{
		{Index: 0, ID: "e1", Provider: "openai", Model: "gpt-4o", ConnectionID: "c1", Available: true},
		{Index: 0, ID: "e1", Provider: "openai", Model: "gpt-4o", ConnectionID: "c2", Available: true},
		{Index: 1, ID: "e2", Provider: "anthropic", Model: "claude-sonnet-4", ConnectionID: "c3", Available: true},
	}
}

func conns(es []Entry) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.ConnectionID
	}
	return out
}

func TestCacheOptimizedSpec(t *testing.T) {
	reg, _, _ := newReg(t, 1, 1)
	c := reg[NameCacheOptimized]
	for _, tc := range []struct {
		key        string
		c1, c2, c3 string // score prefixes the spec prints
		want       string
	}{
		{"conv-42", "2e035d81", "ebad1077", "bbd1788d", "[c2 c3 c1]"},
		{"conv-43", "c60d6912", "6324e09b", "e8a28d1b", "[c3 c1 c2]"},
		{"conv-44", "7148f28e", "b002c7a1", "f3c3a219", "[c3 c2 c1]"},
	} {
		t.Run(tc.key, func(t *testing.T) {
			k := CacheAffinityKey(tc.key, "sess-ignored", nil, 1024)
			if k != "pck:"+tc.key {
				t.Fatalf("key %q", k)
			}
			cands := cacheCands()
			for i, want := range []string{tc.c1, tc.c2, tc.c3} {
				got := fmt.Sprintf("%016x", CacheScore(k, CandidateIdentity(cands[i])))
				if got[:8] != want {
					t.Errorf("score %s = %s…, want %s…", CandidateIdentity(cands[i]), got[:8], want)
				}
			}
			if got := fmt.Sprint(conns(c.Order(Request{CacheKey: k}, cands))); got != tc.want {
				t.Fatalf("order %s, want %s", got, tc.want)
			}
		})
	}
	// (2) removing c2 leaves [c3, c1].
	cands := cacheCands()
	cands = append(cands[:1], cands[2])
	if got := fmt.Sprint(conns(c.Order(Request{CacheKey: "pck:conv-43"}, cands))); got != "[c3 c1]" {
		t.Fatalf("without c2: %s", got)
	}
	// No key → configured order; an unavailable winner goes last.
	if got := fmt.Sprint(conns(c.Order(Request{}, cacheCands()))); got != "[c1 c2 c3]" {
		t.Fatalf("no key: %s", got)
	}
	cands = cacheCands()
	cands[1].Available = false
	if got := fmt.Sprint(conns(c.Order(Request{CacheKey: "pck:conv-42"}, cands))); got != "[c3 c1 c2]" {
		t.Fatalf("c2 unavailable: %s", got)
	}
}

func TestCacheAffinityKey(t *testing.T) {
	long := make([]byte, 1024)
	for _, tc := range []struct {
		name, pck, sess string
		prefix          []byte
		min             int
		wantPrefix      string
	}{
		{"prompt_cache_key", "k", "s", long, 1024, "pck:k"},
		{"too long key falls through", string(make([]byte, 257)), "s", nil, 1024, "sess:s"},
		{"session", "", "s", long, 1024, "sess:s"},
		{"prefix", "", "", long, 1024, "pfx:"},
		{"short prefix", "", "", long[:1023], 1024, ""},
		{"nothing", "", "", nil, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := CacheAffinityKey(tc.pck, tc.sess, tc.prefix, tc.min)
			if tc.wantPrefix == "" && got != "" || len(got) < len(tc.wantPrefix) || got[:len(tc.wantPrefix)] != tc.wantPrefix {
				t.Fatalf("key %q, want prefix %q", got, tc.wantPrefix)
			}
			if tc.wantPrefix == "pfx:" && len(got) != 4+64 {
				t.Fatalf("pfx key %q is not hex SHA-256", got)
			}
		})
	}
	refEntry := Entry{ComboRef: "backup"}
	if id := CandidateIdentity(refEntry); id != "combo:backup" {
		t.Fatalf("reference identity %q", id)
	}
}

// TestWeightedFallbackOrder checks the counting sort of the fallbacks
// against a stable sort, in range and out of it.
func TestWeightedFallbackOrder(t *testing.T) {
	rnd := rand.New(rand.NewPCG(3, 3))
	for round := range 500 {
		n := 1 + rnd.IntN(30)
		es := make([]Entry, n)
		for i := range es {
			w := rnd.IntN(101)
			if round%5 == 0 && rnd.IntN(4) == 0 {
				w = rnd.IntN(300) - 100 // out of range: the sort fallback
			}
			es[i] = Entry{ID: fmt.Sprint(i), Weight: w, Available: rnd.IntN(4) != 0}
		}
		skip := rnd.IntN(n)
		var want []Entry
		for i, e := range es {
			if i != skip && e.Available {
				want = append(want, e)
			}
		}
		slices.SortStableFunc(want, func(a, b Entry) int { return cmp.Compare(b.Weight, a.Weight) })
		got := appendByWeight(nil, es, skip, len(want))
		if !slices.Equal(ids(got), ids(want)) {
			t.Fatalf("round %d: %v, want %v", round, ids(got), ids(want))
		}
	}
}
