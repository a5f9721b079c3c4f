package routing

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"switchyard/services"
)

func TestRegistryNamesAndDescriptions(t *testing.T) {
	reg, _, _ := newReg(t, 1, 1)
	want := []string{
		NamePriority, NameWeighted, NameRoundRobin, NameFillFirst, NameP2C, NameRandom,
		NameStrictRandom, NameLeastUsed, NameCostOptimized, NameLKGP, NameContextOptimized,
		NameCacheOptimized, NameQuotaShare, NameContextRelay, NameResetAware, NameResetWindow, NameHeadroom, NameAuto,
	}
	if len(reg) != len(want) {
		t.Fatalf("registry has %d strategies, want %d", len(reg), len(want))
	}
	for _, name := range want {
		s, ok := reg[name]
		if !ok {
			t.Errorf("%s missing", name)
			continue
		}
		if s.Name() != name {
			t.Errorf("reg[%q].Name() = %q", name, s.Name())
		}
		info, ok := services.LookupStrategy(name)
		if !ok || info.Name != name {
			t.Errorf("%s is not a services strategy", name)
		}
		if s.Describe() != info.Describe || s.Describe() == "" {
			t.Errorf("%s Describe = %q, want %q", name, s.Describe(), info.Describe)
		}
	}
}

func TestLookupFallsBackToPriority(t *testing.T) {
	reg, _, _ := newReg(t, 1, 1)
	for _, tc := range []struct {
		in, want string
		ok       bool
	}{
		{"weighted", "weighted", true},
		{"usage", "least-used", true},
		{"context", "context-optimized", true},
		{"", "priority", false},
		{"no-such-strategy", "priority", false},
		{"weekly-reset", "reset-window", true},
		{"fusion", "priority", false},
	} {
		s, ok := Lookup(reg, tc.in)
		if s.Name() != tc.want || ok != tc.ok {
			t.Errorf("Lookup(%q) = %s, %v; want %s, %v", tc.in, s.Name(), ok, tc.want, tc.ok)
		}
	}
	if s, ok := Lookup(nil, "weighted"); ok || s.Name() != NamePriority {
		t.Errorf("Lookup on an empty registry = %s, %v", s.Name(), ok)
	}
}

// TestUnavailableLastInConfiguredOrder checks the §10 partition for every
// strategy: the result is a permutation of the input, available entries
// first, unavailable ones after them in configured order, and the input is
// left untouched.
func TestUnavailableLastInConfiguredOrder(t *testing.T) {
	reg, st, _ := newReg(t, 7, 7)
	stats := StatsMap{}
	rnd := rand.New(rand.NewPCG(42, 42))
	prices := func(_, model string) (Price, bool) {
		return Price{float64(len(model)), 1}, len(model)%3 != 0
	}
	windows := func(_, model string) (int, bool) { return len(model) * 10_000, len(model)%2 == 0 }
	for round := range 200 {
		n := rnd.IntN(9)
		es := make([]Entry, n)
		for i := range es {
			id := fmt.Sprintf("e%d", i)
			es[i] = Entry{Index: i, ID: id, Provider: "p", Model: id + string(make([]byte, rnd.IntN(4))),
				ConnectionID: "c", Weight: rnd.IntN(3), Available: rnd.IntN(3) != 0}
			stats[id] = EntryStats{Samples: 10, SuccessRate: rnd.Float64(), OKSamples: 5, AvgLatencyMs: float64(rnd.IntN(3000))}
		}
		orig := slices.Clone(es)
		req := Request{ComboID: fmt.Sprintf("cb%d", round%3), Stats: stats, Prices: prices, Context: windows,
			CacheKey: "pck:x", StickyRoundRobinLimit: 1 + round%3, StickyWeightedLimit: 1 + round%2, PromptTokens: 20_000}
		for name, s := range reg {
			got := s.Order(req, es)
			if !slices.Equal(es, orig) {
				t.Fatalf("%s modified its input", name)
			}
			if len(got) != n {
				t.Fatalf("%s returned %d of %d entries", name, len(got), n)
			}
			seen := map[string]bool{}
			tail := false
			var unavail []string
			for _, e := range got {
				if seen[e.ID] {
					t.Fatalf("%s repeats %s: %v", name, e.ID, ids(got))
				}
				seen[e.ID] = true
				if !e.Available {
					tail = true
					unavail = append(unavail, e.ID)
				} else if tail {
					t.Fatalf("%s: available %s after an unavailable entry: %v", name, e.ID, ids(got))
				}
			}
			var want []string
			for _, e := range es {
				if !e.Available {
					want = append(want, e.ID)
				}
			}
			if !slices.Equal(unavail, want) {
				t.Fatalf("%s: unavailable tail %v, want configured %v", name, unavail, want)
			}
			if len(got) > 0 && got[0].Available {
				st.OnDispatch(req.ComboID, got[0].ID)
				if rnd.IntN(2) == 0 {
					st.OnSuccess(req.ComboID, got[0].ID, "c")
				} else {
					st.OnFailure(req.ComboID, got[0].ID)
				}
			}
		}
	}
}

