package accounts

import (
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"
)

// poolOf builds a Pool over candidates (configured order) with an index
// map, as a caller that keeps its candidates would.
type testPool struct {
	Pool
	cands []Candidate
	index map[string]int
}

func (p *testPool) Index(id string) int {
	if i, ok := p.index[id]; ok {
		return i
	}
	return -1
}

func (p *testPool) Load(i int) (int, float64) { return p.cands[i].InFlight, p.cands[i].SuccessRate }

func poolOf(cands []Candidate) *testPool {
	p := &testPool{cands: cands, index: map[string]int{}}
	p.Src = p
	for i, c := range cands {
		p.IDs = append(p.IDs, c.ID)
		p.Backoff = append(p.Backoff, c.BackoffLevel)
		var lu atomic.Int64
		if !c.LastUsedAt.IsZero() {
			lu.Store(c.LastUsedAt.UnixMilli())
		}
		p.LastUsed = append(p.LastUsed, &lu)
		p.index[c.ID] = i
	}
	return p
}

// PickPool chooses exactly what Pick chooses, draw for draw and with the
// same per-provider state, over random pools, strategies and histories.
func TestPickPoolMatchesPick(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	names := append(Strategies(), "no-such-strategy")
	for round := range 300 {
		a := NewSelector(rand.New(rand.NewPCG(uint64(round), 7)))
		b := NewSelector(rand.New(rand.NewPCG(uint64(round), 7)))
		n := 1 + r.IntN(40)
		all := make([]Candidate, n)
		prio := 0
		for i := range all {
			prio += r.IntN(2) // configured order: priority never falls
			all[i] = Candidate{ID: fmt.Sprintf("c%03d", i), Priority: prio, CreatedAt: t0.Add(time.Duration(i) * time.Second),
				BackoffLevel: r.IntN(3) * r.IntN(2), InFlight: r.IntN(3), SuccessRate: float64(r.IntN(5)-1) / 4}
			if r.IntN(3) > 0 {
				all[i].LastUsedAt = time.UnixMilli(t0.UnixMilli() + int64(r.IntN(20))*1000)
			}
		}
		now := t0.Add(time.Hour)
		for step := range 60 {
			var cands []Candidate
			for _, c := range all {
				if r.IntN(4) > 0 {
					cands = append(cands, c)
				}
			}
			strategy, sticky, failed := names[r.IntN(len(names))], r.IntN(4), r.IntN(5) == 0
			got := -1
			if p := poolOf(cands); true {
				got = b.PickPool("prov", strategy, sticky, &p.Pool, failed)
			}
			want := a.Pick("prov", strategy, sticky, cands, failed)
			gotID := ""
			if got >= 0 {
				gotID = cands[got].ID
			}
			if gotID != want {
				t.Fatalf("round %d step %d %s sticky %d failed %v over %d: PickPool %q, Pick %q", round, step, strategy, sticky, failed, len(cands), gotID, want)
			}
			if want != "" { // the dispatch updates the connection's lastUsedAt
				now = now.Add(time.Duration(r.IntN(3)) * time.Second)
				for i := range all {
					if all[i].ID == want {
						all[i].LastUsedAt = time.UnixMilli(now.UnixMilli())
					}
				}
			}
		}
	}
}

// PickPool allocates nothing once the provider's state exists.
func TestPickPoolZeroAlloc(t *testing.T) {
	pool := benchPool(1000)
	var cands []Candidate
	for _, c := range pool {
		if !c.cooling && !c.terminal && !c.locked && !c.leased && !c.slotFull {
			cands = append(cands, c.cand)
		}
	}
	p := poolOf(cands)
	s := NewSelector(rand.New(rand.NewPCG(1, 2)))
	for _, strategy := range Strategies() {
		s.PickPool("prov", strategy, 3, &p.Pool, false)
		if n := testing.AllocsPerRun(100, func() { s.PickPool("prov", strategy, 3, &p.Pool, false) }); n != 0 {
			t.Errorf("%s: %v allocs per pick", strategy, n)
		}
	}
}
