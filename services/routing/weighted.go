package routing

import (
	"cmp"
	"slices"
)

// Weighted draws one available entry in proportion to its weight and puts
// the other available entries after it, heaviest first (§10.2).
//
// Draw: W = Σ weights of the available entries. W > 0 → r = IntN(W); the
// first available entry (configured order) whose running weight sum
// exceeds r. W = 0 → the available entry at IntN(k). No available entry →
// no draw. With StickyWeightedLimit L > 1 the drawn entry becomes sticky:
// while it is available and has fewer than L consecutive successes
// (State.OnSuccess) it is drawn again without an RNG call; a failure
// (State.OnFailure) or reaching L clears it.
type Weighted struct {
	rng   *lockedRand
	state *MemoryState
}

// Name returns "weighted".
func (*Weighted) Name() string { return NameWeighted }

// Describe returns the builder line.
func (*Weighted) Describe() string { return describe(NameWeighted) }

// Order draws and orders.
func (w *Weighted) Order(req Request, entries []Entry) []Entry {
	k, total := 0, 0
	for i := range entries {
		if entries[i].Available {
			k++
			total += max(entries[i].Weight, 0)
		}
	}
	if k == 0 {
		return configured(entries)
	}
	limit := max(req.StickyWeightedLimit, 1)

	var drawn int
	if limit > 1 {
		drawn = w.drawSticky(req.ComboID, entries, k, total, limit)
	} else {
		drawn = w.draw(entries, k, total)
	}

	out := make([]Entry, 0, len(entries))
	out = append(out, entries[drawn])
	out = appendByWeight(out, entries, drawn, k-1)
	return appendUnavailable(out, entries)
}

// maxWeight is the largest weight of §2; appendByWeight counting-sorts
// weights 0–maxWeight.
const maxWeight = 100

// appendByWeight appends the n available entries other than entries[skip],
// heaviest first, ties in configured order. Weights within 0–maxWeight are
// counting-sorted (one pass, no allocation); anything else falls back to a
// stable sort.
func appendByWeight(out, entries []Entry, skip, n int) []Entry {
	var count [maxWeight + 1]int
	for i := range entries {
		if i == skip || !entries[i].Available {
			continue
		}
		w := entries[i].Weight
		if w < 0 || w > maxWeight {
			return appendByWeightSorted(out, entries, skip)
		}
		count[w]++
	}
	base := len(out)
	out = slices.Grow(out, n)[:base+n]
	next := count // next[w] = where the next entry of weight w goes
	off := base
	for w := maxWeight; w >= 0; w-- {
		next[w] = off
		off += count[w]
	}
	for i := range entries {
		if i == skip || !entries[i].Available {
			continue
		}
		w := entries[i].Weight
		out[next[w]] = entries[i]
		next[w]++
	}
	return out
}

// appendByWeightSorted is appendByWeight for out-of-range weights.
func appendByWeightSorted(out, entries []Entry, skip int) []Entry {
	base := len(out)
	for i := range entries {
		if i != skip && entries[i].Available {
			out = append(out, entries[i])
		}
	}
	slices.SortStableFunc(out[base:], func(a, b Entry) int { return cmp.Compare(b.Weight, a.Weight) })
	return out
}

// drawSticky draws under the combo's stickiness with limit L > 1: the
// sticky entry while it is available and below L successes (no RNG call),
// otherwise a fresh draw that becomes the sticky entry.
func (w *Weighted) drawSticky(comboID string, entries []Entry, k, total, limit int) int {
	cs := w.state.combo(comboID)
	cs.mu.Lock()
	defer cs.mu.Unlock()
	cs.wLimit = limit
	if cs.wSticky != "" && cs.wSuccesses < limit {
		for i := range entries {
			if entries[i].ID == cs.wSticky && entries[i].Available {
				return i
			}
		}
	}
	drawn := w.draw(entries, k, total) // lock order: combo, then RNG
	cs.wSticky, cs.wSuccesses = entries[drawn].ID, 0
	return drawn
}

// draw returns the position of the drawn entry; k ≥ 1 entries are
// available with total weight total.
func (w *Weighted) draw(entries []Entry, k, total int) int {
	w.rng.mu.Lock()
	defer w.rng.mu.Unlock()
	if total == 0 {
		return nthAvailable(entries, w.rng.r.IntN(k))
	}
	r := w.rng.r.IntN(total)
	sum := 0
	for i := range entries {
		if !entries[i].Available {
			continue
		}
		sum += max(entries[i].Weight, 0)
		if sum > r {
			return i
		}
	}
	return nthAvailable(entries, k-1) // unreachable: sum reaches total > r
}
