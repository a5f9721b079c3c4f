package accounts

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"
)

// The acceptance cases of 30-routing §11 use c1 p1, c2 p2, c3 p3, none used.
var t0 = time.Date(2025, 1, 1, 10, 0, 0, 0, time.UTC)

func threeConns() []Candidate {
	return []Candidate{
		{ID: "c1", Priority: 1, CreatedAt: t0, SuccessRate: -1},
		{ID: "c2", Priority: 2, CreatedAt: t0, SuccessRate: -1},
		{ID: "c3", Priority: 3, CreatedAt: t0, SuccessRate: -1},
	}
}

func pcg34() *rand.Rand { return rand.New(rand.NewPCG(3, 4)) }

// without returns c minus the given ids (a gate or an exclusion took them out).
func without(c []Candidate, ids ...string) []Candidate {
	return slices.DeleteFunc(slices.Clone(c), func(x Candidate) bool { return slices.Contains(ids, x.ID) })
}

// markUsed simulates the caller recording lastUsedAt when a dispatch starts.
func markUsed(t *testing.T, c []Candidate, id string, at time.Time) {
	t.Helper()
	for i := range c {
		if c[i].ID == id {
			c[i].LastUsedAt = at
			return
		}
	}
	t.Fatalf("markUsed: %s not among candidates", id)
}

func deckOf(s *Selector, provider string) []string {
	ps := s.state(provider)
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return slices.Clone(ps.deck)
}

// TestPCG34Draws pins the generator values the §11 cases quote, so a change in
// math/rand/v2 shows up here rather than as a puzzling strategy failure.
func TestPCG34Draws(t *testing.T) {
	r := pcg34()
	var got []int
	for range 4 {
		got = append(got, r.IntN(3))
	}
	if want := []int{2, 2, 1, 1}; !slices.Equal(got, want) {
		t.Errorf("IntN(3)×4 = %v, want %v", got, want)
	}
	r = pcg34()
	got = []int{r.IntN(3), r.IntN(2), r.IntN(3), r.IntN(2)}
	if want := []int{2, 1, 1, 1}; !slices.Equal(got, want) {
		t.Errorf("IntN(3), IntN(2), IntN(3), IntN(2) = %v, want %v", got, want)
	}
}

// Case (1).
func TestFillFirst(t *testing.T) {
	s := NewSelector(pcg34())
	all := threeConns()
	if got := s.Pick("p", FillFirst, 3, all, false); got != "c1" {
		t.Errorf("all eligible: got %s, want c1", got)
	}
	if got := s.Pick("p", FillFirst, 3, without(all, "c1"), false); got != "c2" {
		t.Errorf("c1 cooling: got %s, want c2", got)
	}
	if got := s.Pick("p", FillFirst, 3, without(all, "c1"), true); got != "c2" {
		t.Errorf("c1 failed in this request: got %s, want c2", got)
	}
}

// Case (2), first half: L = 3 → c1, c1, c1, c2, c2, c2, c3.
func TestRoundRobinSticky(t *testing.T) {
	s := NewSelector(pcg34())
	c := threeConns()
	want := []string{"c1", "c1", "c1", "c2", "c2", "c2", "c3"}
	var got []string
	for n := range want {
		id := s.Pick("p", RoundRobin, 3, c, false)
		got = append(got, id)
		markUsed(t, c, id, t0.Add(time.Duration(n+1)*time.Second))
	}
	if !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

// Case (2), second half: a request whose dispatch on c1 fails goes to LRU c2,
// with no stickiness in the fallback.
func TestRoundRobinFailedHereUsesLRU(t *testing.T) {
	tests := []struct {
		name   string
		retry  func(c []Candidate) []Candidate // the retry's eligible list
		wantID string
	}{
		// c1 excluded from the retry, as the attempt loop does.
		{"c1 excluded", func(c []Candidate) []Candidate { return without(c, "c1") }, "c2"},
		// c1 still eligible but just used: LRU still lands on c2.
		{"c1 still eligible", func(c []Candidate) []Candidate { return c }, "c2"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := NewSelector(pcg34())
			c := threeConns()
			if got := s.Pick("p", RoundRobin, 3, c, false); got != "c1" {
				t.Fatalf("first pick = %s, want c1", got)
			}
			markUsed(t, c, "c1", t0.Add(time.Second))
			if got := s.Pick("p", RoundRobin, 3, tc.retry(c), true); got != tc.wantID {
				t.Errorf("retry after failure on c1 = %s, want %s", got, tc.wantID)
			}
		})
	}
}

