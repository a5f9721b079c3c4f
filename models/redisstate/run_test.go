package redisstate_test

import (
	"context"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"

	"switchyard/models/redisstate"
	"switchyard/services"
	"switchyard/services/resilience"
	"switchyard/services/traffic"
)

// TestRunReturnsWhenTheContextEnds: every background loop of the shared
// limits returns once its context ends, and leaves no subscription behind —
// the server's shutdown waits for them, and a loop ranging over a PubSub
// channel that only Close ends used to hang it for ever.
func TestRunReturnsWhenTheContextEnds(t *testing.T) {
	subscriptions := func(mr *miniredis.Miniredis) int { return mr.PubSubNumPat() + len(mr.PubSubChannels("")) }
	loops := map[string]struct {
		run       func(*redisstate.Client) func(context.Context)
		subscribe bool
	}{
		"slots": {func(c *redisstate.Client) func(context.Context) {
			return redisstate.NewSlots(c, traffic.NewSlots(nil), redisstate.SlotsOptions{Replica: "a"}).Run
		}, true},
		"queues": {func(c *redisstate.Client) func(context.Context) {
			return redisstate.NewQueues(c, traffic.NewQueues(services.RealClock{}, nil), redisstate.QueuesOptions{Replica: "a"}).Run
		}, true},
		"window gate": {func(c *redisstate.Client) func(context.Context) {
			gate := resilience.NewWindowGate(services.RealClock{}, func() resilience.WindowGateConfig { return resilience.WindowGateConfig{Enabled: true} })
			return redisstate.NewWindowGate(c, "", "a", gate).Run
		}, true},
		"key limits": {func(c *redisstate.Client) func(context.Context) {
			return redisstate.NewKeyLimits(c, "", "a", 30*time.Second).Run
		}, true},
	}
	for name, l := range loops {
		t.Run(name, func(t *testing.T) {
			mr, c := server(t)
			run := l.run(c)
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { run(ctx); close(done) }()
			if l.subscribe {
				until(t, "the loop subscribes", func() bool { return subscriptions(mr) > 0 })
			}
			cancel()
			select {
			case <-done:
			case <-time.After(10 * time.Second): // a hang detector, not a timing assertion
				t.Fatal("Run did not return after its context ended")
			}
			until(t, "no subscription is left", func() bool { return subscriptions(mr) == 0 })
		})
	}
}

// until polls cond (bounded: a detector of what never happens).
func until(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for i := 0; !cond(); i++ {
		if i == 2000 {
			t.Fatalf("never: %s", what)
		}
		<-time.After(5 * time.Millisecond)
	}
}
