package routing

import (
	"sort"
	"sync"
)

// QuotaShare shares accounts fairly in proportion to their weights
// (30-routing §10.20): deficit round robin with one deficit per (combo,
// candidate), and the less busy of the two most under-served candidates
// first. It is candidate level: the caller expands unpinned model entries
// into one candidate per connection. Connections at their max_concurrent
// are only demoted; admission then waits for or bypasses the slot.
type QuotaShare struct {
	mu       sync.Mutex
	deficits map[string]map[string]float64 // combo id → candidate key → d
}

// NameQuotaShare is the name of QuotaShare.
const NameQuotaShare = "quota-share"

func (*QuotaShare) Name() string { return NameQuotaShare }

func (*QuotaShare) Describe() string { return describe(NameQuotaShare) }

// candidateKey identifies a candidate across requests.
func candidateKey(e Entry) string { return e.ID + "@" + e.ConnectionID }

// Order implements Strategy.
func (q *QuotaShare) Order(req Request, entries []Entry) []Entry {
	avail := make([]Entry, 0, len(entries))
	for _, e := range entries {
		if e.Available {
			avail = append(avail, e)
		}
	}
	if len(avail) == 0 {
		return configured(entries)
	}
	inFlight := func(e Entry) int {
		if req.InFlight == nil || e.ConnectionID == "" {
			return 0
		}
		return req.InFlight(e.ConnectionID)
	}
	saturated := func(e Entry) bool {
		if req.MaxConcurrent == nil || e.ConnectionID == "" {
			return false
		}
		limit := req.MaxConcurrent(e.ConnectionID)
		return limit > 0 && inFlight(e) >= limit
	}
	var sum float64
	for _, e := range avail {
		sum += float64(e.Weight)
	}
	quantum := func(e Entry) float64 {
		if sum <= 0 {
			return 1 / float64(len(avail)) // every weight 0: equal shares
		}
		return float64(e.Weight) / sum
	}

	q.mu.Lock()
	defer q.mu.Unlock()
	if q.deficits == nil {
		q.deficits = map[string]map[string]float64{}
	}
	d := q.deficits[req.ComboID]
	if d == nil {
		d = map[string]float64{}
		q.deficits[req.ComboID] = d
	}
	type cand struct {
		e    Entry
		pos  int
		d    float64
		busy int
	}
	var open, full []cand
	for i, e := range avail {
		k := candidateKey(e)
		v := d[k] + quantum(e)
		v = min(max(v, -2), 2)
		d[k] = v
		c := cand{e: e, pos: i, d: v, busy: inFlight(e)}
		if saturated(e) {
			full = append(full, c)
		} else {
			open = append(open, c)
		}
	}
	byDeficit := func(cs []cand) {
		sort.SliceStable(cs, func(i, j int) bool { return cs[i].d > cs[j].d })
	}
	byDeficit(open)
	byDeficit(full)
	pool := open
	if len(pool) == 0 {
		pool = full // everything saturated: still choose fairly
	}
	chosen := 0
	if len(pool) > 1 {
		a, b := pool[0], pool[1]
		if b.busy < a.busy || (b.busy == a.busy && b.d > a.d) {
			chosen = 1
		}
	}
	d[candidateKey(pool[chosen].e)] -= 1
	out := make([]Entry, 0, len(entries))
	out = append(out, pool[chosen].e)
	fromOpen := len(open) > 0
	for i, c := range open {
		if fromOpen && i == chosen {
			continue
		}
		out = append(out, c.e)
	}
	for i, c := range full {
		if !fromOpen && i == chosen {
			continue
		}
		out = append(out, c.e)
	}
	return appendUnavailable(out, entries)
}

// Forget drops the deficits of a deleted combo.
func (q *QuotaShare) Forget(comboID string) {
	q.mu.Lock()
	delete(q.deficits, comboID)
	q.mu.Unlock()
}
