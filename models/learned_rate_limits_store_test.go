package models_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"switchyard/internal/testkit"
	"switchyard/models"
	"switchyard/services/traffic"
)

// Learned rate limits survive a restart (20-resilience §15): a queue
// reopened on the same database restores what the first one stored, throttle
// included, and a reset deletes the rows.
func TestLearnedRateLimitsSurviveRestart(t *testing.T) {
	ctx := context.Background()
	db := testkit.OpenDB(t)
	clock := testkit.NewFakeClock(time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC))
	open := func() *traffic.Queues {
		q := traffic.NewQueues(clock, nil)
		q.UseLearnedStore(models.NewLearnedRateLimitStore(db))
		if _, err := q.LoadLearned(ctx); err != nil {
			t.Fatal(err)
		}
		return q
	}
	q := open()
	h := http.Header{}
	h.Set("x-ratelimit-limit-requests", "500")
	h.Set("x-ratelimit-remaining-requests", "12")
	h.Set("x-ratelimit-reset-requests", "30s")
	if err := q.Learn(ctx, "openai:c_1:gpt-4o", h); err != nil {
		t.Fatal(err)
	}
	h.Set("x-ratelimit-remaining-requests", "400")
	h.Del("x-ratelimit-reset-requests")
	if err := q.Learn(ctx, "openai:c_2", h); err != nil {
		t.Fatal(err)
	}
	if n, err := q.PersistLearned(ctx); err != nil || n != 2 {
		t.Fatalf("PersistLearned = %d, %v", n, err)
	}
	want := q.Learned()

	clock.Advance(5 * time.Second)
	r := open()
	got := r.Learned()
	if len(got) != 2 {
		t.Fatalf("restored %+v", got)
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.Key != w.Key || g.LimitRequests != w.LimitRequests || g.Remaining != w.Remaining || g.MinTimeMs != w.MinTimeMs ||
			!g.ResetAt.Equal(w.ResetAt) || !g.ObservedAt.Equal(w.ObservedAt) || g.Throttled != w.Throttled {
			t.Fatalf("restored %+v, stored %+v", g, w)
		}
	}
	if !got[0].Throttled {
		t.Fatal("the throttle of c_1 did not survive")
	}

	if _, err := r.ResetConnection(ctx, "c_1"); err != nil {
		t.Fatal(err)
	}
	if got := open().Learned(); len(got) != 1 || got[0].Key != "openai:c_2" {
		t.Fatalf("after reset and restart: %+v", got)
	}
}
