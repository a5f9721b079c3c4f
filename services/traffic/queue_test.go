package traffic_test

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"switchyard/services"
	"switchyard/services/traffic"
)

// queueConfig is the default requestQueue with f applied.
func queueConfig(f func(*traffic.QueueConfig)) traffic.QueueConfig {
	c := traffic.DefaultQueueConfig()
	if f != nil {
		f(&c)
	}
	return c
}

// fast has no pacing at all: only what a test sets holds requests.
func fast(f func(*traffic.QueueConfig)) traffic.QueueConfig {
	return queueConfig(func(c *traffic.QueueConfig) {
		c.RequestsPerMinute = 1_000_000
		c.MinTimeBetweenRequestsMs = 0
		c.ConcurrentRequests = 10_000
		if f != nil {
			f(c)
		}
	})
}

type admitResult struct {
	ticket traffic.Ticket
	err    error
	at     time.Duration
}

// admitAsync starts Admit in a goroutine and waits (in the bubble) until it
// returned or blocked, so arrival order is the call order.
func admitAsync(ctx context.Context, q *traffic.Queues, key string, cfg traffic.QueueConfig, start time.Time) <-chan admitResult {
	ch := make(chan admitResult, 1)
	go func() {
		tk, err := q.Admit(ctx, key, cfg)
		ch <- admitResult{tk, err, time.Since(start)}
	}()
	synctest.Wait()
	return ch
}

func queueOf(t *testing.T, q *traffic.Queues, key string) traffic.QueueStats {
	t.Helper()
	for _, st := range q.Stats() {
		if st.Key == key {
			return st
		}
	}
	t.Fatalf("no queue stats for %s", key)
	return traffic.QueueStats{}
}

func mustAdmit(t *testing.T, q *traffic.Queues, key string, cfg traffic.QueueConfig) traffic.Ticket {
	t.Helper()
	tk, err := q.Admit(t.Context(), key, cfg)
	if err != nil {
		t.Fatalf("Admit: %v", err)
	}
	return tk
}

// Q2 as briefed: concurrentRequests=1, maxQueueDepth=3, 1 running + 3 queued →
// the 5th is refused at once with 429 RATE_LIMIT_QUEUE_FULL and Retry-After.
func TestQueueFullRefusedAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := traffic.NewQueues(services.RealClock{}, nil)
		cfg := queueConfig(func(c *traffic.QueueConfig) { c.ConcurrentRequests = 1; c.MaxQueueDepth = 3 })
		start := time.Now()
		running := mustAdmit(t, q, "openai:c_7", cfg)
		var queued []<-chan admitResult
		for range 3 {
			queued = append(queued, admitAsync(t.Context(), q, "openai:c_7", cfg, start))
		}
		if st := queueOf(t, q, "openai:c_7"); st.Queued != 3 || st.Running != 1 {
			t.Fatalf("stats %+v, want 3 queued 1 running", st)
		}

		tk, err := q.Admit(t.Context(), "openai:c_7", cfg)
		var le *traffic.LimitError
		if !errors.As(err, &le) || le.Code != traffic.CodeQueueFull || le.HTTPStatus() != 429 || tk != (traffic.Ticket{}) {
			t.Fatalf("5th: %v, want 429 RATE_LIMIT_QUEUE_FULL", err)
		}
		if elapsed := time.Since(start); elapsed != 0 {
			t.Fatalf("refused after %v, want at once", elapsed)
		}
		if le.RetryAfterSeconds() != 3 { // ceil(3 × 60 / 60)
			t.Fatalf("Retry-After %d, want 3", le.RetryAfterSeconds())
		}
		if st := queueOf(t, q, "openai:c_7"); st.Rejections.QueueFull != 1 || st.Queued != 3 {
			t.Fatalf("stats %+v", st)
		}

		// The queued ones still go, one at a time, in order.
		running.Done()
		for i, ch := range queued {
			r := <-ch
			if r.err != nil {
				t.Fatalf("queued %d: %v", i, r.err)
			}
			for _, later := range queued[i+1:] {
				if !pending(later) {
					t.Fatalf("queued request after %d dispatched while concurrentRequests=1 is taken", i)
				}
			}
			r.ticket.Done()
			synctest.Wait()
		}
		if tot := q.Totals(); tot.Queued != 0 || tot.Running != 0 || tot.Rejections.QueueFull != 1 {
			t.Fatalf("totals %+v", tot)
		}
	})
}

