package routing

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// BenchmarkComboOrder is one ordering of a 100-entry combo (every tenth
// entry unavailable) by every strategy of the registry, with a request that
// carries everything a strategy may read: dispatch stats, prices, context
// windows, a cache key, quota windows and auto's candidate signals
// (60-quality §5.3 (e): BenchmarkComboOrder/targets=100/<strategy>, target
// ≤ 20 µs/op and ≤ 1 alloc/op).
func BenchmarkComboOrder(b *testing.B) {
	es, req := orderBenchCase()
	for _, name := range strategyNames() {
		b.Run("targets=100/"+name, func(b *testing.B) {
			s := orderBenchStrategy(name, req, es)
			b.ReportAllocs()
			for b.Loop() {
				if out := s.Order(req, es); len(out) != len(es) {
					b.Fatal("short order")
				}
			}
		})
	}
}

// TestComboOrderOneAlloc holds 60-quality §5.4's "≤ 1 alloc/op" for every
// strategy on the 100-entry combo: the returned order is the only
// allocation.
func TestComboOrderOneAlloc(t *testing.T) {
	es, req := orderBenchCase()
	for _, name := range strategyNames() {
		if name == NameAuto && raceEnabled {
			continue // auto's scratch is pooled (see raceEnabled)
		}
		s := orderBenchStrategy(name, req, es)
		s.Order(req, es) // warm per-combo state and pooled scratch
		if allocs := testing.AllocsPerRun(50, func() { s.Order(req, es) }); allocs > 1 {
			t.Errorf("%s: %.1f allocations per order, want ≤ 1", name, allocs)
		}
	}
}

func strategyNames() []string {
	names := make([]string, 0, 20)
	for n := range NewRegistry(nil, nil) {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// orderBenchStrategy is a fresh strategy name; lkgp gets a record on
// entry 57, which Order then moves to the front.
func orderBenchStrategy(name string, req Request, es []Entry) Strategy {
	state := newMemoryState(StateOptions{})
	s := NewRegistry(rand.New(rand.NewPCG(1, 2)), state)[name]
	if name == NameLKGP {
		s.Order(req, es)
		state.OnSuccess("cb", es[57].ID, "conn-1")
	}
	return s
}

// orderBenchCase is the 100-entry combo and a request with every input.
func orderBenchCase() ([]Entry, Request) {
	es, stats := bench100()
	views := make(map[string]QuotaView, len(es))
	signals := make(map[string]CandidateSignals, len(es))
	for i := range es {
		es[i].ConnectionID = "c" + es[i].ID
		views[es[i].ConnectionID] = QuotaView{
			FiveHour: win(float64(i%10)/10, time.Duration(i%5+1)*hour),
			Weekly:   win(float64(i%7)/7, time.Duration(i%6+1)*day),
		}
		signals[es[i].ID] = CandidateSignals{LatencyKnown: i%3 != 0, P95Ms: float64(500 + 10*i), StddevMs: float64(i), Tier: "pro"}
	}
	req := quotaReq("cb", views)
	req.Stats = stats
	req.Prices = func(_, model string) (Price, bool) {
		n := len(model)
		return Price{InputPerMTok: float64(n%13) / 4, OutputPerMTok: float64(n%7) * 2}, n%5 != 0
	}
	req.Context = func(_, model string) (int, bool) {
		n := int(model[len(model)-1])
		return 8000 + 1000*(n%20), n%4 != 0
	}
	req.PromptTokens, req.MaxOutputTokens = 6000, 4096
	req.CacheKey = "pck:bench-prompt-prefix"
	req.Signals = func(e Entry) CandidateSignals { return signals[e.ID] }

	return es, req
}
