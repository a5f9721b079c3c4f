package traffic

import (
	"context"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// learnedMaxAge ignores learned limits older than this at Restore, and lets
// the sweep forget them (20-resilience §10, §15).
const learnedMaxAge = 24 * time.Hour

// Request-limit headers: OpenAI style first, then the Anthropic equivalents.
var (
	limitHeaders     = []string{"X-Ratelimit-Limit-Requests", "Anthropic-Ratelimit-Requests-Limit"}
	remainingHeaders = []string{"X-Ratelimit-Remaining-Requests", "Anthropic-Ratelimit-Requests-Remaining"}
	resetHeaders     = []string{"X-Ratelimit-Reset-Requests", "Anthropic-Ratelimit-Requests-Reset"}
)

// LearnedLimit is what the upstream said about a limiter key's request limit,
// as persisted in learned_rate_limits (limiter_key, limit_requests,
// remaining, reset_at, min_time_ms, observed_at) and shown by
// GET /api/concurrency.
type LearnedLimit struct {
	Key string `json:"-"`
	// LimitRequests is the upstream's request limit per minute; 0 unknown.
	LimitRequests int `json:"limitRequests"`
	// Remaining is the last remaining count observed.
	Remaining int `json:"remaining"`
	// ResetAt is when the upstream said Remaining resets; zero unknown.
	ResetAt time.Time `json:"resetAt"`
	// MinTimeMs is the learned spacing, floor(60000/LimitRequests) − 10 ms.
	MinTimeMs int64 `json:"minTimeMs"`
	// ObservedAt is the last response that taught something.
	ObservedAt time.Time `json:"-"`
	// Throttled: sends are limited to Remaining until ResetAt. Derived, not
	// persisted.
	Throttled bool `json:"throttled"`
}

// learnedEntry is one key's learned limit. Guarded by Queues.mu.
type learnedEntry struct {
	limit, remaining int
	resetAt          time.Time
	minTime          time.Duration
	observedAt       time.Time
	throttled        bool
	budget           int // sends left before resetAt while throttled

	// savedObservedAt is observedAt as last stored (zero: never), savedAt
	// when that was, on the queue's clock: the entry is dirty while
	// observedAt is newer, and stored at most once per persistEvery.
	savedObservedAt, savedAt time.Time
}

// throttledAt reports whether the throttle holds at now; it lapses by itself
// at resetAt.
func (e *learnedEntry) throttledAt(now time.Time) bool {
	return e.throttled && now.Before(e.resetAt)
}

// stale: old and nothing pending.
func (e *learnedEntry) stale(now time.Time) bool {
	return now.Sub(e.observedAt) > learnedMaxAge && !now.Before(e.resetAt)
}

func (e *learnedEntry) snapshot(key string, now time.Time) LearnedLimit {
	return LearnedLimit{Key: key, LimitRequests: e.limit, Remaining: e.remaining, ResetAt: e.resetAt,
		MinTimeMs: e.minTime.Milliseconds(), ObservedAt: e.observedAt, Throttled: e.throttledAt(now)}
}

// observe updates the entry from one set of values; reset is zero when
// unknown. Below 10 % of the limit remaining, sends are held to that many
// until reset; above 50 % the throttle lifts.
func (e *learnedEntry) observe(now time.Time, limit, remaining int, hasLimit, hasRemaining bool, reset time.Time) {
	e.observedAt = now
	if hasLimit && limit > 0 {
		e.limit = limit
		e.minTime = max(time.Duration(60_000/limit-10)*time.Millisecond, 0)
	}
	if !reset.IsZero() {
		e.resetAt = reset
	}
	if !hasRemaining {
		return
	}
	e.remaining = max(remaining, 0)
	if e.limit <= 0 {
		return
	}
	switch {
	case e.remaining*10 < e.limit:
		// Without a known reset in the future a budget could never refill.
		if e.resetAt.After(now) {
			e.throttled, e.budget = true, e.remaining
		}
	case e.remaining*2 > e.limit:
		e.throttled = false
	default:
		if e.throttled {
			e.budget = e.remaining
		}
	}
}

// Learn updates the key's learned limit from an upstream response's
// x-ratelimit-{limit,remaining,reset}-requests headers (or the Anthropic
// equivalents). It records for every connection; only Admit, which callers
// use for protected connections, applies it. Learned values only tighten the
// configured ones. A response without those headers changes nothing.
//
// The learned entry is stored later, off the request path (PersistLearned).
// It never fails: the error is the RateStore contract's.
func (q *Queues) Learn(_ context.Context, key string, h http.Header) error {
	limit, hasLimit := headerInt(h, limitHeaders)
	remaining, hasRemaining := headerInt(h, remainingHeaders)
	now := q.clock.Now()
	reset := headerReset(h, resetHeaders, now)
	if !hasLimit && !hasRemaining && reset.IsZero() {
		return nil
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	e := q.learnedLocked(key)
	e.observe(now, limit, remaining, hasLimit, hasRemaining, reset)
	if kq := q.queues[key]; kq != nil {
		wakeHeadLocked(kq)
	}
	return nil
}

// LearnRateLimited is Learn for an upstream 429: nothing more is sent on the
// key until the reset it announces (x-ratelimit-reset-requests, the Anthropic
// equivalent, else Retry-After). Without any reset hint only the headers are
// learned: a throttle that could never lapse would hold the key for ever.
func (q *Queues) LearnRateLimited(_ context.Context, key string, h http.Header) error {
	limit, hasLimit := headerInt(h, limitHeaders)
	now := q.clock.Now()
	reset := headerReset(h, resetHeaders, now)
	if reset.IsZero() {
		reset = retryAfter(h.Get("Retry-After"), now)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	e := q.learnedLocked(key)
	e.observe(now, limit, 0, hasLimit, false, reset)
	e.remaining = 0
	if e.resetAt.After(now) {
		e.throttled, e.budget = true, 0
	}
	return nil
}

func (q *Queues) learnedLocked(key string) *learnedEntry {
	e := q.learned[key]
	if e == nil {
		e = &learnedEntry{}
		q.learned[key] = e
	}
	return e
}

// Learned returns every learned limit, by key, for persistence (debounced by
// the caller) and display.
func (q *Queues) Learned() []LearnedLimit {
	q.mu.Lock()
	now := q.clock.Now()
	out := make([]LearnedLimit, 0, len(q.learned))
	for key, e := range q.learned {
		out = append(out, e.snapshot(key, now))
	}
	q.mu.Unlock()
	slices.SortFunc(out, func(a, b LearnedLimit) int { return strings.Compare(a.Key, b.Key) })
	return out
}

// Restore loads persisted learned limits: entries observed more than 24 h ago
// are ignored, as are ones older than what is already known for the key.
// Throttled is recomputed from Remaining, LimitRequests and ResetAt. It
// returns how many were loaded.
func (q *Queues) Restore(limits []LearnedLimit) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	now := q.clock.Now()
	n := 0
	for _, l := range limits {
		if l.Key == "" || now.Sub(l.ObservedAt) > learnedMaxAge {
			continue
		}
		if e := q.learned[l.Key]; e != nil && !l.ObservedAt.After(e.observedAt) {
			continue
		}
		e := &learnedEntry{limit: max(l.LimitRequests, 0), remaining: max(l.Remaining, 0), resetAt: l.ResetAt,
			minTime: max(time.Duration(l.MinTimeMs)*time.Millisecond, 0), observedAt: l.ObservedAt,
			savedObservedAt: l.ObservedAt, savedAt: now}
		if e.limit > 0 && e.remaining*10 < e.limit && e.resetAt.After(now) {
			e.throttled, e.budget = true, e.remaining
		}
		q.learned[l.Key] = e
		n++
	}
	return n
}

// headerInt reads the first present header of names as a non-negative integer.
func headerInt(h http.Header, names []string) (int, bool) {
	for _, name := range names {
		v := strings.TrimSpace(h.Get(name))
		if v == "" {
			continue
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return 0, false
		}
		return n, true
	}
	return 0, false
}

// headerReset reads the first present reset header of names as an instant;
// zero when absent or unparsable.
func headerReset(h http.Header, names []string, now time.Time) time.Time {
	for _, name := range names {
		if v := strings.TrimSpace(h.Get(name)); v != "" {
			return parseReset(v, now)
		}
	}
	return time.Time{}
}

// parseReset reads a reset value: a Go-style duration as OpenAI sends it
// ("6s", "1m30s", "20ms"), plain seconds ("6", "0.5"; above 10^9 an epoch
// instant), or an RFC 3339 instant as Anthropic sends it.
func parseReset(v string, now time.Time) time.Time {
	if d, err := time.ParseDuration(v); err == nil {
		if d < 0 {
			return time.Time{}
		}
		return now.Add(d)
	}
	if f, err := strconv.ParseFloat(v, 64); err == nil && f >= 0 {
		if f > 1e9 {
			return time.Unix(0, int64(f*float64(time.Second))).UTC()
		}
		return now.Add(time.Duration(f * float64(time.Second)))
	}
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return t
	}
	return time.Time{}
}

// retryAfter reads Retry-After (seconds or an HTTP date); zero when absent.
func retryAfter(v string, now time.Time) time.Time {
	v = strings.TrimSpace(v)
	if v == "" {
		return time.Time{}
	}
	if s, err := strconv.Atoi(v); err == nil {
		if s <= 0 {
			return time.Time{}
		}
		return now.Add(time.Duration(s) * time.Second)
	}
	if t, err := http.ParseTime(v); err == nil {
		return t
	}
	return time.Time{}
}