// The fallback neither sticks nor moves the rotation: a second failure in the
// same request goes on to the next LRU, and the next fresh request continues
// the rotation where it was ({c1, 1} → c1, consecutive 2).
func TestRoundRobinFallbackLeavesRotation(t *testing.T) {
	s := NewSelector(pcg34())
	c := threeConns()
	if got := s.Pick("p", RoundRobin, 3, c, false); got != "c1" {
		t.Fatalf("first pick = %s, want c1", got)
	}
	markUsed(t, c, "c1", t0.Add(1*time.Second))
	if got := s.Pick("p", RoundRobin, 3, without(c, "c1"), true); got != "c2" {
		t.Fatalf("first fallback = %s, want c2", got)
	}
	markUsed(t, c, "c2", t0.Add(2*time.Second))
	if got := s.Pick("p", RoundRobin, 3, without(c, "c1", "c2"), true); got != "c3" {
		t.Fatalf("second fallback = %s, want c3", got)
	}
	markUsed(t, c, "c3", t0.Add(3*time.Second))
	if got := s.Pick("p", RoundRobin, 3, c, false); got != "c1" {
		t.Errorf("next request = %s, want c1 (rotation untouched by the fallback)", got)
	}
	ps := s.state("p")
	if ps.lastID != "c1" || ps.consecutive != 2 {
		t.Errorf("rotation = {%s, %d}, want {c1, 2}", ps.lastID, ps.consecutive)
	}
}

func TestRoundRobinLRUOrder(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(c []Candidate)
		want   string
	}{
		{"never used first", func(c []Candidate) { c[0].LastUsedAt = t0; c[1].LastUsedAt = t0 }, "c3"},
		{"oldest use", func(c []Candidate) {
			c[0].LastUsedAt = t0.Add(3 * time.Second)
			c[1].LastUsedAt = t0.Add(1 * time.Second)
			c[2].LastUsedAt = t0.Add(2 * time.Second)
		}, "c2"},
		{"lower backoff beats older use", func(c []Candidate) {
			c[0].BackoffLevel, c[1].BackoffLevel = 2, 1
			c[2].LastUsedAt = t0
		}, "c3"},
		{"ties keep configured order", func(c []Candidate) {
			for i := range c {
				c[i].LastUsedAt = t0
			}
		}, "c1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := threeConns()
			tc.mutate(c)
			if got := NewSelector(pcg34()).Pick("p", RoundRobin, 3, c, false); got != tc.want {
				t.Errorf("got %s, want %s", got, tc.want)
			}
		})
	}
}

// The sticky connection is left as soon as it is not eligible, and the
// rotation restarts from LRU with consecutive = 1.
func TestRoundRobinLastIDIneligible(t *testing.T) {
	s := NewSelector(pcg34())
	c := threeConns()
	s.Pick("p", RoundRobin, 3, c, false) // c1
	markUsed(t, c, "c1", t0.Add(time.Second))
	if got := s.Pick("p", RoundRobin, 3, without(c, "c1"), false); got != "c2" {
		t.Fatalf("c1 cooling: got %s, want c2", got)
	}
	markUsed(t, c, "c2", t0.Add(2*time.Second))
	got := []string{s.Pick("p", RoundRobin, 3, c, false), s.Pick("p", RoundRobin, 3, c, false)}
	if want := []string{"c2", "c2"}; !slices.Equal(got, want) {
		t.Errorf("after c1 recovers: got %v, want %v (sticky on c2)", got, want)
	}
}

