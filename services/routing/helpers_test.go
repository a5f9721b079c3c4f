package routing

import (
	"context"
	"math/rand/v2"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
)

// ents builds available entries named by their ids, in configured order.
// "A:60" sets weight 60; a trailing "!" marks the entry unavailable ("B!").
func ents(specs ...string) []Entry {
	out := make([]Entry, len(specs))
	for i, s := range specs {
		e := Entry{Index: i, Provider: "p", Weight: 1, Available: true}
		if strings.HasSuffix(s, "!") {
			e.Available = false
			s = strings.TrimSuffix(s, "!")
		}
		if id, w, ok := strings.Cut(s, ":"); ok {
			s = id
			e.Weight = atoiT(w)
		}
		e.ID, e.Model = s, s
		out[i] = e
	}
	return out
}

func atoiT(s string) int {
	n := 0
	for _, c := range s {
		n = n*10 + int(c-'0')
	}
	return n
}

// ids lists the ids of an order.
func ids(es []Entry) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.ID
	}
	return out
}

func wantOrder(t *testing.T, got []Entry, want ...string) {
	t.Helper()
	if g := ids(got); !slices.Equal(g, want) {
		t.Fatalf("order = %v, want %v", g, want)
	}
}

// countingSource wraps a PCG and counts Uint64 calls, so a test can assert
// that an Order made no RNG call. Values are those of the bare PCG.
type countingSource struct {
	src   rand.Source
	calls atomic.Int64
}

func (c *countingSource) Uint64() uint64 {
	c.calls.Add(1)
	return c.src.Uint64()
}

func pcg(a, b uint64) (*rand.Rand, *countingSource) {
	cs := &countingSource{src: rand.NewPCG(a, b)}
	return rand.New(cs), cs
}

// draws returns the values a fresh PCG(a, b) gives for IntN(ns[0]), IntN(ns[1]), …
func draws(a, b uint64, ns ...int) []int {
	r := rand.New(rand.NewPCG(a, b))
	out := make([]int, len(ns))
	for i, n := range ns {
		out[i] = r.IntN(n)
	}
	return out
}

func wantDraws(t *testing.T, a, b uint64, ns []int, want ...int) {
	t.Helper()
	if got := draws(a, b, ns...); !slices.Equal(got, want) {
		t.Fatalf("PCG(%d,%d) IntN%v = %v, want %v", a, b, ns, got, want)
	}
}

// newReg builds a registry over a fresh state with PCG(a, b).
func newReg(t *testing.T, a, b uint64) (map[string]Strategy, *MemoryState, *countingSource) {
	t.Helper()
	st, err := NewMemoryState(context.Background(), StateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r, src := pcg(a, b)
	return NewRegistry(r, st), st, src
}
