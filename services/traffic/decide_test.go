package traffic_test

import (
	"testing"
	"time"

	"switchyard/services/traffic"
)

func TestDecide(t *testing.T) {
	now := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	def := traffic.DefaultQueueConfig()
	with := func(f func(*traffic.QueueConfig)) traffic.QueueConfig {
		c := def
		f(&c)
		return c
	}
	full := 60.0 // a full bucket at the default 60 rpm
	tests := []struct {
		name    string
		s       traffic.State
		cfg     traffic.QueueConfig
		want    traffic.Action
		delay   time.Duration
		blocker string
		retry   time.Duration
	}{
		{"idle key dispatches", traffic.State{Tokens: full}, def, traffic.ActionDispatch, 0, "", 0},
		{"queue full rejects before joining", traffic.State{Queued: 3, Running: 1, Tokens: full},
			with(func(c *traffic.QueueConfig) { c.MaxQueueDepth = 3 }), traffic.ActionReject, 0, "", 3 * time.Second},
		{"queue full Retry-After rounds up", traffic.State{Queued: 5, Tokens: full},
			with(func(c *traffic.QueueConfig) { c.MaxQueueDepth = 5; c.RequestsPerMinute = 120 }), traffic.ActionReject, 0, "", 3 * time.Second},
		{"queue full Retry-After at least 1 s", traffic.State{Queued: 1, Tokens: full},
			with(func(c *traffic.QueueConfig) { c.MaxQueueDepth = 1; c.RequestsPerMinute = 1000 }), traffic.ActionReject, 0, "", time.Second},
		{"queue full Retry-After at most 60 s", traffic.State{Queued: 256, Tokens: full},
			with(func(c *traffic.QueueConfig) { c.MaxQueueDepth = 256 }), traffic.ActionReject, 0, "", 60 * time.Second},
		{"below the depth joins the queue", traffic.State{Queued: 2, Tokens: full},
			with(func(c *traffic.QueueConfig) { c.MaxQueueDepth = 3 }), traffic.ActionWait, 0, traffic.BlockerQueue, 0},
		{"depth 0 is unbounded", traffic.State{Queued: 100_000, Tokens: full}, def, traffic.ActionWait, 0, traffic.BlockerQueue, 0},
		{"executing requests do not count toward the depth", traffic.State{Queued: 0, Running: 50, Tokens: full},
			with(func(c *traffic.QueueConfig) { c.MaxQueueDepth = 1; c.ConcurrentRequests = 50 }), traffic.ActionWait, 0, traffic.BlockerConcurrency, 0},
		{"concurrent cap waits for a release", traffic.State{Running: 6, Tokens: full}, def, traffic.ActionWait, 0, traffic.BlockerConcurrency, 0},
		{"below the concurrent cap dispatches", traffic.State{Running: 5, Tokens: full}, def, traffic.ActionDispatch, 0, "", 0},
		{"min spacing", traffic.State{Tokens: full, LastStart: now.Add(-100 * time.Millisecond)}, def,
			traffic.ActionWait, 250 * time.Millisecond, traffic.BlockerSpacing, 0},
		{"min spacing elapsed", traffic.State{Tokens: full, LastStart: now.Add(-350 * time.Millisecond)}, def,
			traffic.ActionDispatch, 0, "", 0},
		{"learned spacing tightens", traffic.State{Tokens: full, LastStart: now.Add(-100 * time.Millisecond), LearnedMinTime: 500 * time.Millisecond},
			def, traffic.ActionWait, 400 * time.Millisecond, traffic.BlockerSpacing, 0},
		{"learned spacing never loosens", traffic.State{Tokens: full, LastStart: now.Add(-100 * time.Millisecond), LearnedMinTime: 110 * time.Millisecond},
			def, traffic.ActionWait, 250 * time.Millisecond, traffic.BlockerSpacing, 0},
		{"empty bucket waits one refill", traffic.State{Tokens: 0}, def, traffic.ActionWait, time.Second, traffic.BlockerRate, 0},
		{"half a token", traffic.State{Tokens: 0.5}, with(func(c *traffic.QueueConfig) { c.RequestsPerMinute = 30 }),
			traffic.ActionWait, time.Second, traffic.BlockerRate, 0},
		{"a token short by rounding dispatches", traffic.State{Tokens: 1 - 1e-12}, def, traffic.ActionDispatch, 0, "", 0},
		{"latest blocker wins", traffic.State{Tokens: 0, LastStart: now.Add(-100 * time.Millisecond)}, def,
			traffic.ActionWait, time.Second, traffic.BlockerRate, 0},
		{"learned budget spent waits for reset", traffic.State{Tokens: full, ThrottleUntil: now.Add(6 * time.Second)}, def,
			traffic.ActionWait, 6 * time.Second, traffic.BlockerLearned, 0},
		{"learned budget left dispatches", traffic.State{Tokens: full, ThrottleUntil: now.Add(6 * time.Second), ThrottleBudget: 3}, def,
			traffic.ActionDispatch, 0, "", 0},
		{"learned throttle lapses at reset", traffic.State{Tokens: full, ThrottleUntil: now}, def, traffic.ActionDispatch, 0, "", 0},
		{"queue full beats everything", traffic.State{Queued: 1, Running: 9, Tokens: 0},
			with(func(c *traffic.QueueConfig) { c.MaxQueueDepth = 1 }), traffic.ActionReject, 0, "", time.Second},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := traffic.Decide(tc.s, tc.cfg, now)
			if d.Action != tc.want || d.Delay != tc.delay || d.Blocker != tc.blocker || d.RetryAfter != tc.retry {
				t.Fatalf("Decide = %+v (%s), want %s delay %v blocker %q retryAfter %v", d, d.Action, tc.want, tc.delay, tc.blocker, tc.retry)
			}
			if tc.want == traffic.ActionReject && d.Code != traffic.CodeQueueFull {
				t.Fatalf("code = %q, want %s", d.Code, traffic.CodeQueueFull)
			}
			// Pure: the same inputs give the same answer.
			if again := traffic.Decide(tc.s, tc.cfg, now); again != d {
				t.Fatalf("second call = %+v, first %+v", again, d)
			}
		})
	}
}
