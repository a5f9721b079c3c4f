package resilience_test

import (
	"context"
	"testing"
	"time"

	"switchyard/internal/testkit"
	"switchyard/services"
	"switchyard/services/resilience"
)

// The failure that opens a provider's breaker says so in its effects
// (request log effects[] "breaker_opened", the attempt timeline's "breaker
// opened"); the failures before it only count.
func TestFailureThatOpensTheBreakerReportsIt(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	set := mdlSettings{failThr: 2, resetMs: 10000, halfOpen: 1, maxMult: 1, cdBase: 1000, cdMax: 1000}
	sys := &mdlSystem{clock: testkit.NewFakeClock(t0), t0: t0, doc: resilience.DefaultDocument(), brStore: resilience.NewMemoryBreakerStore(),
		cdStore: resilience.NewMemoryConnectionStateStore(), loStore: resilience.NewMemoryLockoutStore(),
		provider: map[string]string{"c0": "prov0", "c1": "prov0"}, mirrors: 1}
	if err := sys.build(set); err != nil {
		t.Fatal(err)
	}
	kinds := func(o resilience.Outcome) (counted, opened bool) {
		for _, e := range o.Effects {
			counted = counted || e.Kind == "breaker_counted"
			opened = opened || e.Kind == "breaker_opened"
		}
		return counted, opened
	}
	for i, conn := range []string{"c0", "c1"} {
		adm, blk := sys.engine.AllowProvider("prov0", services.AuthAPIKey, "")
		if blk != nil {
			t.Fatalf("failure %d refused: %+v", i+1, blk)
		}
		ref := resilience.ConnRef{ID: conn, Provider: "prov0", Profile: services.AuthAPIKey}
		out := sys.engine.Failure(context.Background(), adm, ref, sys.failureOf(conn, "m-a", kind503, 0), nil)
		counted, opened := kinds(out)
		if !counted || opened != (i == 1) {
			t.Errorf("failure %d effects %+v: want breaker_counted, and breaker_opened only on the second", i+1, out.Effects)
		}
	}
	if st := sys.engine.Breakers.Status("prov0"); st.State != resilience.BreakerOpen {
		t.Fatalf("breaker %s after two failures, want OPEN", st.State)
	}
}
