package traffic_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"switchyard/services/traffic"
)

func BenchmarkSlotsAcquireRelease(b *testing.B) {
	s := traffic.NewSlots(nil)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		release, _, err := s.Acquire(ctx, "c_1", 4)
		if err != nil {
			b.Fatal(err)
		}
		release()
	}
}

// BenchmarkSlotStoreAcquireRelease is BenchmarkSlotsAcquireRelease through
// the SlotStore interface, as the gateway calls it.
func BenchmarkSlotStoreAcquireRelease(b *testing.B) {
	var s traffic.SlotStore = traffic.NewSlots(nil)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		release, _, err := s.Acquire(ctx, "c_1", 4)
		if err != nil {
			b.Fatal(err)
		}
		release()
	}
}

func BenchmarkSlotsAcquireReleaseParallel(b *testing.B) {
	s := traffic.NewSlots(nil)
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			release, _, err := s.Acquire(ctx, "c_1", 1_000_000)
			if err != nil {
				b.Error(err)
				return
			}
			release()
		}
	})
}

// tickClock advances 1 ms at every Now, so a 1 000 000 rpm bucket never runs
// dry and the benchmark stays on the fast path.
type tickClock struct{ n atomic.Int64 }

func (c *tickClock) Now() time.Time {
	return time.Unix(1_772_000_000, 0).Add(time.Duration(c.n.Add(1)) * time.Millisecond)
}

func (c *tickClock) Wait(ctx context.Context, d time.Duration) error {
	c.n.Add(int64(d / time.Millisecond))
	return ctx.Err()
}

func BenchmarkQueuesAdmitFastPath(b *testing.B) {
	q := traffic.NewQueues(&tickClock{}, nil)
	cfg := fast(nil)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		tk, err := q.Admit(ctx, "openai:c_1", cfg)
		if err != nil {
			b.Fatal(err)
		}
		tk.Done()
	}
}

// BenchmarkRateStoreAdmitFastPath is BenchmarkQueuesAdmitFastPath through
// the RateStore interface, as the gateway calls it.
func BenchmarkRateStoreAdmitFastPath(b *testing.B) {
	var q traffic.RateStore = traffic.NewQueues(&tickClock{}, nil)
	cfg := fast(nil)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		tk, err := q.Admit(ctx, "openai:c_1", cfg)
		if err != nil {
			b.Fatal(err)
		}
		tk.Done()
	}
}

func BenchmarkDecide(b *testing.B) {
	now := time.Now()
	s := traffic.State{Running: 2, Tokens: 30, LastStart: now.Add(-time.Second)}
	cfg := traffic.DefaultQueueConfig()
	b.ReportAllocs()
	for b.Loop() {
		if d := traffic.Decide(s, cfg, now); d.Action != traffic.ActionDispatch {
			b.Fatal(d)
		}
	}
}
