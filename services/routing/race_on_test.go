//go:build race

package routing

// raceEnabled: the race detector makes sync.Pool drop items at random, so
// allocation counts of pooled scratch are not checked under -race.
const raceEnabled = true
