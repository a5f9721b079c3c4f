package traffic_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"switchyard/internal/testkit"
	"switchyard/services"
	"switchyard/services/traffic"
)

var keyT0 = time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)

func refusal(t *testing.T, err error) *traffic.KeyRefusal {
	t.Helper()
	var kr *traffic.KeyRefusal
	if !errors.As(err, &kr) {
		t.Fatalf("got %v, want a *KeyRefusal", err)
	}
	return kr
}

// The bucket holds rpm tokens, refills rpm/60 per second, and a refusal
// says when the next token is there (10-gateway-api §3.3, §3.4).
func TestKeyLimitsRate(t *testing.T) {
	clock := testkit.NewFakeClock(keyT0)
	l := traffic.NewKeyLimits(clock)
	ctx := context.Background()
	lim := traffic.KeyLimit{RequestsPerMinute: 3}
	for i := range 3 {
		if _, err := l.Admit(ctx, "k1", lim); err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
	}
	kr := refusal(t, func() error { _, err := l.Admit(ctx, "k1", lim); return err }())
	if kr.Kind != traffic.KeyLimitRate || kr.Limit != 3 || kr.RetryAfter != 20*time.Second || kr.RetryAfterSeconds() != 20 {
		t.Fatalf("refusal %+v (%d s)", kr, kr.RetryAfterSeconds())
	}
	if kr.Error() != "This API key is limited to 3 requests per minute." {
		t.Fatalf("message %q", kr.Error())
	}
	// Another key has its own bucket.
	if _, err := l.Admit(ctx, "k2", lim); err != nil {
		t.Fatal(err)
	}
	clock.Advance(15 * time.Second) // 0.75 of a token
	kr = refusal(t, func() error { _, err := l.Admit(ctx, "k1", lim); return err }())
	if kr.RetryAfter != 5*time.Second {
		t.Fatalf("retry after %v, want 5s", kr.RetryAfter)
	}
	clock.Advance(5 * time.Second)
	if _, err := l.Admit(ctx, "k1", lim); err != nil {
		t.Fatalf("after the refill: %v", err)
	}
	// A changed limit starts a full bucket of the new size.
	for i := range 5 {
		if _, err := l.Admit(ctx, "k1", traffic.KeyLimit{RequestsPerMinute: 5}); err != nil {
			t.Fatalf("new limit, request %d: %v", i, err)
		}
	}
	if _, err := l.Admit(ctx, "k1", traffic.KeyLimit{RequestsPerMinute: 5}); err == nil {
		t.Fatal("a sixth request within the minute was admitted")
	}
}

// At most MaxConcurrent grants are out per key; Release gives one back.
func TestKeyLimitsConcurrency(t *testing.T) {
	l := traffic.NewKeyLimits(testkit.NewFakeClock(keyT0))
	ctx := context.Background()
	lim := traffic.KeyLimit{MaxConcurrent: 2}
	g1, err := l.Admit(ctx, "k1", lim)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Admit(ctx, "k1", lim); err != nil {
		t.Fatal(err)
	}
	kr := refusal(t, func() error { _, err := l.Admit(ctx, "k1", lim); return err }())
	if kr.Kind != traffic.KeyLimitConcurrency || kr.RetryAfterSeconds() != 1 || kr.Error() != "This API key may have at most 2 requests in flight." {
		t.Fatalf("refusal %+v: %s", kr, kr.Error())
	}
	l.Release(g1)
	if _, err := l.Admit(ctx, "k1", lim); err != nil {
		t.Fatalf("after a release: %v", err)
	}
	l.Release(traffic.KeyGrant{}) // the zero grant is harmless
}

// Parallel admissions never exceed the cap (run with -race).
func TestKeyLimitsConcurrencyParallel(t *testing.T) {
	l := traffic.NewKeyLimits(services.RealClock{})
	lim := traffic.KeyLimit{MaxConcurrent: 3}
	var mu sync.Mutex
	inFlight, peak := 0, 0
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 200 {
				g, err := l.Admit(context.Background(), "k", lim)
				if err != nil {
					continue
				}
				mu.Lock()
				inFlight++
				peak = max(peak, inFlight)
				mu.Unlock()
				mu.Lock()
				inFlight--
				mu.Unlock()
				l.Release(g)
			}
		})
	}
	wg.Wait()
	if peak > 3 {
		t.Fatalf("peak %d requests in flight, cap 3", peak)
	}
}

// Keys unused for a minute with nothing in flight are dropped (their
// bucket is full again, so nothing changes); a key with a request in
// flight is kept; Forget drops a key at once.
func TestKeyLimitsEvictIdleAndForget(t *testing.T) {
	clock := testkit.NewFakeClock(keyT0)
	l := traffic.NewKeyLimits(clock)
	ctx := context.Background()
	for _, id := range []string{"a", "b", "c"} {
		if _, err := l.Admit(ctx, id, traffic.KeyLimit{RequestsPerMinute: 1}); err != nil {
			t.Fatal(err)
		}
	}
	busy, err := l.Admit(ctx, "d", traffic.KeyLimit{MaxConcurrent: 1})
	if err != nil {
		t.Fatal(err)
	}
	if n := l.Len(); n != 4 {
		t.Fatalf("%d keys kept, want 4", n)
	}
	clock.Advance(time.Minute)
	if _, err := l.Admit(ctx, "e", traffic.KeyLimit{RequestsPerMinute: 1}); err != nil {
		t.Fatal(err)
	}
	if n := l.Len(); n != 2 { // d (in flight) and e
		t.Fatalf("%d keys kept after the sweep, want 2", n)
	}
	// The evicted key answers as a fresh one: a full bucket.
	if _, err := l.Admit(ctx, "a", traffic.KeyLimit{RequestsPerMinute: 1}); err != nil {
		t.Fatalf("evicted key: %v", err)
	}
	l.Forget("d")
	l.Forget("e")
	l.Forget("a")
	if n := l.Len(); n != 0 {
		t.Fatalf("%d keys kept after Forget, want 0", n)
	}
	l.Release(busy) // a grant from before Forget still releases
	if _, err := l.Admit(ctx, "d", traffic.KeyLimit{MaxConcurrent: 1}); err != nil {
		t.Fatalf("forgotten key: %v", err)
	}
}

// A key without limits is never stored.
func TestKeyLimitsUnlimited(t *testing.T) {
	l := traffic.NewKeyLimits(testkit.NewFakeClock(keyT0))
	zero, five := 0, 5
	lim := traffic.KeyLimitOf(services.APIKey{RequestsPerMinute: &zero})
	if !lim.Unlimited() {
		t.Fatalf("limit %+v", lim)
	}
	for range 100 {
		if _, err := l.Admit(context.Background(), "k", lim); err != nil {
			t.Fatal(err)
		}
	}
	if l.Len() != 0 {
		t.Fatal("an unlimited key was stored")
	}
	if got := traffic.KeyLimitOf(services.APIKey{MaxConcurrentRequests: &five}); got != (traffic.KeyLimit{MaxConcurrent: 5}) {
		t.Fatalf("KeyLimitOf %+v", got)
	}
}
