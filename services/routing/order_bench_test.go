package routing

import (
	"math/rand/v2"
	"testing"
)

// BenchmarkComboOrder covers the strategies bench_test.go's
// BenchmarkOrder100* does not (priority, weighted, p2c, round-robin, random,
// strict-random and least-used are there), on the same 100-entry combo
// (60-quality §5.3 (e): BenchmarkComboOrder/targets=100/<strategy>, target
// ≤ 20 µs/op and ≤ 1 alloc/op).
func BenchmarkComboOrder(b *testing.B) {
	es, stats := bench100()
	prices := func(_, model string) (Price, bool) {
		n := len(model)
		return Price{InputPerMTok: float64(n%13) / 4, OutputPerMTok: float64(n%7) * 2}, n%5 != 0
	}
	windows := func(_, model string) (int, bool) {
		n := int(model[len(model)-1])
		return 8000 + 1000*(n%20), n%4 != 0
	}
	cases := []struct {
		name  string
		req   Request
		setup func(reg map[string]Strategy, state *MemoryState)
	}{
		{name: NameFillFirst},
		{name: NameCostOptimized, req: Request{Prices: prices}},
		{name: NameContextOptimized, req: Request{Context: windows, PromptTokens: 6000, MaxOutputTokens: 4096}},
		{name: NameCacheOptimized, req: Request{CacheKey: "pck:bench-prompt-prefix"}},
		{name: NameLKGP, setup: func(reg map[string]Strategy, state *MemoryState) {
			// A last-known-good record on entry 57: Order moves it to the front.
			reg[NameLKGP].Order(Request{ComboID: "cb"}, es)
			state.OnSuccess("cb", es[57].ID, "conn-1")
		}},
	}
	for _, c := range cases {
		b.Run("targets=100/"+c.name, func(b *testing.B) {
			state := newMemoryState(StateOptions{})
			reg := NewRegistry(rand.New(rand.NewPCG(1, 2)), state)
			if c.setup != nil {
				c.setup(reg, state)
			}
			s := reg[c.name]
			req := c.req
			req.ComboID, req.Stats = "cb", stats
			b.ReportAllocs()
			for b.Loop() {
				if out := s.Order(req, es); len(out) != len(es) {
					b.Fatal("short order")
				}
			}
		})
	}
}
