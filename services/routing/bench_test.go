package routing

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// bench100 is a 100-entry combo with varied weights, metrics and every
// tenth entry unavailable.
func bench100() ([]Entry, StatsMap) {
	es := make([]Entry, 100)
	stats := make(StatsMap, 100)
	for i := range es {
		id := fmt.Sprintf("t%03d", i)
		es[i] = Entry{Index: i, ID: id, Provider: "openai", Model: "m" + id, Weight: 1 + i%7, Available: i%10 != 3}
		stats[id] = EntryStats{Samples: 100, SuccessRate: 0.5 + float64(i%50)/100, OKSamples: 50, AvgLatencyMs: float64(100 + 10*i)}
	}
	return es, stats
}

func benchStrategy(b *testing.B, name string) {
	es, stats := bench100()
	reg := NewRegistry(rand.New(rand.NewPCG(1, 2)), nil)
	s := reg[name]
	req := Request{ComboID: "cb", Stats: stats}
	b.ReportAllocs()
	for b.Loop() {
		if out := s.Order(req, es); len(out) != len(es) {
			b.Fatal("short order")
		}
	}
}

func BenchmarkOrder100Priority(b *testing.B) { benchStrategy(b, NamePriority) }
func BenchmarkOrder100Weighted(b *testing.B) { benchStrategy(b, NameWeighted) }
func BenchmarkOrder100P2C(b *testing.B)      { benchStrategy(b, NameP2C) }

// The others, for comparison.
func BenchmarkOrder100RoundRobin(b *testing.B)   { benchStrategy(b, NameRoundRobin) }
func BenchmarkOrder100Random(b *testing.B)       { benchStrategy(b, NameRandom) }
func BenchmarkOrder100StrictRandom(b *testing.B) { benchStrategy(b, NameStrictRandom) }
func BenchmarkOrder100LeastUsed(b *testing.B)    { benchStrategy(b, NameLeastUsed) }
