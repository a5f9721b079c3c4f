package redisstate_test

import (
	"context"
	"testing"
	"time"

	"switchyard/models/redisstate"
)

// 120 requests per minute over three replicas: a burst of 120, then 2 per
// second — 9 requests per second for 20 s (180 sent) admit 120 + 2 × 20.
func TestKeyLimitsRateAcrossReplicas(t *testing.T) {
	mr, c := server(t)
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	replicas := []*redisstate.KeyLimits{
		redisstate.NewKeyLimits(c, "", "a", 0), redisstate.NewKeyLimits(c, "", "b", 0), redisstate.NewKeyLimits(c, "", "c", 0)}
	admitted := 0
	var lastRefusal redisstate.KeyDecision
	for i := range 180 {
		setTime(mr, t0.Add(time.Duration(i)*time.Second/9))
		d, err := replicas[i%3].Admit(context.Background(), "k1", 120, 0)
		if err != nil {
			t.Fatal(err)
		}
		if d.Admitted {
			admitted++
		} else {
			lastRefusal = d
		}
	}
	if admitted < 159 || admitted > 161 {
		t.Fatalf("admitted %d of 180, want 160 ± 1", admitted)
	}
	if lastRefusal.Which != "rpm" || lastRefusal.RetryAfter <= 0 || lastRefusal.RetryAfter > 500*time.Millisecond {
		t.Fatalf("refusal %+v", lastRefusal)
	}
}

// maxConcurrentRequests counts in-flight requests of every replica; a
// release frees one at once; a changed rpm starts a full bucket of its size.
func TestKeyLimitsConcurrencyAndLimitChange(t *testing.T) {
	mr, c := server(t)
	a, b := redisstate.NewKeyLimits(c, "", "a", 0), redisstate.NewKeyLimits(c, "", "b", 0)
	ctx := context.Background()
	d1, _ := a.Admit(ctx, "k", 0, 2)
	d2, _ := b.Admit(ctx, "k", 0, 2)
	d3, _ := a.Admit(ctx, "k", 0, 2)
	if !d1.Admitted || !d2.Admitted || d3.Admitted || d3.Which != "concurrency" || d3.RetryAfter != time.Second {
		t.Fatalf("decisions %+v %+v %+v", d1, d2, d3)
	}
	b.Release(d2)
	b.Release(d2) // idempotent
	if d, _ := a.Admit(ctx, "k", 0, 2); !d.Admitted {
		t.Fatal("refused after a release")
	}
	// The grants of a replica that stopped renewing lapse after their TTL.
	setTime(mr, time.Date(2026, 12, 1, 0, 1, 0, 0, time.UTC))
	if d, _ := a.Admit(ctx, "k", 0, 2); !d.Admitted {
		t.Fatal("lapsed grants still count")
	}

	for range 3 {
		a.Admit(ctx, "r", 3, 0)
	}
	if d, _ := a.Admit(ctx, "r", 3, 0); d.Admitted {
		t.Fatal("a fourth request within the burst of 3")
	}
	if d, _ := a.Admit(ctx, "r", 10, 0); !d.Admitted {
		t.Fatal("a raised limit did not start a full bucket")
	}
}