// TestConcurrentUse runs every strategy and every hook from many goroutines
// on a few shared combos; run with -race.
func TestConcurrentUse(t *testing.T) {
	store := NewMemoryLKGPStore()
	st, err := NewMemoryState(context.Background(), StateOptions{LKGP: store})
	if err != nil {
		t.Fatal(err)
	}
	reg := NewRegistry(rand.New(rand.NewPCG(1, 1)), st)
	names := make([]string, 0, len(reg))
	for name := range reg {
		names = append(names, name)
	}
	slices.Sort(names)
	es := ents("A:3", "B:2", "C:1", "D:0", "E:5")
	es[2].Available = false
	stats := p2cStats()
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Go(func() {
			for i := range 300 {
				combo := fmt.Sprintf("cb%d", i%4)
				s := reg[names[(g+i)%len(names)]]
				req := Request{ComboID: combo, Stats: stats, CacheKey: "pck:k",
					StickyRoundRobinLimit: 2, StickyWeightedLimit: 3}
				order := s.Order(req, es)
				if len(order) != len(es) {
					t.Errorf("%s returned %d entries", s.Name(), len(order))
					return
				}
				e := order[0]
				st.OnDispatch(combo, e.ID)
				switch i % 3 {
				case 0:
					st.OnFailure(combo, e.ID)
				case 1:
					st.OnSkip(combo, e.ID)
				default:
					st.OnSuccess(combo, e.ID, fmt.Sprintf("c%d", i%2))
				}
				if p, ok := s.(ConnectionPreferrer); ok {
					p.PreferredConnection(combo, e.ID)
				}
				if i%97 == 0 {
					st.Forget(combo)
				}
			}
		})
	}
	wg.Wait()
}

// TestRoundRobinConcurrentTickets checks that concurrent requests each take
// a distinct ticket: with L = 1, n requests over n entries start at every
// entry exactly once per n.
func TestRoundRobinConcurrentTickets(t *testing.T) {
	reg, _, _ := newReg(t, 1, 1)
	rr := reg[NameRoundRobin]
	es := ents("A", "B", "C", "D")
	var mu sync.Mutex
	counts := map[string]int{}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				first := rr.Order(Request{ComboID: "cb"}, es)[0].ID
				mu.Lock()
				counts[first]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	for _, e := range es {
		if counts[e.ID] != 200 {
			t.Fatalf("starts %v, want 200 each", counts)
		}
	}
}

func TestStoreErrorsReported(t *testing.T) {
	var got []error
	var mu sync.Mutex
	st, err := NewMemoryState(context.Background(), StateOptions{
		LKGP:         failingStore{},
		OnStoreError: func(err error) { mu.Lock(); got = append(got, err); mu.Unlock() },
	})
	if err != nil {
		t.Fatal(err)
	}
	l := NewRegistry(nil, st)[NameLKGP]
	l.Order(Request{ComboID: "cb"}, ents("A"))
	st.OnSuccess("cb", "A", "c1")
	if len(got) != 1 {
		t.Fatalf("errors %v, want 1", got)
	}
	// The in-memory record is kept.
	wantOrder(t, l.Order(Request{ComboID: "cb"}, ents("B", "A")), "A", "B")
	if _, err := NewMemoryState(context.Background(), StateOptions{LKGP: failingStore{load: true}}); err == nil {
		t.Fatal("load error not returned")
	}
}

type failingStore struct{ load bool }

func (f failingStore) Load(context.Context) ([]LKGPRecord, error) {
	if f.load {
		return nil, fmt.Errorf("disk gone")
	}
	return nil, nil
}
func (failingStore) Save(context.Context, LKGPRecord) error { return fmt.Errorf("disk full") }
func (failingStore) Delete(context.Context, string) error   { return fmt.Errorf("disk full") }
