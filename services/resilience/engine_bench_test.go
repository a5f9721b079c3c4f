package resilience_test

import (
	"context"
	"testing"

	"switchyard/services"
	"switchyard/services/resilience"
)

// engineWithGate is an engine over a closed breaker and a window gate in
// its resting state (empty), as almost every dispatch finds them.
func engineWithGate(tb testing.TB) *resilience.Engine {
	tb.Helper()
	br := breakerIn(tb, resilience.BreakerClosed)
	clock := &benchClock{}
	clock.Set(bkT0)
	gate := resilience.NewWindowGate(clock, func() resilience.WindowGateConfig { return wgDefaults(true) })
	doc := resilience.DefaultDocument()
	return resilience.NewEngine(clock, resilience.NewClassifier(nil, nil, clock.Now, nil), br, gate, nil, nil,
		func() *resilience.Document { return &doc }, func() resilience.EgressLockConfig { return resilience.EgressLockConfig{} })
}

// BenchmarkAllowProvider is the target-level gate of every combo target and
// single-model request: the breaker, then the window gate behind its store
// interface, whose empty check is one atomic load.
func BenchmarkAllowProvider(b *testing.B) {
	e := engineWithGate(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, blk := e.AllowProvider("deepseek", services.AuthAPIKey, ""); blk != nil {
			b.Fatal(blk)
		}
	}
}

// TestAllowProviderZeroAlloc: putting the window gate behind
// WindowGateStore added no allocation to the pre-screen or to the gate's
// part of a success.
func TestAllowProviderZeroAlloc(t *testing.T) {
	e := engineWithGate(t)
	ctx := context.Background()
	if n := testing.AllocsPerRun(1000, func() {
		if _, blk := e.AllowProvider("deepseek", services.AuthAPIKey, "c1"); blk != nil {
			t.Fatal(blk)
		}
	}); n != 0 {
		t.Fatalf("AllowProvider allocates %.1f times per call", n)
	}
	if n := testing.AllocsPerRun(1000, func() {
		if err := e.Gate.Success(ctx, "deepseek", "c1"); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Fatalf("an empty gate's Success allocates %.1f times per call", n)
	}
}
