package redisstate_test

import (
	"context"
	"testing"
	"time"

	"switchyard/internal/testkit"
	"switchyard/models/redisstate"
	"switchyard/services"
	"switchyard/services/resilience"
)

func sharedGate(t *testing.T, c *redisstate.Client, replica string) *resilience.WindowGate {
	t.Helper()
	cfg := func() resilience.WindowGateConfig { return resilience.WindowGateConfig{Enabled: true} }
	g := resilience.NewWindowGate(services.RealClock{}, cfg)
	counter := redisstate.NewWindowGate(c, "", replica, g)
	g.UseCounter(counter)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go counter.Run(ctx)
	return g
}

// W2 across replicas: 14 final failures split over two replicas do not close
// the apikey gate; the 15th, on either, closes it on both; a success on one
// empties the window everywhere (W5).
func TestWindowGateThresholdAcrossReplicas(t *testing.T) {
	mr, c := server(t)
	mr.SetTime(time.Now()) // the mirrors compare the server's deadlines with their own clocks
	a, b := sharedGate(t, c, "a"), sharedGate(t, c, "b")
	ctx := context.Background()
	for i := range 14 {
		g := []*resilience.WindowGate{a, b}[i%2]
		if err := g.RecordFinalFailure(ctx, "openai", services.AuthAPIKey, "", resilience.ReasonServerError, false); err != nil {
			t.Fatal(err)
		}
	}
	if _, blocked := a.Block("openai", ""); blocked {
		t.Fatal("closed after 14 failures")
	}
	if err := b.RecordFinalFailure(ctx, "openai", services.AuthAPIKey, "", resilience.ReasonRateLimit, false); err != nil {
		t.Fatal(err)
	}
	for name, g := range map[string]*resilience.WindowGate{"b": b, "a": a} {
		if !testkit.PollUntil(5*time.Second, func() bool { _, blocked := g.Block("openai", ""); return blocked }) {
			t.Fatalf("replica %s does not see the closed gate", name)
		}
	}
	blk, _ := a.Block("openai", "")
	if blk.RetryAfter < 9*time.Minute || blk.RetryAfter > 10*time.Minute || !blk.Waitable {
		t.Fatalf("block %+v, want the apikey profile's 10 min, waitable", blk)
	}

	// W5: a success on A empties the fleet's window: 14 more on B stay open.
	for range 3 {
		_ = b.RecordFinalFailure(ctx, "anthropic", services.AuthAPIKey, "", resilience.ReasonServerError, false)
	}
	if !testkit.PollUntil(5*time.Second, func() bool { return len(a.Entries()) >= 2 }) {
		t.Fatal("A's mirror never saw B's failures")
	}
	if err := a.Success(ctx, "anthropic", ""); err != nil {
		t.Fatal(err)
	}
	for range 14 {
		_ = b.RecordFinalFailure(ctx, "anthropic", services.AuthAPIKey, "", resilience.ReasonServerError, false)
	}
	if _, blocked := b.Block("anthropic", ""); blocked {
		t.Fatal("the success on A did not empty the shared window")
	}
}

// Redis down: the gate counts in this replica and says so.
func TestWindowGateFallsBackLocally(t *testing.T) {
	mr, c := server(t)
	g := sharedGate(t, c, "a")
	mr.Close()
	var errs int
	for range 15 {
		if err := g.RecordFinalFailure(context.Background(), "openai", services.AuthAPIKey, "", resilience.ReasonServerError, false); err != nil {
			errs++
		}
	}
	if _, blocked := g.Block("openai", ""); !blocked || errs != 15 {
		t.Fatalf("local fallback: blocked %v, errors %d", blocked, errs)
	}
}
