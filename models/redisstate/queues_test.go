package redisstate_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"switchyard/internal/testkit"
	"switchyard/models/redisstate"
	"switchyard/services"
	"switchyard/services/traffic"
)

func newQueues(t *testing.T, c *redisstate.Client, replica string) *redisstate.Queues {
	t.Helper()
	q := redisstate.NewQueues(c, traffic.NewQueues(services.RealClock{}, nil), redisstate.QueuesOptions{Replica: replica, Poll: 20 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go q.Run(ctx)
	return q
}

// Q2 across replicas: concurrentRequests 1 and maxQueueDepth 5, one running
// and five queued through two replicas → the next is refused
// RATE_LIMIT_QUEUE_FULL at once, and the queued ones go in arrival order.
func TestQueuesDepthAndFIFOAcrossReplicas(t *testing.T) {
	_, c := server(t)
	a, b := newQueues(t, c, "a"), newQueues(t, c, "b")
	cfg := traffic.QueueConfig{RequestsPerMinute: 6000, ConcurrentRequests: 1, MaxWaitMs: 15000, MaxQueueDepth: 5}
	ctx := context.Background()
	first, err := a.Admit(ctx, "p:c1", cfg)
	if err != nil {
		t.Fatal(err)
	}
	order := make(chan int, 5)
	var wg sync.WaitGroup
	for i := range 5 {
		q := []*redisstate.Queues{a, b}[i%2]
		wg.Go(func() {
			tk, err := q.Admit(ctx, "p:c1", cfg)
			if err != nil {
				t.Error(err)
				return
			}
			order <- i
			tk.Done()
		})
		if !testkit.PollUntil(5*time.Second, func() bool { return redisstate.QueueWaiting(ctx, c, "sy", "p:c1") == i+1 }) {
			t.Fatalf("waiter %d never queued", i)
		}
	}
	_, err = b.Admit(ctx, "p:c1", cfg)
	var le *traffic.LimitError
	if !errors.As(err, &le) || le.Code != traffic.CodeQueueFull || le.RetryAfter < time.Second {
		t.Fatalf("seventh request: %v", err)
	}
	first.Done()
	wg.Wait()
	close(order)
	want := 0
	for got := range order {
		if got != want {
			t.Fatalf("dispatched %d, want %d (arrival order)", got, want)
		}
		want++
	}
}

// The token bucket and the minimum spacing hold across replicas: on the
// server's clock, 3 rpm admits a burst of three, then waits.
func TestQueuesBucketAcrossReplicas(t *testing.T) {
	_, c := server(t)
	a, b := newQueues(t, c, "a"), newQueues(t, c, "b")
	cfg := traffic.QueueConfig{RequestsPerMinute: 3, MaxWaitMs: 15000, QueueWaitMs: 100}
	ctx := context.Background()
	for i, q := range []*redisstate.Queues{a, b, a} {
		tk, err := q.Admit(ctx, "p:c2", cfg)
		if err != nil {
			t.Fatalf("request %d of the burst: %v", i, err)
		}
		tk.Done()
	}
	_, err := b.Admit(ctx, "p:c2", cfg)
	var le *traffic.LimitError
	if !errors.As(err, &le) || le.Code != traffic.CodeQueueTimeout {
		t.Fatalf("fourth request within the minute: %v, want RATE_LIMIT_QUEUE_TIMEOUT after queueWaitMs", err)
	}
}

// With Redis gone the local queue decides (counted), and admission goes on.
func TestQueuesFallBackWhileRedisIsDown(t *testing.T) {
	mr, c := server(t)
	var n int
	q := redisstate.NewQueues(c, traffic.NewQueues(services.RealClock{}, nil), redisstate.QueuesOptions{Replica: "a",
		OnFallback: func(string) { n++ }})
	mr.Close()
	cfg := traffic.QueueConfig{RequestsPerMinute: 600, ConcurrentRequests: 6, MaxWaitMs: 15000}
	for range 3 {
		tk, err := q.Admit(context.Background(), "p:c3", cfg)
		if err != nil {
			t.Fatal(err)
		}
		tk.Done()
	}
	if n != 3 || !c.Degraded() {
		t.Fatalf("fallbacks %d, degraded %v", n, c.Degraded())
	}
}