// Case (3): IntN(3) = 2, 2, 1, 1 → c3, c3, c2, c2.
func TestRandom(t *testing.T) {
	s := NewSelector(pcg34())
	c := threeConns()
	var got []string
	for range 4 {
		got = append(got, s.Pick("p", Random, 3, c, false))
	}
	if want := []string{"c3", "c3", "c2", "c2"}; !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

// Case (4): in-flight c3 = 2, others 0. IntN(3) = 2, IntN(2) = 1 → (c3, c2)
// → c2; then 1, 1 → (c2, c3) → c2.
func TestP2C(t *testing.T) {
	s := NewSelector(pcg34())
	c := threeConns()
	c[2].InFlight = 2
	got := []string{s.Pick("p", P2C, 3, c, false), s.Pick("p", P2C, 3, c, false)}
	if want := []string{"c2", "c2"}; !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

// With two candidates the pair is always {c1, c2} whatever the draws, so each
// tie-break can be checked on its own, with the pair drawn both ways round.
func TestP2CTieBreaks(t *testing.T) {
	tests := []struct {
		name   string
		c1, c2 Candidate
		want   string
	}{
		{"fewer in flight", Candidate{InFlight: 3}, Candidate{InFlight: 1, BackoffLevel: 5}, "c2"},
		{"lower backoff", Candidate{BackoffLevel: 1, SuccessRate: 1}, Candidate{SuccessRate: 0}, "c2"},
		{"higher success rate", Candidate{SuccessRate: 0.4}, Candidate{SuccessRate: 0.6}, "c2"},
		{"unknown counts as 0.5 (beats 0.4)", Candidate{SuccessRate: 0.4}, Candidate{SuccessRate: -1}, "c2"},
		{"unknown counts as 0.5 (loses to 0.6)", Candidate{SuccessRate: -1}, Candidate{SuccessRate: 0.6}, "c2"},
		{"unknown equals 0.5: configured order", Candidate{SuccessRate: 0.5}, Candidate{SuccessRate: -1}, "c1"},
		{"full tie: configured order", Candidate{}, Candidate{}, "c1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.c1.ID, tc.c1.Priority = "c1", 1
			tc.c2.ID, tc.c2.Priority = "c2", 2
			for seed := range uint64(8) {
				s := NewSelector(rand.New(rand.NewPCG(seed, seed)))
				if got := s.Pick("p", P2C, 3, []Candidate{tc.c1, tc.c2}, false); got != tc.want {
					t.Fatalf("seed %d: got %s, want %s", seed, got, tc.want)
				}
			}
		})
	}
}

// k = 1 → it, without a draw.
func TestP2CSingleCandidateNoDraw(t *testing.T) {
	rng := pcg34()
	s := NewSelector(rng)
	if got := s.Pick("p", P2C, 3, threeConns()[:1], false); got != "c1" {
		t.Fatalf("got %s, want c1", got)
	}
	if got, want := rng.Uint64(), pcg34().Uint64(); got != want {
		t.Errorf("the rng was drawn from for a single candidate")
	}
}

// Case (5): lastUsedAt c1 10:00:05, c2 10:00:01, c3 never → c3.
func TestLeastUsed(t *testing.T) {
	c := threeConns()
	c[0].LastUsedAt = t0.Add(5 * time.Second)
	c[1].LastUsedAt = t0.Add(1 * time.Second)
	s := NewSelector(pcg34())
	if got := s.Pick("p", LeastUsed, 3, c, false); got != "c3" {
		t.Errorf("got %s, want c3", got)
	}
	// Then, recording each start: c2 (oldest), c1, c3, c2, … — and ties keep
	// configured order.
	markUsed(t, c, "c3", t0.Add(10*time.Second))
	var got []string
	for n := range 3 {
		id := s.Pick("p", LeastUsed, 3, c, false)
		got = append(got, id)
		markUsed(t, c, id, t0.Add(time.Duration(11+n)*time.Second))
	}
	if want := []string{"c2", "c1", "c3"}; !slices.Equal(got, want) {
		t.Errorf("after c3: got %v, want %v", got, want)
	}
	tie := threeConns()
	for i := range tie {
		tie[i].LastUsedAt = t0
	}
	if got := s.Pick("p", LeastUsed, 3, tie, false); got != "c1" {
		t.Errorf("tie: got %s, want c1", got)
	}
}

// Case (6): deck built with 2, 1 → [c1, c2, c3]; c1; then c2 cooling → c3;
// then c2; next rebuild with 1, 1 → [c1, c3, c2].
//
// The variant that reproduces it is the classic descending Fisher–Yates:
// for i from len−1 down to 1, j = IntN(i+1), swap(i, j). With PCG(3, 4) the
// first build draws IntN(3) = 2, IntN(2) = 1 (both swaps are no-ops) and the
// rebuild draws IntN(3) = 1 (swap c3↔c2), IntN(2) = 1 (no-op).
func TestStrictRandom(t *testing.T) {
	s := NewSelector(pcg34())
	all := threeConns()

	if got := s.Pick("p", StrictRandom, 3, all, false); got != "c1" {
		t.Fatalf("pick 1 = %s, want c1", got)
	}
	if d := deckOf(s, "p"); !slices.Equal(d, []string{"c2", "c3"}) {
		t.Fatalf("deck after pick 1 = %v, want [c2 c3] (built [c1 c2 c3])", d)
	}
	if got := s.Pick("p", StrictRandom, 3, without(all, "c2"), false); got != "c3" {
		t.Fatalf("pick 2 (c2 cooling) = %s, want c3", got)
	}
	if d := deckOf(s, "p"); !slices.Equal(d, []string{"c2"}) {
		t.Fatalf("deck after pick 2 = %v, want [c2] (the cooling card stays)", d)
	}
	if got := s.Pick("p", StrictRandom, 3, all, false); got != "c2" {
		t.Fatalf("pick 3 = %s, want c2", got)
	}
	if got := s.Pick("p", StrictRandom, 3, all, false); got != "c1" {
		t.Fatalf("pick 4 (rebuild) = %s, want c1", got)
	}
	if d := deckOf(s, "p"); !slices.Equal(d, []string{"c3", "c2"}) {
		t.Fatalf("deck after rebuild = %v, want [c3 c2] (built [c1 c3 c2])", d)
	}
	got := []string{s.Pick("p", StrictRandom, 3, all, false), s.Pick("p", StrictRandom, 3, all, false)}
	if want := []string{"c3", "c2"}; !slices.Equal(got, want) {
		t.Errorf("picks 5–6 = %v, want %v", got, want)
	}
}

// No card eligible now → rebuild from the current eligible list; the old
// cards (cooling ones included) go with the old deck.
func TestStrictRandomRebuildWhenNoCardEligible(t *testing.T) {
	s := NewSelector(pcg34())
	all := threeConns()
	s.Pick("p", StrictRandom, 3, all, false) // deck [c2 c3]
	got := s.Pick("p", StrictRandom, 3, without(all, "c2", "c3"), false)
	if got != "c1" {
		t.Fatalf("got %s, want c1", got)
	}
	if d := deckOf(s, "p"); len(d) != 0 {
		t.Errorf("deck = %v, want empty (rebuilt from [c1] alone)", d)
	}
}

// Cards of deleted connections are discarded.
func TestStrictRandomDeletedConnection(t *testing.T) {
	s := NewSelector(pcg34())
	all := threeConns()
	s.Pick("p", StrictRandom, 3, all, false) // deck [c2 c3]
	s.ForgetConnection("p", "c2")
	if d := deckOf(s, "p"); !slices.Equal(d, []string{"c3"}) {
		t.Fatalf("deck = %v, want [c3]", d)
	}
	rest := without(all, "c2")
	if got := s.Pick("p", StrictRandom, 3, rest, false); got != "c3" {
		t.Errorf("got %s, want c3", got)
	}
}

// A rebuilt-and-dealt-out round uses each connection exactly once.
func TestStrictRandomRoundsUseEachOnce(t *testing.T) {
	s := NewSelector(rand.New(rand.NewPCG(1, 2)))
	c := candidates(7)
	for round := range 5 {
		seen := map[string]int{}
		for range len(c) {
			seen[s.Pick("p", StrictRandom, 3, c, false)]++
		}
		if len(seen) != len(c) {
			t.Fatalf("round %d used %d distinct connections, want %d: %v", round, len(seen), len(c), seen)
		}
	}
}

func TestForget(t *testing.T) {
	s := NewSelector(pcg34())
	c := threeConns()
	s.Pick("p", RoundRobin, 3, c, false) // {c1, 1}
	s.Pick("q", RoundRobin, 3, c, false)
	markUsed(t, c, "c1", t0)
	s.Forget("p")
	if got := s.Pick("p", RoundRobin, 3, c, false); got != "c2" {
		t.Errorf("p after Forget = %s, want c2 (LRU, stickiness dropped)", got)
	}
	if got := s.Pick("q", RoundRobin, 3, c, false); got != "c1" {
		t.Errorf("q = %s, want c1 (its state kept)", got)
	}
}

func TestUnknownStrategyIsFillFirst(t *testing.T) {
	s := NewSelector(pcg34())
	c := threeConns()
	for _, name := range []string{"", "weighted", "Round-Robin", "nope"} {
		if got := s.Pick("p", name, 3, c, false); got != "c1" {
			t.Errorf("%q: got %s, want c1", name, got)
		}
		if got := s.Pick("p", name, 3, without(c, "c1"), false); got != "c2" {
			t.Errorf("%q, c1 cooling: got %s, want c2", name, got)
		}
	}
}

func TestEmptyEligible(t *testing.T) {
	s := NewSelector(pcg34())
	for _, name := range append(Strategies(), "unknown") {
		for _, failed := range []bool{false, true} {
			if got := s.Pick("p", name, 3, nil, failed); got != "" {
				t.Errorf("%s (failedHere %v): got %q, want \"\"", name, failed, got)
			}
			if got := s.Pick("p", name, 3, []Candidate{}, failed); got != "" {
				t.Errorf("%s (failedHere %v), empty slice: got %q, want \"\"", name, failed, got)
			}
		}
	}
}

func TestStrategies(t *testing.T) {
	want := []string{"fill-first", "round-robin", "p2c", "random", "least-used", "strict-random"}
	got := Strategies()
	if !slices.Equal(got, want) {
		t.Fatalf("Strategies() = %v, want %v", got, want)
	}
	got[0] = "changed"
	if Strategies()[0] != "fill-first" {
		t.Error("Strategies() shares its slice with the caller")
	}
	for _, name := range want {
		if _, ok := strategies[name]; !ok {
			t.Errorf("%s is listed but not implemented", name)
		}
	}
}

// Out-of-order input is sorted into configured order (priority, created, id)
// on a private copy; the caller's slice is left as it was.
func TestPickSortsDefensively(t *testing.T) {
	ordered := []Candidate{
		{ID: "a", Priority: 1, CreatedAt: t0},
		{ID: "b", Priority: 1, CreatedAt: t0.Add(time.Second)},
		{ID: "c", Priority: 1, CreatedAt: t0.Add(time.Second)},
		{ID: "d", Priority: 2, CreatedAt: t0.Add(-time.Hour)},
	}
	shuffled := []Candidate{ordered[3], ordered[2], ordered[0], ordered[1]}
	before := slices.Clone(shuffled)
	for _, name := range Strategies() {
		a := NewSelector(pcg34())
		b := NewSelector(pcg34())
		for n := range 6 {
			want := a.Pick("p", name, 2, ordered, false)
			got := b.Pick("p", name, 2, shuffled, false)
			if got != want {
				t.Errorf("%s pick %d: shuffled input gave %s, ordered gave %s", name, n, got, want)
			}
		}
	}
	if !slices.Equal(shuffled, before) {
		t.Errorf("caller's slice was reordered: %v", shuffled)
	}
}

func TestNilRNG(t *testing.T) {
	s := NewSelector(nil)
	c := threeConns()
	for _, name := range Strategies() {
		if got := s.Pick("p", name, 3, c, false); !slices.ContainsFunc(c, func(x Candidate) bool { return x.ID == got }) {
			t.Errorf("%s: got %q, not a candidate", name, got)
		}
	}
}

// Many goroutines on several providers and every strategy; run with -race.
// Strict-random's decks must still deal each connection equally often, since
// every pick is a whole-deck operation under the provider's lock.
func TestConcurrentPick(t *testing.T) {
	const (
		goroutines = 16
		perG       = 300
		providers  = 4
	)
	s := NewSelector(rand.New(rand.NewPCG(7, 7)))
	base := candidates(5)
	var mu sync.Mutex
	counts := map[string]map[string]int{} // strict-random provider → id → picks
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			c := slices.Clone(base) // each goroutine its own view, like a request
			local := map[string]map[string]int{}
			for n := range perG {
				provider := fmt.Sprintf("p%d", n%providers)
				name := Strategies()[(g+n)%len(Strategies())]
				if n%providers == 0 {
					name = StrictRandom // p0 is strict-random only
				} else if name == StrictRandom {
					name = RoundRobin
				}
				id := s.Pick(provider, name, 3, c, n%7 == 0)
				if !slices.ContainsFunc(c, func(x Candidate) bool { return x.ID == id }) {
					t.Errorf("%s on %s: got %q, not a candidate", name, provider, id)
					return
				}
				if name == StrictRandom {
					if local[provider] == nil {
						local[provider] = map[string]int{}
					}
					local[provider][id]++
				}
				c[indexOf(c, id)].LastUsedAt = t0.Add(time.Duration(n) * time.Millisecond)
				if n%50 == 0 {
					s.Forget(fmt.Sprintf("p%d", 1+n%(providers-1))) // never p0
				}
			}
			mu.Lock()
			for p, m := range local {
				if counts[p] == nil {
					counts[p] = map[string]int{}
				}
				for id, k := range m {
					counts[p][id] += k
				}
			}
			mu.Unlock()
		})
	}
	wg.Wait()
	total := goroutines * perG / providers
	for _, c := range base {
		if got, want := counts["p0"][c.ID], total/len(base); got != want {
			t.Errorf("strict-random p0: %s dealt %d times, want %d", c.ID, got, want)
		}
	}
}