// Q5: queueWaitMs=5000, still queued at 5 s → 503 RATE_LIMIT_QUEUE_TIMEOUT +
// Retry-After; with 0 it keeps waiting.
func TestQueueWaitTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := traffic.NewQueues(services.RealClock{}, nil)
		cfg := queueConfig(func(c *traffic.QueueConfig) { c.ConcurrentRequests = 1; c.QueueWaitMs = 5000 })
		start := time.Now()
		running := mustAdmit(t, q, "openai:c_1", cfg)
		bounded := admitAsync(t.Context(), q, "openai:c_1", cfg, start)
		r := <-bounded
		var le *traffic.LimitError
		if !errors.As(r.err, &le) || le.Code != traffic.CodeQueueTimeout || le.HTTPStatus() != 503 || r.at != 5*time.Second {
			t.Fatalf("bounded: %+v, want 503 RATE_LIMIT_QUEUE_TIMEOUT at 5s", r)
		}
		if le.RetryAfterSeconds() != 1 {
			t.Fatalf("Retry-After %d, want 1", le.RetryAfterSeconds())
		}

		cfg.QueueWaitMs = 0
		unbounded := admitAsync(t.Context(), q, "openai:c_1", cfg, start)
		time.Sleep(time.Hour)
		synctest.Wait()
		if !pending(unbounded) {
			t.Fatal("queueWaitMs=0 request left the queue")
		}
		running.Done()
		r = <-unbounded
		if r.err != nil || r.at != time.Hour+5*time.Second {
			t.Fatalf("unbounded: %+v", r)
		}
		r.ticket.Done()
		if st := queueOf(t, q, "openai:c_1"); st.Rejections.QueueTimeout != 1 || st.Queued != 0 || st.Running != 0 {
			t.Fatalf("stats %+v", st)
		}
	})
}

// A queued request whose client leaves is removed and never dispatched; the
// ones behind it move up.
func TestQueueClientLeavesNeverDispatched(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := traffic.NewQueues(services.RealClock{}, nil)
		cfg := fast(func(c *traffic.QueueConfig) { c.ConcurrentRequests = 1 })
		start := time.Now()
		running := mustAdmit(t, q, "openai:c_2", cfg)
		ctx, cancel := context.WithCancel(t.Context())
		gone := admitAsync(ctx, q, "openai:c_2", cfg, start)
		next := admitAsync(t.Context(), q, "openai:c_2", cfg, start)
		cancel()
		r := <-gone
		if !errors.Is(r.err, context.Canceled) || r.ticket != (traffic.Ticket{}) {
			t.Fatalf("cancelled: %+v, want context.Canceled and no ticket", r)
		}
		if st := queueOf(t, q, "openai:c_2"); st.Queued != 1 || st.Running != 1 {
			t.Fatalf("stats %+v", st)
		}
		running.Done()
		n := <-next
		if n.err != nil {
			t.Fatal(n.err)
		}
		if st := queueOf(t, q, "openai:c_2"); st.Running != 1 || st.Queued != 0 {
			t.Fatalf("stats %+v: only the remaining request runs", st)
		}
		n.ticket.Done()
		if _, err := q.Admit(ctx, "openai:c_2", cfg); !errors.Is(err, context.Canceled) {
			t.Fatalf("Admit with a done context = %v", err)
		}
	})
}

// dispatchTimes admits n requests back to back (each its own goroutine, in
// order) and returns when each was dispatched, relative to start.
func dispatchTimes(t *testing.T, q *traffic.Queues, key string, cfg traffic.QueueConfig, n int) []time.Duration {
	t.Helper()
	start := time.Now()
	chans := make([]<-chan admitResult, n)
	for i := range chans {
		chans[i] = admitAsync(t.Context(), q, key, cfg, start)
	}
	out := make([]time.Duration, n)
	for i, ch := range chans {
		r := <-ch
		if r.err != nil {
			t.Fatalf("request %d: %v", i, r.err)
		}
		r.ticket.Done()
		out[i] = r.at
	}
	return out
}

