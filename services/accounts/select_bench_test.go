package accounts

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// benchConn is one connection of a 1,000-connection provider as the caller
// sees it before gates 7–12 of 30-routing §5: the states that make it
// ineligible, and the runtime figures a Candidate carries.
type benchConn struct {
	cand     Candidate
	cooling  bool // connection cooldown running
	terminal bool // banned / expired / credits exhausted
	locked   bool // model lockout for the requested model
	leased   bool // held by another key's exclusive lease
	slotFull bool // max_concurrent reached
}

// benchPool is 60-quality §5.3 (e)'s pool: 20 % cooling, 5 % terminal,
// 10 % locked for the requested model, one leased, some slots full.
func benchPool(n int) []benchConn {
	pool := make([]benchConn, n)
	for i := range pool {
		pool[i] = benchConn{
			cand: Candidate{ID: fmt.Sprintf("conn-%04d", i), Priority: i / 10, CreatedAt: t0.Add(time.Duration(i) * time.Second),
				BackoffLevel: i % 3, InFlight: i % 5, SuccessRate: float64(i%100) / 100},
			cooling:  i%5 == 1,
			terminal: i%20 == 2,
			locked:   i%10 == 3,
			leased:   i == 500,
			slotFull: i%50 == 4,
		}
	}
	return pool
}

// BenchmarkSelectorPick is the Candidate-slice selector (Selector.Pick)
// among 1,000 connections: the gates filter the pool into a reused slice
// (about 650 remain), then the strategy picks. The gateway's hot path uses
// PickPool over the columns its eligibility cache keeps instead; the
// selection target of 60-quality §5.4 is measured on the real thing,
// services/gateway BenchmarkSelectConnection. Reported for comparison.
func BenchmarkSelectorPick(b *testing.B) {
	for _, strategy := range []string{FillFirst, RoundRobin, LeastUsed, Random, P2C, StrictRandom} {
		b.Run("n=1000/"+strategy, func(b *testing.B) {
			pool := benchPool(1000)
			index := make(map[string]int, len(pool))
			for i := range pool {
				index[pool[i].cand.ID] = i
			}
			s := NewSelector(rand.New(rand.NewPCG(1, 2)))
			eligible := make([]Candidate, 0, len(pool))
			now := t0
			b.ReportAllocs()
			for b.Loop() {
				eligible = eligible[:0]
				for i := range pool {
					c := &pool[i]
					if c.cooling || c.terminal || c.locked || c.leased || c.slotFull {
						continue
					}
					eligible = append(eligible, c.cand)
				}
				id := s.Pick("prov", strategy, 3, eligible, false)
				if id == "" {
					b.Fatal("nothing picked")
				}
				now = now.Add(time.Millisecond)
				pool[index[id]].cand.LastUsedAt = now
			}
		})
	}
}
