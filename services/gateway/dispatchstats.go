package gateway

import (
	"math"
	"sort"
	"sync"
	"time"

	"switchyard/services/resilience"
	"switchyard/services/routing"
)

// ringSize is the number of upstream outcomes kept per (provider, model,
// connection) (30-routing §8.1).
const ringSize = 100

// statRing is the ring of the last ringSize outcomes of one (provider,
// model, connection).
type statRing struct {
	ok  [ringSize]bool
	lat [ringSize]float64 // ms; meaningful for ok samples only
	n   int               // samples held, ≤ ringSize
	at  int               // next slot
}

func (r *statRing) add(ok bool, latencyMs float64) {
	r.ok[r.at], r.lat[r.at] = ok, latencyMs
	r.at = (r.at + 1) % ringSize
	if r.n < ringSize {
		r.n++
	}
}

// connStats holds the rings of one connection, one per model, behind the
// connection's own mutex: recording never takes a lock shared by other
// connections.
type connStats struct {
	mu    sync.Mutex
	rings map[string]*statRing // provider + "\x00" + model
}

// DispatchStats are the live dispatch metrics of 30-routing §8.1: per
// (provider, model, connection) the last 100 upstream outcomes. They feed
// p2c and the combo page; in memory, empty after a restart.
type DispatchStats struct {
	conns sync.Map // connection id → *connStats
}

func (d *DispatchStats) conn(id string) *connStats {
	if v, ok := d.conns.Load(id); ok {
		return v.(*connStats)
	}
	v, _ := d.conns.LoadOrStore(id, &connStats{rings: map[string]*statRing{}})
	return v.(*connStats)
}

// Record adds one outcome. Callers skip caller_error, client_abort and
// local_limit failures, which say nothing about the target.
func (d *DispatchStats) Record(provider, model, connID string, ok bool, latency time.Duration) {
	cs := d.conn(connID)
	key := provider + "\x00" + model
	cs.mu.Lock()
	r := cs.rings[key]
	if r == nil {
		r = &statRing{}
		cs.rings[key] = r
	}
	r.add(ok, float64(latency)/float64(time.Millisecond))
	cs.mu.Unlock()
}

// Forget drops the rings of a deleted connection.
func (d *DispatchStats) Forget(connID string) { d.conns.Delete(connID) }

// TargetStats are the merged metrics of one target: its pinned connection,
// or every listed connection of its provider.
type TargetStats struct {
	Samples      int      `json:"samples"`
	SuccessRate  *float64 `json:"successRate"`  // nil = unknown (no samples)
	AvgLatencyMs *float64 `json:"avgLatencyMs"` // nil = unknown (no ok samples)
	P95LatencyMs *float64 `json:"p95LatencyMs"` // nil below 10 ok samples
	StddevMs     *float64 `json:"stddevMs"`     // nil below 10 ok samples
	okSamples    int
}

// Merge reads the rings of (provider, model) on the given connections.
func (d *DispatchStats) Merge(provider, model string, connIDs []string) TargetStats {
	key := provider + "\x00" + model
	var total, oks int
	var lats []float64
	for _, id := range connIDs {
		v, ok := d.conns.Load(id)
		if !ok {
			continue
		}
		cs := v.(*connStats)
		cs.mu.Lock()
		if r := cs.rings[key]; r != nil {
			for i := 0; i < r.n; i++ {
				total++
				if r.ok[i] {
					oks++
					lats = append(lats, r.lat[i])
				}
			}
		}
		cs.mu.Unlock()
	}
	out := TargetStats{Samples: total, okSamples: oks}
	if total == 0 {
		return out
	}
	rate := float64(oks) / float64(total)
	out.SuccessRate = &rate
	if oks == 0 {
		return out
	}
	var sum float64
	for _, l := range lats {
		sum += l
	}
	mean := sum / float64(oks)
	out.AvgLatencyMs = &mean
	if oks >= 10 {
		sort.Float64s(lats)
		p95 := lats[int(math.Ceil(0.95*float64(oks)))-1]
		var ss float64
		for _, l := range lats {
			ss += (l - mean) * (l - mean)
		}
		sd := math.Sqrt(ss / float64(oks))
		out.P95LatencyMs, out.StddevMs = &p95, &sd
	}
	return out
}

// recordable reports whether a failure reason enters the rings (§8.1).
func recordable(r resilience.Reason) bool {
	switch r {
	case resilience.ReasonCallerError, resilience.ReasonClientAbort, resilience.ReasonLocalLimit:
		return false
	}
	return true
}

// entryStats is the routing.Stats of one ordering: it merges, on demand,
// the rings of the connections each entry can use. p2c reads two entries
// per request, so nothing is computed up front.
type entryStats struct {
	g       *Gateway
	snap    *Snapshot
	entries map[string]routing.Entry
}

func (e *entryStats) EntryStats(entryID string) (routing.EntryStats, bool) {
	en, ok := e.entries[entryID]
	if !ok || en.IsRef() {
		return routing.EntryStats{}, false
	}
	ts := e.g.stats.Merge(en.Provider, en.Model, e.g.connIDs(e.snap, en.Provider, en.ConnectionID))
	out := routing.EntryStats{Samples: ts.Samples, OKSamples: ts.okSamples}
	if ts.SuccessRate != nil {
		out.SuccessRate = *ts.SuccessRate
	}
	if ts.AvgLatencyMs != nil {
		out.AvgLatencyMs = *ts.AvgLatencyMs
	}
	out.Breaker = routing.BreakerState(e.g.res.Breakers.Status(en.Provider).State)
	return out, true
}

// connIDs lists the connections a target can use: the pinned one, or every
// connection of the provider.
func (g *Gateway) connIDs(s *Snapshot, provider, pinned string) []string {
	if pinned != "" {
		return []string{pinned}
	}
	conns := s.Connections(provider)
	ids := make([]string, len(conns))
	for i, c := range conns {
		ids[i] = c.ID
	}
	return ids
}

// TargetStats returns the live metrics of one combo target (the combo page
// and POST /api/combos/{id}/test read them).
func (g *Gateway) TargetStats(provider, model, connID string) TargetStats {
	return g.stats.Merge(provider, model, g.connIDs(g.reg.Snapshot(), provider, connID))
}

// ForgetCombo drops the per-combo state strategies keep outside the shared
// routing state (quota-share deficits, rotation counters) for a deleted
// combo.
func (g *Gateway) ForgetCombo(comboID string) {
	for _, s := range g.strategies {
		if f, ok := s.(interface{ Forget(comboID string) }); ok {
			f.Forget(comboID)
		}
	}
}

// ForgetConnection drops the dispatch metrics of a deleted connection.
func (g *Gateway) ForgetConnection(connID string) { g.stats.Forget(connID) }
