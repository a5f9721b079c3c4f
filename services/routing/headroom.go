package routing

import (
	"cmp"
	"slices"
)

// Headroom puts the connection with the most unused quota first (§10.12):
// headroom = 1 − max u over the known long windows, unknown windows counting
// as u = 0; sorted descending, ties configured order. Reference entries and
// never-observed connections have headroom 1.
//
// It is a candidate-level strategy: Request.Quota supplies the windows.
type Headroom struct{}

// Name returns "headroom".
func (Headroom) Name() string { return NameHeadroom }

// Describe returns the builder line.
func (Headroom) Describe() string { return describe(NameHeadroom) }

// Order sorts by headroom.
func (Headroom) Order(req Request, entries []Entry) []Entry {
	var buf [stackKeys]scored
	ks := keysIn(buf[:], len(entries))
	for i := range entries {
		if entries[i].Available {
			ks = append(ks, scored{pos: i, score: HeadroomOf(quotaOf(req, &entries[i]))})
		}
	}
	slices.SortStableFunc(ks, func(a, b scored) int { return cmp.Compare(b.score, a.score) })
	return emitScored(ks, entries)
}

// HeadroomOf is 1 − max u over the known long windows of v (§10.12).
func HeadroomOf(v QuotaView) float64 { return 1 - v.MaxUsed() }
