package redisstate_test

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"testing"
	"time"

	"switchyard/internal/testkit"
	"switchyard/models/redisstate"
	"switchyard/services"
	"switchyard/services/traffic"
)

// BenchmarkDispatchAdmission is the admission of one dispatch through a
// connection with a max_concurrent slot and the request queue, both
// admitting at once, against the Redis of SWITCHYARD_TEST_REDIS_URL:
// "paired" is the one script of Dispatch, "sequential" Acquire then Admit.
// The releases go to the releaser, off the measured path as in the gateway.
func BenchmarkDispatchAdmission(b *testing.B) {
	c, err := redisstate.New(testkit.RedisURL(b), redisstate.Options{CallTimeout: time.Second})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	rctx, stop := context.WithCancel(context.Background())
	released := make(chan struct{})
	go func() { c.RunReleaser(rctx); close(released) }()
	defer func() { stop(); <-released }()
	for !c.Releasing() {
		runtime.Gosched() // the releaser's goroutine marks itself running first thing
	}
	prefix := fmt.Sprintf("bench%d", os.Getpid())
	cfg := traffic.SlotConfig{Enabled: true, QueueDepth: 50, SlotWaitMs: 60_000}
	s := redisstate.NewSlots(c, traffic.NewSlots(nil), redisstate.SlotsOptions{Prefix: prefix, Replica: "b",
		Config: func() traffic.SlotConfig { return cfg }})
	q := redisstate.NewQueues(c, traffic.NewQueues(services.RealClock{}, nil), redisstate.QueuesOptions{Prefix: prefix, Replica: "b"})
	d := s.PairWith(q)
	qcfg := traffic.QueueConfig{RequestsPerMinute: 1_000_000, ConcurrentRequests: 10_000, MaxWaitMs: 30_000}
	ctx := context.Background()
	gates := traffic.DispatchGates{ConnectionID: "c1", Limit: 1000, QueueKey: "p:c1", Queue: qcfg}
	b.Run("paired", func(b *testing.B) {
		for b.Loop() {
			a := d.AdmitDispatch(ctx, gates, func() {})
			if a.SlotErr != nil || a.QueueErr != nil {
				b.Fatal(a.SlotErr, a.QueueErr)
			}
			a.Ticket.Done()
			a.Release()
		}
	})
	b.Run("sequential", func(b *testing.B) {
		for b.Loop() {
			release, _, err := s.AcquireWith(ctx, "c1", 1000, cfg)
			tk, qerr := q.Admit(ctx, "p:c1", qcfg)
			if err != nil || qerr != nil {
				b.Fatal(err, qerr)
			}
			tk.Done()
			release()
		}
	})
}
