package traffic

import (
	"math"
	"time"
)

// Action is what Decide tells a request to do.
type Action uint8

const (
	// ActionDispatch: send it now.
	ActionDispatch Action = iota
	// ActionWait: stay queued (Decision.Delay says for how long at least).
	ActionWait
	// ActionReject: refuse it at once (Decision.Code, Decision.RetryAfter).
	ActionReject
)

// What holds a waiting request (Decision.Blocker).
const (
	BlockerQueue       = "queue"       // requests ahead of it in the FIFO
	BlockerConcurrency = "concurrency" // concurrentRequests executing
	BlockerSpacing     = "spacing"     // minTimeBetweenRequestsMs (configured or learned)
	BlockerRate        = "rate"        // token bucket of requestsPerMinute empty
	BlockerLearned     = "learned"     // upstream said almost nothing remains until its reset
)

// State is what Decide needs to know about one limiter key at one instant.
type State struct {
	// Queued counts the requests waiting ahead of this one: every waiting
	// request for a new arrival, 0 for the head of the queue. Executing
	// requests are not counted.
	Queued int
	// Running counts dispatched requests whose Ticket is not Done.
	Running int
	// Tokens is the token bucket's content at the instant decided on.
	Tokens float64
	// LastStart is the previous dispatch; zero when none.
	LastStart time.Time
	// LearnedMinTime is the spacing learned from upstream limits
	// (floor(60000/limit) − 10 ms); it only tightens the configured one.
	LearnedMinTime time.Duration
	// ThrottleUntil, when after the instant decided on, limits the sends
	// before it to ThrottleBudget (learned remaining < 10 % of the limit).
	ThrottleUntil  time.Time
	ThrottleBudget int
}

// Decision is the outcome of Decide.
type Decision struct {
	Action Action
	// Delay (ActionWait) is how long until the limiter may allow it; 0 means
	// until an executing request ends or the requests ahead leave.
	Delay time.Duration
	// Blocker (ActionWait) names what holds it, one of the Blocker* values;
	// with several timed blockers, the one ending last.
	Blocker string
	// Code (ActionReject) is CodeQueueFull.
	Code string
	// RetryAfter (ActionReject) is clamp(ceil(queued × 60 / requestsPerMinute), 1, 60) s.
	RetryAfter time.Duration
}

// tokenSlack absorbs float rounding of the token bucket, so a request woken
// exactly when its token is due is not sent back to sleep for a nanosecond.
const tokenSlack = 1e-9

// Decide is the admission decision of the request queue (20-resilience §10),
// a pure function of the key's state, its effective settings and the
// instant. In order:
//
//  1. maxQueueDepth > 0 and Queued ≥ maxQueueDepth → reject
//     RATE_LIMIT_QUEUE_FULL, before the request joins the queue;
//  2. anyone queued ahead → wait (FIFO);
//  3. Running ≥ concurrentRequests → wait for one to end;
//  4. min spacing since LastStart, an empty token bucket or an exhausted
//     learned budget → wait for the latest of them;
//  5. otherwise dispatch.
func Decide(s State, cfg QueueConfig, now time.Time) Decision {
	if cfg.MaxQueueDepth > 0 && s.Queued >= cfg.MaxQueueDepth {
		return Decision{Action: ActionReject, Code: CodeQueueFull,
			RetryAfter: queueRetryAfter(s.Queued, cfg.RequestsPerMinute)}
	}
	if s.Queued > 0 {
		return Decision{Action: ActionWait, Blocker: BlockerQueue}
	}
	if cfg.ConcurrentRequests > 0 && s.Running >= cfg.ConcurrentRequests {
		return Decision{Action: ActionWait, Blocker: BlockerConcurrency}
	}

	d := Decision{Action: ActionDispatch}
	later := func(delay time.Duration, blocker string) {
		if delay > d.Delay {
			d.Action, d.Delay, d.Blocker = ActionWait, delay, blocker
		}
	}
	if !s.LastStart.IsZero() {
		spacing := max(time.Duration(cfg.MinTimeBetweenRequestsMs)*time.Millisecond, s.LearnedMinTime)
		later(s.LastStart.Add(spacing).Sub(now), BlockerSpacing)
	}
	if cfg.RequestsPerMinute > 0 && s.Tokens < 1-tokenSlack {
		perSecond := float64(cfg.RequestsPerMinute) / 60
		later(time.Duration(math.Ceil((1-s.Tokens)/perSecond*float64(time.Second))), BlockerRate)
	}
	if s.ThrottleBudget <= 0 && now.Before(s.ThrottleUntil) {
		later(s.ThrottleUntil.Sub(now), BlockerLearned)
	}
	return d
}

// queueRetryAfter is the Retry-After of a queue refusal:
// clamp(ceil(queued × 60 / requestsPerMinute), 1, 60) s.
func queueRetryAfter(queued, rpm int) time.Duration {
	if rpm < 1 {
		rpm = defaultRequestsPerMinute
	}
	secs := (int64(queued)*60 + int64(rpm) - 1) / int64(rpm)
	return time.Duration(min(max(secs, 1), 60)) * time.Second
}
