package routing

import "fmt"

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