func equalDurations(a, b []time.Duration) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestQueuePacing(t *testing.T) {
	t.Run("token bucket", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			q := traffic.NewQueues(services.RealClock{}, nil)
			cfg := fast(func(c *traffic.QueueConfig) { c.RequestsPerMinute = 2 })
			got := dispatchTimes(t, q, "openai:c_3", cfg, 4)
			want := []time.Duration{0, 0, 30 * time.Second, 60 * time.Second}
			if !equalDurations(got, want) {
				t.Fatalf("dispatched at %v, want %v", got, want)
			}
		})
	})
	t.Run("min spacing", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			q := traffic.NewQueues(services.RealClock{}, nil)
			cfg := fast(func(c *traffic.QueueConfig) { c.MinTimeBetweenRequestsMs = 1000 })
			got := dispatchTimes(t, q, "openai:c_3", cfg, 3)
			want := []time.Duration{0, time.Second, 2 * time.Second}
			if !equalDurations(got, want) {
				t.Fatalf("dispatched at %v, want %v", got, want)
			}
		})
	})
	t.Run("defaults", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			q := traffic.NewQueues(services.RealClock{}, nil)
			got := dispatchTimes(t, q, "openai:c_3", traffic.DefaultQueueConfig(), 3)
			want := []time.Duration{0, 350 * time.Millisecond, 700 * time.Millisecond}
			if !equalDurations(got, want) {
				t.Fatalf("dispatched at %v, want %v", got, want)
			}
		})
	})
}

// Q7: x-ratelimit-limit-requests 500, remaining 20, reset 6s → ≤ 20 sends
// before t+6 s, spaced by the learned 110 ms.
func TestQueueLearnedLimits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := traffic.NewQueues(services.RealClock{}, nil)
		key := "openai:c_4"
		h := http.Header{}
		h.Set("x-ratelimit-limit-requests", "500")
		h.Set("x-ratelimit-remaining-requests", "20")
		h.Set("x-ratelimit-reset-requests", "6s")
		q.Learn(context.Background(), key, h)
		got := dispatchTimes(t, q, key, fast(nil), 22)
		for i := range 20 {
			if want := time.Duration(i) * 110 * time.Millisecond; got[i] != want {
				t.Fatalf("send %d at %v, want %v (learned 110 ms spacing); all %v", i, got[i], want, got)
			}
		}
		if got[20] != 6*time.Second || got[21] != 6*time.Second+110*time.Millisecond {
			t.Fatalf("sends 21 and 22 at %v, %v; want at the reset, 6s and 6.11s", got[20], got[21])
		}
		l := q.Learned()
		if len(l) != 1 || l[0].Key != key || l[0].LimitRequests != 500 || l[0].MinTimeMs != 110 || l[0].Throttled {
			t.Fatalf("learned %+v", l)
		}
	})
}

func TestQueueLearnedThrottleLifts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := traffic.NewQueues(services.RealClock{}, nil)
		key := "anthropic:c_5"
		h := http.Header{}
		h.Set("anthropic-ratelimit-requests-limit", "100")
		h.Set("anthropic-ratelimit-requests-remaining", "0")
		h.Set("anthropic-ratelimit-requests-reset", time.Now().Add(time.Minute).Format(time.RFC3339))
		q.Learn(context.Background(), key, h)
		start := time.Now()
		w := admitAsync(t.Context(), q, key, fast(nil), start)
		if st := queueOf(t, q, key); st.Queued != 1 || st.Learned == nil || !st.Learned.Throttled {
			t.Fatalf("stats %+v, want 1 throttled waiter", st)
		}
		time.Sleep(10 * time.Second)
		h.Set("anthropic-ratelimit-requests-remaining", "51") // > 50 %: lifted
		q.Learn(context.Background(), key, h)
		r := <-w
		if r.err != nil || r.at != 10*time.Second {
			t.Fatalf("waiter %+v, want dispatched when the throttle lifted at 10s", r)
		}
		r.ticket.Done()
	})
}

func TestQueueLearnRateLimited(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := traffic.NewQueues(services.RealClock{}, nil)
		key := "openai:c_6"
		q.LearnRateLimited(context.Background(), key, http.Header{"Retry-After": {"7"}})
		got := dispatchTimes(t, q, key, fast(nil), 2)
		if !equalDurations(got, []time.Duration{7 * time.Second, 7 * time.Second}) {
			t.Fatalf("dispatched at %v, want both at the 429's reset (7s)", got)
		}
		q.LearnRateLimited(context.Background(), "openai:c_6b", http.Header{}) // no reset hint: no throttle
		if got := dispatchTimes(t, q, "openai:c_6b", fast(nil), 1); got[0] != 0 {
			t.Fatalf("hint-less 429 held the key until %v", got[0])
		}
	})
}