// candidates returns n connections in configured order, never used.
func candidates(n int) []Candidate {
	c := make([]Candidate, n)
	for i := range c {
		c[i] = Candidate{
			ID:          fmt.Sprintf("conn-%04d", i),
			Priority:    i / 10,
			CreatedAt:   t0.Add(time.Duration(i) * time.Second),
			SuccessRate: -1,
			InFlight:    i % 3,
		}
	}
	return c
}

// BenchmarkPick measures one Pick over 1,000 eligible connections. Each
// iteration records lastUsedAt for the chosen connection as the caller would,
// so round-robin keeps rotating (L = 3) rather than sticking forever.
func BenchmarkPick(b *testing.B) {
	for _, name := range []string{RoundRobin, P2C, FillFirst, Random, LeastUsed, StrictRandom} {
		b.Run(name, func(b *testing.B) {
			c := candidates(1000)
			index := make(map[string]int, len(c))
			for i := range c {
				index[c[i].ID] = i
			}
			s := NewSelector(rand.New(rand.NewPCG(1, 2)))
			now := t0
			b.ReportAllocs()
			for b.Loop() {
				id := s.Pick("prov", name, 3, c, false)
				now = now.Add(time.Millisecond)
				c[index[id]].LastUsedAt = now
			}
		})
	}
}
