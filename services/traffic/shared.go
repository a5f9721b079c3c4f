package traffic

import "time"

// What a shared (fleet-wide) RateStore needs of the local Queues it falls
// back to: the same refusals, counted in the same counters, and the learned
// limits the local queues derive from upstream headers.

// Refuse counts a refusal of key decided by a shared store and returns its
// error, worded and timed exactly as the local queue's: code is CodeQueueFull
// or CodeQueueTimeout, waiting the requests queued fleet-wide.
func (q *Queues) Refuse(key, code string, waiting int, cfg QueueConfig) *LimitError {
	q.mu.Lock()
	q.countLocked(key, code)
	q.mu.Unlock()
	return queueRefusal(key, code, waiting, cfg, queueRetryAfter(waiting, cfg.RequestsPerMinute))
}

// CountTimeout counts an attempt of key that a shared store's ticket aborted
// at its execution deadline.
func (q *Queues) CountTimeout(key string) {
	q.mu.Lock()
	q.countLocked(key, CodeExecutionTimeout)
	q.mu.Unlock()
}

// LearnedThrottle is what the learned limits of key impose on sends now:
// the minimum spacing, and — while a throttle holds — the sends left before
// Until. ok is false when nothing was learned for key.
func (q *Queues) LearnedThrottle(key string) (minTime time.Duration, until time.Time, budget int, throttled, ok bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	e := q.learned[key]
	if e == nil {
		return 0, time.Time{}, 0, false, false
	}
	now := q.clock.Now()
	if e.throttledAt(now) {
		return e.minTime, e.resetAt, e.budget, true, true
	}
	return e.minTime, time.Time{}, 0, false, true
}

// Now is the queues' clock (a shared store converts the server's deadlines
// into it).
func (q *Queues) Now() time.Time { return q.clock.Now() }