func TestQueueLearnedPersistence(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	clock := &stepClock{now: t0}
	q := traffic.NewQueues(clock, nil)
	h := http.Header{}
	h.Set("x-ratelimit-limit-requests", "500")
	h.Set("x-ratelimit-remaining-requests", "12")
	h.Set("x-ratelimit-reset-requests", "6s")
	q.Learn(context.Background(), "openai:c_7", h)
	q.Learn(context.Background(), "openai:nothing", http.Header{"Content-Type": {"application/json"}})
	snap := q.Learned()
	want := traffic.LearnedLimit{Key: "openai:c_7", LimitRequests: 500, Remaining: 12, ResetAt: t0.Add(6 * time.Second),
		MinTimeMs: 110, ObservedAt: t0, Throttled: true}
	if len(snap) != 1 || snap[0] != want {
		t.Fatalf("Learned = %+v, want [%+v]", snap, want)
	}

	old := traffic.LearnedLimit{Key: "openai:old", LimitRequests: 10, ObservedAt: t0.Add(-25 * time.Hour)}
	r := traffic.NewQueues(clock, nil)
	if n := r.Restore(append(snap, old)); n != 1 {
		t.Fatalf("Restore loaded %d, want 1 (entries older than 24 h ignored)", n)
	}
	if got := r.Learned(); len(got) != 1 || got[0] != want {
		t.Fatalf("after Restore: %+v", got)
	}
	if st := queueOf(t, r, "openai:c_7"); st.Learned == nil || st.Learned.Remaining != 12 || st.Queued != 0 {
		t.Fatalf("stats %+v", st)
	}
	clock.now = t0.Add(6 * time.Second)
	if got := r.Learned(); got[0].Throttled {
		t.Fatalf("throttle still on at its reset: %+v", got[0])
	}
}

func TestQueueExecutionBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := traffic.NewQueues(services.RealClock{}, nil)
		cfg := queueConfig(func(c *traffic.QueueConfig) { c.ConcurrentRequests = 1 })
		start := time.Now()
		first := mustAdmit(t, q, "openai:c_8", cfg)
		w := admitAsync(t.Context(), q, "openai:c_8", cfg, start)
		time.Sleep(45 * time.Second) // Q3: queued 45 s, more than maxWaitMs
		first.Done()
		r := <-w
		if r.err != nil {
			t.Fatal(r.err)
		}
		if r.ticket.MaxWait() != 15*time.Second || !r.ticket.ExecutionDeadline().Equal(start.Add(60*time.Second)) {
			t.Fatalf("MaxWait %v deadline %v; want 15s from dispatch at 45s", r.ticket.MaxWait(), r.ticket.ExecutionDeadline().Sub(start))
		}
		if r.ticket.Key() != "openai:c_8" {
			t.Fatalf("Key %q", r.ticket.Key())
		}
		le := r.ticket.ExecutionTimeout()
		if le.Code != traffic.CodeExecutionTimeout || le.HTTPStatus() != 504 {
			t.Fatalf("ExecutionTimeout = %+v", le)
		}
		r.ticket.Done()
		if st := queueOf(t, q, "openai:c_8"); st.Rejections.ExecutionTimeout != 1 || st.Running != 0 {
			t.Fatalf("stats %+v", st)
		}
		var zero traffic.Ticket
		zero.Done()
		if zero.MaxWait() != 0 || !zero.ExecutionDeadline().IsZero() || zero.ExecutionTimeout() != nil || zero.Key() != "" {
			t.Fatal("zero Ticket is not inert")
		}
	})
}

func TestQueueTicketDoneOnce(t *testing.T) {
	q := traffic.NewQueues(nil, nil)
	cfg := fast(func(c *traffic.QueueConfig) { c.ConcurrentRequests = 2 })
	a := mustAdmit(t, q, "openai:c_9", cfg)
	b := mustAdmit(t, q, "openai:c_9", cfg)
	copyOfA := a
	a.Done()
	a.Done()
	copyOfA.Done()
	if st := queueOf(t, q, "openai:c_9"); st.Running != 1 {
		t.Fatalf("running %d, want 1", st.Running)
	}
	b.Done()
	if st := queueOf(t, q, "openai:c_9"); st.Running != 0 {
		t.Fatalf("running %d, want 0", st.Running)
	}
}

