package redisstate_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"switchyard/internal/testkit"
	"switchyard/models/redisstate"
	"switchyard/services/traffic"
)

// The shared traffic.KeyLimiter of three replicas admits 120 requests per
// minute for the whole fleet, answers a refusal as a typed KeyRefusal with
// Redis's Retry-After, and releases concurrency grants in Redis.
func TestKeyLimiterFleetWide(t *testing.T) {
	mr, c := server(t)
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	clock := testkit.NewFakeClock(t0)
	var replicas []*redisstate.KeyLimiter
	for _, r := range []string{"a", "b", "c"} {
		replicas = append(replicas, redisstate.NewKeyLimiter(redisstate.NewKeyLimits(c, "", r, 0), traffic.NewKeyLimits(clock), nil))
	}
	ctx := context.Background()
	lim := traffic.KeyLimit{RequestsPerMinute: 120}
	admitted := 0
	var last *traffic.KeyRefusal
	for i := range 180 {
		setTime(mr, t0.Add(time.Duration(i)*time.Second/9))
		g, err := replicas[i%3].Admit(ctx, "k1", lim)
		var ref *traffic.KeyRefusal
		switch {
		case err == nil:
			admitted++
			replicas[i%3].Release(g)
		case errors.As(err, &ref):
			last = ref
		default:
			t.Fatal(err)
		}
	}
	if admitted < 159 || admitted > 161 {
		t.Fatalf("admitted %d of 180 over three replicas, want 160 ± 1 (per replica it would be 180)", admitted)
	}
	if last == nil || last.Kind != traffic.KeyLimitRate || last.Limit != 120 || last.RetryAfterSeconds() != 1 {
		t.Fatalf("refusal %+v", last)
	}

	conc := traffic.KeyLimit{MaxConcurrent: 1}
	g, err := replicas[0].Admit(ctx, "k2", conc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := replicas[1].Admit(ctx, "k2", conc); !errors.As(err, &last) || last.Kind != traffic.KeyLimitConcurrency {
		t.Fatalf("second in flight on another replica: %v", err)
	}
	replicas[0].Release(g)
	g2, err := replicas[2].Admit(ctx, "k2", conc)
	if err != nil {
		t.Fatalf("refused after the release on another replica: %v", err)
	}
	replicas[2].Release(g2)
}

// Redis gone: the local limiter of each replica decides, every such
// decision is counted, and a grant taken locally is released locally.
func TestKeyLimiterFallsBackLocally(t *testing.T) {
	mr, c := server(t)
	clock := testkit.NewFakeClock(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))
	fallbacks := 0
	local := traffic.NewKeyLimits(clock)
	k := redisstate.NewKeyLimiter(redisstate.NewKeyLimits(c, "", "a", 0), local, func(m string) {
		if m == "key_limits" {
			fallbacks++
		}
	})
	mr.Close()
	ctx := context.Background()
	lim := traffic.KeyLimit{MaxConcurrent: 1}
	g, err := k.Admit(ctx, "k", lim)
	if err != nil {
		t.Fatalf("Redis down must not refuse: %v", err)
	}
	var ref *traffic.KeyRefusal
	if _, err := k.Admit(ctx, "k", lim); !errors.As(err, &ref) {
		t.Fatalf("the local limit did not hold: %v", err)
	}
	k.Release(g)
	g, err = k.Admit(ctx, "k", lim)
	if err != nil {
		t.Fatalf("refused after a local release: %v", err)
	}
	k.Release(g)
	if fallbacks != 3 {
		t.Fatalf("fallbacks %d, want 3 (one per decision)", fallbacks)
	}
	k.Forget("k") // Redis down: Forget still drops the local state and returns
}
