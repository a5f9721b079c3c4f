package routing

import (
	"cmp"
	"slices"
)

// Compile-time guards.
var (
	_ Strategy            = Priority{}
	_ Strategy            = FillFirst{}
	_ Strategy            = (*Weighted)(nil)
	_ Strategy            = (*RoundRobin)(nil)
	_ Strategy            = (*P2C)(nil)
	_ Strategy            = (*Random)(nil)
	_ Strategy            = (*StrictRandom)(nil)
	_ Strategy            = (*LeastUsed)(nil)
	_ Strategy            = CostOptimized{}
	_ Strategy            = (*LKGP)(nil)
	_ Strategy            = ContextOptimized{}
	_ Strategy            = CacheOptimized{}
	_ ConnectionPreferrer = (*LKGP)(nil)
)

// Priority is the default strategy (§10.1): configured order.
type Priority struct{}

// Name returns "priority".
func (Priority) Name() string { return NamePriority }

// Describe returns the builder line.
func (Priority) Describe() string { return describe(NamePriority) }

// Order returns the configured order, unavailable entries last.
func (Priority) Order(_ Request, entries []Entry) []Entry { return configured(entries) }

// FillFirst orders exactly like Priority (§10.5): the first entry is used
// until a gate takes it out. It exists so combo and account levels share a
// vocabulary.
type FillFirst struct{}

// Name returns "fill-first".
func (FillFirst) Name() string { return NameFillFirst }

// Describe returns the builder line.
func (FillFirst) Describe() string { return describe(NameFillFirst) }

// Order returns the configured order, unavailable entries last.
func (FillFirst) Order(_ Request, entries []Entry) []Entry { return configured(entries) }

// CostOptimized sorts by input $/1M ascending, then output $/1M ascending,
// then configured order; entries with unknown price (reference entries
// included) after all known (§10.9).
type CostOptimized struct{}

// Name returns "cost-optimized".
func (CostOptimized) Name() string { return NameCostOptimized }

// Describe returns the builder line.
func (CostOptimized) Describe() string { return describe(NameCostOptimized) }

// Order sorts by price.
func (CostOptimized) Order(req Request, entries []Entry) []Entry {
	type keyed struct {
		pos   int
		known bool
		p     Price
	}
	var buf [stackKeys]keyed
	ks := keysIn(buf[:], len(entries))
	for i, e := range entries {
		if !e.Available {
			continue
		}
		k := keyed{pos: i}
		if req.Prices != nil && !e.IsRef() {
			k.p, k.known = req.Prices(e.Provider, e.Model)
		}
		ks = append(ks, k)
	}
	slices.SortStableFunc(ks, func(a, b keyed) int {
		switch {
		case a.known != b.known:
			if a.known {
				return -1
			}
			return 1
		case !a.known:
			return 0
		}
		if c := cmp.Compare(a.p.InputPerMTok, b.p.InputPerMTok); c != 0 {
			return c
		}
		return cmp.Compare(a.p.OutputPerMTok, b.p.OutputPerMTok)
	})
	out := make([]Entry, 0, len(entries))
	for _, k := range ks {
		out = append(out, entries[k.pos])
	}
	return appendUnavailable(out, entries)
}

// ContextOptimized puts first the entries whose known context window fits
// the request (largest window first), then those with an unknown window
// (configured order), then the too-small ones (largest first) (§10.16).
// Ties keep configured order.
type ContextOptimized struct{}

// Name returns "context-optimized".
func (ContextOptimized) Name() string { return NameContextOptimized }

// Describe returns the builder line.
func (ContextOptimized) Describe() string { return describe(NameContextOptimized) }

// Order sorts by context fit.
func (ContextOptimized) Order(req Request, entries []Entry) []Entry {
	const (
		fits = iota
		unknown
		tooSmall
	)
	type keyed struct {
		pos    int
		group  int
		window int
	}
	required := req.RequiredTokens()
	var buf [stackKeys]keyed
	ks := keysIn(buf[:], len(entries))
	for i, e := range entries {
		if !e.Available {
			continue
		}
		k := keyed{pos: i, group: unknown}
		if req.Context != nil && !e.IsRef() {
			if w, ok := req.Context(e.Provider, e.Model); ok {
				k.window, k.group = w, tooSmall
				if w >= required {
					k.group = fits
				}
			}
		}
		ks = append(ks, k)
	}
	slices.SortStableFunc(ks, func(a, b keyed) int {
		if c := cmp.Compare(a.group, b.group); c != 0 {
			return c
		}
		return cmp.Compare(b.window, a.window) // unknown: both 0, stays configured
	})
	out := make([]Entry, 0, len(entries))
	for _, k := range ks {
		out = append(out, entries[k.pos])
	}
	return appendUnavailable(out, entries)
}