// A settings change applies from the next admission, and the waiting
// requests look again under it.
func TestQueueSettingsApplyToLiveQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		global := fast(func(c *traffic.QueueConfig) { c.RequestsPerMinute = 1 })
		q := traffic.NewQueues(services.RealClock{}, func() traffic.QueueConfig {
			mu.Lock()
			defer mu.Unlock()
			return global
		})
		key := "openai:c_10"
		start := time.Now()
		first := mustAdmit(t, q, key, q.Effective(services.RateLimitOverrides{}))
		first.Done()
		w := admitAsync(t.Context(), q, key, q.Effective(services.RateLimitOverrides{}), start)
		time.Sleep(time.Second)
		synctest.Wait()
		if !pending(w) {
			t.Fatal("second request went before the 1 rpm bucket refilled")
		}

		mu.Lock()
		global.RequestsPerMinute = 600 // 10 per s
		mu.Unlock()
		q.Reconfigure()
		r := <-w
		// The bucket keeps its content (1/60 token after 1 s) and refills at
		// the new rate: the missing 59/60 token takes 98.33… ms.
		if r.err != nil || r.at <= time.Second || r.at > time.Second+100*time.Millisecond {
			t.Fatalf("waiter %+v, want dispatched within 100 ms of the change", r)
		}
		r.ticket.Done()
		if st := queueOf(t, q, key); st.Config.RequestsPerMinute != 600 {
			t.Fatalf("config %+v", st.Config)
		}

		// A connection override wins over the global settings.
		perConn := 5
		eff := q.Effective(services.RateLimitOverrides{ConcurrentRequests: &perConn})
		if eff.ConcurrentRequests != 5 || eff.RequestsPerMinute != 600 {
			t.Fatalf("Effective = %+v", eff)
		}
	})
}

func TestQueueReset(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := traffic.NewQueues(services.RealClock{}, nil)
		key := "openai:c_11"
		q.LearnRateLimited(context.Background(), key, http.Header{"Retry-After": {"60"}})
		start := time.Now()
		w := admitAsync(t.Context(), q, key, fast(nil), start)
		if n, _ := q.ResetConnection(context.Background(), "c_other"); n != 0 {
			t.Fatalf("ResetConnection(other) = %d", n)
		}
		if n, _ := q.ResetConnection(context.Background(), "c_11"); n != 1 {
			t.Fatalf("ResetConnection = %d, want 1", n)
		}
		r := <-w
		if r.err != nil || r.at != 0 {
			t.Fatalf("waiter %+v, want dispatched at once when the learned throttle is cleared", r)
		}
		r.ticket.Done()
		if l := q.Learned(); len(l) != 0 {
			t.Fatalf("learned %+v after reset", l)
		}
		if n, _ := q.Reset(context.Background()); n != 1 {
			t.Fatalf("Reset = %d", n)
		}
	})
}

// Limiters idle for 10 minutes are dropped; their counters stay.
func TestQueueIdleLimiterDropped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := traffic.NewQueues(services.RealClock{}, nil)
		cfg := fast(func(c *traffic.QueueConfig) { c.ConcurrentRequests = 1; c.MaxQueueDepth = 1 })
		tk := mustAdmit(t, q, "openai:c_12", cfg)
		start := time.Now()
		w := admitAsync(t.Context(), q, "openai:c_12", cfg, start)
		if _, err := q.Admit(t.Context(), "openai:c_12", cfg); err == nil {
			t.Fatal("want QUEUE_FULL")
		}
		tk.Done()
		r := <-w
		r.ticket.Done()
		time.Sleep(11 * time.Minute)
		mustAdmit(t, q, "openai:other", cfg).Done()
		st := queueOf(t, q, "openai:c_12")
		if st.Running != 0 || st.Queued != 0 || st.Rejections.QueueFull != 1 || st.Config != traffic.DefaultQueueConfig() {
			t.Fatalf("stats %+v, want the limiter gone (global config) and the counter kept", st)
		}
		if st.Provider != "openai" || st.ConnectionID != "c_12" {
			t.Fatalf("key split %+v", st)
		}
	})
}

func TestQueueManyWaitersStress(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := traffic.NewQueues(services.RealClock{}, nil)
		cfg := fast(func(c *traffic.QueueConfig) { c.ConcurrentRequests = 3; c.MinTimeBetweenRequestsMs = 10 })
		var mu sync.Mutex
		running, peak := 0, 0
		var wg sync.WaitGroup
		for range 200 {
			wg.Go(func() {
				tk, err := q.Admit(t.Context(), "openai:c_13", cfg)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				running++
				peak = max(peak, running)
				mu.Unlock()
				time.Sleep(25 * time.Millisecond)
				mu.Lock()
				running--
				mu.Unlock()
				tk.Done()
			})
		}
		wg.Wait()
		if peak > 3 {
			t.Fatalf("peak %d executing, cap 3", peak)
		}
		if tot := q.Totals(); tot.Queued != 0 || tot.Running != 0 {
			t.Fatalf("totals %+v", tot)
		}
	})
}

// stepClock is a services.Clock that moves only when told (or by Wait).
type stepClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *stepClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *stepClock) Wait(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
	return nil
}
