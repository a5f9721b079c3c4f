package routing

import (
	"cmp"
	"slices"
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
	deficits map[string]map[candKey]float64 // combo id → candidate → d
}

// NameQuotaShare is the name of QuotaShare.
const NameQuotaShare = "quota-share"

func (*QuotaShare) Name() string { return NameQuotaShare }

func (*QuotaShare) Describe() string { return describe(NameQuotaShare) }

// candKey identifies a candidate across requests: its entry id and
// connection. A struct of the entry's own strings, so looking a deficit up
// builds no key string.
type candKey struct{ id, conn string }

// Order implements Strategy.
func (q *QuotaShare) Order(req Request, entries []Entry) []Entry {
	n, sum := 0, 0.0
	for i := range entries {
		if entries[i].Available {
			n++
			sum += float64(entries[i].Weight)
		}
	}
	if n == 0 {
		return configured(entries)
	}
	inFlight := func(e *Entry) int {
		if req.InFlight == nil || e.ConnectionID == "" {
			return 0
		}
		return req.InFlight(e.ConnectionID)
	}
	quantum := func(e *Entry) float64 {
		if sum <= 0 {
			return 1 / float64(n) // every weight 0: equal shares
		}
		return float64(e.Weight) / sum
	}

	q.mu.Lock()
	defer q.mu.Unlock()
	if q.deficits == nil {
		q.deficits = map[string]map[candKey]float64{}
	}
	d := q.deficits[req.ComboID]
	if d == nil {
		d = map[candKey]float64{}
		q.deficits[req.ComboID] = d
	}
	// cand refers to its entry by position; the sort moves these, not Entries.
	type cand struct {
		pos  int
		d    float64
		busy int
	}
	var openBuf, fullBuf [stackKeys]cand
	open, full := keysIn(openBuf[:], n), fullBuf[:0]
	for i := range entries {
		e := &entries[i]
		if !e.Available {
			continue
		}
		k := candKey{e.ID, e.ConnectionID}
		v := min(max(d[k]+quantum(e), -2), 2)
		d[k] = v
		c := cand{pos: i, d: v, busy: inFlight(e)}
		limit := 0
		if req.MaxConcurrent != nil && e.ConnectionID != "" {
			limit = req.MaxConcurrent(e.ConnectionID)
		}
		if limit > 0 && c.busy >= limit {
			full = append(full, c)
		} else {
			open = append(open, c)
		}
	}
	byDeficit := func(a, b cand) int { return cmp.Compare(b.d, a.d) }
	slices.SortStableFunc(open, byDeficit)
	slices.SortStableFunc(full, byDeficit)
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
	ce := &entries[pool[chosen].pos]
	d[candKey{ce.ID, ce.ConnectionID}] -= 1
	out := make([]Entry, 0, len(entries))
	out = append(out, *ce)
	fromOpen := len(open) > 0
	for i, c := range open {
		if fromOpen && i == chosen {
			continue
		}
		out = append(out, entries[c.pos])
	}
	for i, c := range full {
		if !fromOpen && i == chosen {
			continue
		}
		out = append(out, entries[c.pos])
	}
	return appendUnavailable(out, entries)
}

// Forget drops the deficits of a deleted combo.
func (q *QuotaShare) Forget(comboID string) {
	q.mu.Lock()
	delete(q.deficits, comboID)
	q.mu.Unlock()
}
