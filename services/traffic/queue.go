package traffic

import (
	"container/list"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"switchyard/services"
)

// Built-in requestQueue defaults (40-admin-api §2.3).
const (
	defaultRequestsPerMinute  = 60
	defaultMinTimeBetweenMs   = 350
	defaultConcurrentRequests = 6
	defaultMaxWaitMs          = 15_000
)

// idleAfter drops a key's limiter when nothing ran or waited for that long;
// its bucket would be full again by then anyway.
const idleAfter = 10 * time.Minute

// sweepEvery spaces the idle sweeps done on the admission path.
const sweepEvery = time.Minute

// QueueConfig is the effective requestQueue settings of one limiter key
// (40-admin-api §2.3 without the autoEnableApiKeyProviders switch, which
// decides whether a connection is protected at all, not how).
type QueueConfig struct {
	// RequestsPerMinute is the token bucket: capacity requestsPerMinute,
	// refilled at requestsPerMinute/60 per second. Default 60; range 1–1000000.
	RequestsPerMinute int `json:"requestsPerMinute"`
	// MinTimeBetweenRequestsMs spaces send starts, in milliseconds.
	// Default 350; range 0–3600000.
	MinTimeBetweenRequestsMs int64 `json:"minTimeBetweenRequestsMs"`
	// ConcurrentRequests caps executing requests. Default 6; range 1–10000.
	ConcurrentRequests int `json:"concurrentRequests"`
	// MaxWaitMs bounds execution from dispatch to the upstream's response
	// headers (first byte for streams), never queue dwell (BD 14).
	// Default 15000; range 1–30000.
	MaxWaitMs int64 `json:"maxWaitMs"`
	// MaxQueueDepth refuses a request with RATE_LIMIT_QUEUE_FULL when that
	// many already wait; 0 = unbounded. Default 0; range 0–100000.
	MaxQueueDepth int `json:"maxQueueDepth"`
	// QueueWaitMs removes a request still queued after it, with
	// RATE_LIMIT_QUEUE_TIMEOUT; 0 = no bound. Default 0; range 0–600000.
	QueueWaitMs int64 `json:"queueWaitMs"`
}

// DefaultQueueConfig returns the built-in requestQueue defaults.
func DefaultQueueConfig() QueueConfig {
	return QueueConfig{
		RequestsPerMinute:        defaultRequestsPerMinute,
		MinTimeBetweenRequestsMs: defaultMinTimeBetweenMs,
		ConcurrentRequests:       defaultConcurrentRequests,
		MaxWaitMs:                defaultMaxWaitMs,
	}
}

// WithOverrides returns c with a connection's rateLimitOverrides applied;
// nil fields inherit.
func (c QueueConfig) WithOverrides(o services.RateLimitOverrides) QueueConfig {
	if o.RequestsPerMinute != nil {
		c.RequestsPerMinute = *o.RequestsPerMinute
	}
	if o.MinTimeBetweenRequestsMs != nil {
		c.MinTimeBetweenRequestsMs = int64(*o.MinTimeBetweenRequestsMs)
	}
	if o.ConcurrentRequests != nil {
		c.ConcurrentRequests = *o.ConcurrentRequests
	}
	if o.MaxWaitMs != nil {
		c.MaxWaitMs = int64(*o.MaxWaitMs)
	}
	if o.MaxQueueDepth != nil {
		c.MaxQueueDepth = *o.MaxQueueDepth
	}
	if o.QueueWaitMs != nil {
		c.QueueWaitMs = int64(*o.QueueWaitMs)
	}
	return c
}

// normalised replaces values outside what the limiter can run with fallback's.
func (c QueueConfig) normalised(fallback QueueConfig) QueueConfig {
	if c.RequestsPerMinute < 1 {
		c.RequestsPerMinute = fallback.RequestsPerMinute
	}
	if c.MinTimeBetweenRequestsMs < 0 {
		c.MinTimeBetweenRequestsMs = fallback.MinTimeBetweenRequestsMs
	}
	if c.ConcurrentRequests < 1 {
		c.ConcurrentRequests = fallback.ConcurrentRequests
	}
	if c.MaxWaitMs < 1 {
		c.MaxWaitMs = fallback.MaxWaitMs
	}
	if c.MaxQueueDepth < 0 {
		c.MaxQueueDepth = 0
	}
	if c.QueueWaitMs < 0 {
		c.QueueWaitMs = 0
	}
	return c
}

// QueueKey is the limiter key of 20-resilience §10: provider:connectionId,
// with :model appended on perModelQuota providers (model "" otherwise).
func QueueKey(provider, connectionID, model string) string {
	if model == "" {
		return provider + ":" + connectionID
	}
	return provider + ":" + connectionID + ":" + model
}

// splitKey undoes QueueKey; a model may itself contain ':'.
func splitKey(key string) (provider, connectionID, model string) {
	parts := strings.SplitN(key, ":", 3)
	switch len(parts) {
	case 1:
		return "", parts[0], ""
	case 2:
		return parts[0], parts[1], ""
	}
	return parts[0], parts[1], parts[2]
}

// Rejections counts the local refusals of one key (or all of them). They are
// never reset.
type Rejections struct {
	QueueFull        int64 `json:"queueFull"`
	QueueTimeout     int64 `json:"queueTimeout"`
	ExecutionTimeout int64 `json:"executionTimeout"`
}

func (r *Rejections) add(code string) {
	switch code {
	case CodeQueueFull:
		r.QueueFull++
	case CodeQueueTimeout:
		r.QueueTimeout++
	case CodeExecutionTimeout:
		r.ExecutionTimeout++
	}
}

// QueueStats is one limiter key as GET /api/concurrency shows it.
type QueueStats struct {
	Key          string `json:"key"`
	Provider     string `json:"provider"`
	ConnectionID string `json:"connectionId"`
	Model        string `json:"model,omitempty"`
	// Queued counts waiting requests, Running executing ones.
	Queued  int `json:"queued"`
	Running int `json:"running"`
	// Config is the key's effective settings at its last admission (the
	// global settings when it has no live limiter).
	Config     QueueConfig   `json:"config"`
	Learned    *LearnedLimit `json:"learned"`
	Rejections Rejections    `json:"rejections"`
}

// QueueTotals sums every key.
type QueueTotals struct {
	Queued     int        `json:"queued"`
	Running    int        `json:"running"`
	Rejections Rejections `json:"rejections"`
}

// Queues is the request queue of rate-limit protection (20-resilience §10):
// per limiter key a token bucket, a minimum spacing between send starts, a
// cap on executing requests and a FIFO of waiting requests, tightened by
// limits learned from upstream headers. Callers use it only for protected
// connections (opt-in, BD 13). Memory only, except for the learned limits,
// which a LearnedStore keeps across restarts (UseLearnedStore). It is the
// in-process RateStore. Safe for concurrent use.
type Queues struct {
	clock services.Clock
	cfg   func() QueueConfig

	mu         sync.Mutex
	queues     map[string]*keyQueue
	learned    map[string]*learnedEntry
	rejections map[string]*Rejections // never swept: counters are never reset
	totals     Rejections
	lastSweep  time.Time

	// learnedStore persists learned limits (UseLearnedStore); nil = memory
	// only. persistMu serialises its writers.
	learnedStore LearnedStore
	persistMu    sync.Mutex
	// learnedFeed shares stored learned limits with the other replicas of
	// a fleet (ShareLearned); nil in a single process.
	learnedFeed  services.ChangeFeed
	learnedOnErr func(error)
}

// keyQueue is the limiter of one key. Guarded by Queues.mu. It owns the
// tickets it admits: a key with running requests is never swept, so a
// ticket's keyQueue outlives it.
type keyQueue struct {
	q   *Queues
	key string
	cfg QueueConfig
	// inherits records that cfg equalled the global settings at the last
	// admission, so Reconfigure may apply new global settings to it.
	inherits  bool
	lim       *rate.Limiter
	lastStart time.Time
	running   int
	waiters   list.List // of *queueWaiter, arrival order
	lastUsed  time.Time
}

type queueWaiter struct {
	elem *list.Element
	// wake ends the waiter's current wait so it looks again; nil while it
	// is not waiting.
	wake context.CancelFunc
}

// NewQueues returns the request queues. clock is the time of every
// admission decision and of the waits (nil = services.RealClock); cfg returns
// the live global requestQueue settings (nil = DefaultQueueConfig), used to
// fill unusable values of an Admit's config and by Reconfigure and Reset.
func NewQueues(clock services.Clock, cfg func() QueueConfig) *Queues {
	if clock == nil {
		clock = services.RealClock{}
	}
	if cfg == nil {
		cfg = DefaultQueueConfig
	}
	return &Queues{
		clock:      clock,
		cfg:        cfg,
		queues:     make(map[string]*keyQueue),
		learned:    make(map[string]*learnedEntry),
		rejections: make(map[string]*Rejections),
	}
}

// Effective returns the live global settings with a connection's overrides
// applied, ready for Admit.
func (q *Queues) Effective(o services.RateLimitOverrides) QueueConfig {
	return q.global().WithOverrides(o)
}

func (q *Queues) global() QueueConfig {
	return q.cfg().normalised(DefaultQueueConfig())
}

// TicketKey is the TicketOwner side of Ticket.Key.
func (kq *keyQueue) TicketKey() string { return kq.key }

// TicketDone is the TicketOwner side of Ticket.Done.
func (kq *keyQueue) TicketDone() {
	q := kq.q
	q.mu.Lock()
	kq.running--
	kq.lastUsed = q.clock.Now()
	wakeHeadLocked(kq)
	q.mu.Unlock()
}

// TicketTimedOut is the TicketOwner side of Ticket.ExecutionTimeout.
func (kq *keyQueue) TicketTimedOut() {
	q := kq.q
	q.mu.Lock()
	q.countLocked(kq.key, CodeExecutionTimeout)
	q.mu.Unlock()
}

// Admit waits until the key's limiter lets the request be dispatched, then
// returns its Ticket. cfg is the key's effective settings (Effective); a
// settings change applies from the next admission, to the key's waiting
// requests too.
//
// Decide runs first: with maxQueueDepth > 0 and that many waiting, Admit
// returns at once a *LimitError RATE_LIMIT_QUEUE_FULL (429). Otherwise the
// request waits its turn in FIFO order for the token bucket, the minimum
// spacing, the concurrent cap and any learned throttle. When ctx ends first
// it returns ctx.Err() and the request is never dispatched; when
// queueWaitMs > 0 elapses first, a *LimitError RATE_LIMIT_QUEUE_TIMEOUT
// (503). Refusals change no resilience state (BD 2).
func (q *Queues) Admit(ctx context.Context, key string, cfg QueueConfig) (Ticket, error) {
	if err := ctx.Err(); err != nil {
		return Ticket{}, err
	}
	global := q.global()
	cfg = cfg.normalised(global)

	q.mu.Lock()
	now := q.clock.Now()
	if now.Sub(q.lastSweep) >= sweepEvery {
		q.sweepLocked(now)
	}
	kq := q.queueLocked(key, now)
	q.configureLocked(kq, cfg, cfg == global, now)

	d := Decide(q.stateLocked(kq, kq.waiters.Len(), now), cfg, now)
	switch d.Action {
	case ActionDispatch:
		t := q.startLocked(kq, now)
		q.mu.Unlock()
		return t, nil
	case ActionReject:
		err := q.refuseLocked(kq, CodeQueueFull, d.RetryAfter)
		q.mu.Unlock()
		return Ticket{}, err
	}

	w := &queueWaiter{}
	w.elem = kq.waiters.PushBack(w)
	var dwellEnd time.Time // queueWaitMs as set when the request arrived
	if cfg.QueueWaitMs > 0 {
		dwellEnd = now.Add(time.Duration(cfg.QueueWaitMs) * time.Millisecond)
	}
	tok := BeginWait(ctx, WaitQueue, key, time.Duration(cfg.QueueWaitMs)*time.Millisecond)
	defer tok.End()
	for {
		// q.mu is held here.
		var delay time.Duration // 0: until woken
		if kq.waiters.Front() == w.elem {
			d = Decide(q.stateLocked(kq, 0, now), kq.cfg, now)
			if d.Action == ActionDispatch {
				kq.waiters.Remove(w.elem)
				t := q.startLocked(kq, now)
				wakeHeadLocked(kq) // the next one looks at its own turn
				q.mu.Unlock()
				return t, nil
			}
			delay = d.Delay
		}
		if !dwellEnd.IsZero() {
			left := dwellEnd.Sub(now)
			if left <= 0 {
				err := q.refuseLocked(kq, CodeQueueTimeout, queueRetryAfter(kq.waiters.Len(), kq.cfg.RequestsPerMinute))
				leaveLocked(kq, w)
				q.mu.Unlock()
				return Ticket{}, err
			}
			if delay == 0 || left < delay {
				delay = left
			}
		}

		wctx, wake := context.WithCancel(ctx)
		w.wake = wake
		q.mu.Unlock()
		if delay > 0 {
			_ = q.clock.Wait(wctx, delay)
		} else {
			<-wctx.Done()
		}
		wake()
		q.mu.Lock()
		w.wake = nil
		now = q.clock.Now()
		if err := ctx.Err(); err != nil { // the client left: never dispatched
			leaveLocked(kq, w)
			q.mu.Unlock()
			return Ticket{}, err
		}
	}
}

// queueLocked returns the key's limiter, creating it on first use.
func (q *Queues) queueLocked(key string, now time.Time) *keyQueue {
	kq := q.queues[key]
	if kq == nil {
		kq = &keyQueue{q: q, key: key}
		q.queues[key] = kq
	}
	kq.lastUsed = now
	return kq
}

// configureLocked applies cfg to the key. A new requestsPerMinute resizes the
// bucket in place (tokens kept, capped at the new capacity); waiting requests
// look again under the new settings.
func (q *Queues) configureLocked(kq *keyQueue, cfg QueueConfig, inherits bool, now time.Time) {
	kq.inherits = inherits
	if kq.lim == nil {
		kq.cfg = cfg
		kq.lim = newBucket(cfg.RequestsPerMinute)
		return
	}
	if kq.cfg == cfg {
		return
	}
	if kq.cfg.RequestsPerMinute != cfg.RequestsPerMinute {
		kq.lim.SetLimitAt(now, rate.Limit(float64(cfg.RequestsPerMinute)/60))
		kq.lim.SetBurstAt(now, cfg.RequestsPerMinute)
	}
	kq.cfg = cfg
	wakeHeadLocked(kq)
}

func newBucket(rpm int) *rate.Limiter {
	return rate.NewLimiter(rate.Limit(float64(rpm)/60), rpm)
}

func (q *Queues) stateLocked(kq *keyQueue, ahead int, now time.Time) State {
	s := State{Queued: ahead, Running: kq.running, Tokens: kq.lim.TokensAt(now), LastStart: kq.lastStart}
	if e := q.learned[kq.key]; e != nil {
		s.LearnedMinTime = e.minTime
		if e.throttledAt(now) {
			s.ThrottleUntil, s.ThrottleBudget = e.resetAt, e.budget
		}
	}
	return s
}

// startLocked dispatches one request of kq.
func (q *Queues) startLocked(kq *keyQueue, now time.Time) Ticket {
	if !kq.lim.AllowN(now, 1) {
		// Decide's tokenSlack let a token short by rounding through; take
		// it anyway (the bucket goes a hair below zero).
		kq.lim.ReserveN(now, 1)
	}
	kq.lastStart = now
	kq.running++
	if e := q.learned[kq.key]; e != nil && e.throttledAt(now) {
		e.budget--
	}
	return NewTicket(kq, now, time.Duration(kq.cfg.MaxWaitMs)*time.Millisecond)
}

// refuseLocked counts a refusal of kq and builds its error.
func (q *Queues) refuseLocked(kq *keyQueue, code string, retryAfter time.Duration) *LimitError {
	q.countLocked(kq.key, code)
	return queueRefusal(kq.key, code, kq.waiters.Len(), kq.cfg, retryAfter)
}

// queueRefusal is the error of a refused admission of key: the queue holds
// waiting requests, cfg the key's effective settings.
func queueRefusal(key, code string, waiting int, cfg QueueConfig, retryAfter time.Duration) *LimitError {
	e := &LimitError{Code: code, RetryAfter: retryAfter, Key: key}
	switch code {
	case CodeQueueFull:
		e.Status = 429
		e.Message = fmt.Sprintf("Switchyard's own request queue for %s holds %d waiting requests "+
			"(requestQueue.maxQueueDepth = %d); this is not an upstream rejection",
			displayKey(key), waiting, cfg.MaxQueueDepth)
	case CodeQueueTimeout:
		e.Status = 503
		e.Message = fmt.Sprintf("The request waited in Switchyard's own request queue for %s longer than "+
			"requestQueue.queueWaitMs = %d; this is not an upstream rejection",
			displayKey(key), cfg.QueueWaitMs)
	}
	return e
}

func (q *Queues) countLocked(key, code string) {
	r := q.rejections[key]
	if r == nil {
		r = &Rejections{}
		q.rejections[key] = r
	}
	r.add(code)
	q.totals.add(code)
}

// displayKey renders "openai:c_7" as "openai/c_7" for messages.
func displayKey(key string) string {
	return strings.Replace(key, ":", "/", 1)
}

// leaveLocked removes a waiter that gives up; if it was first in line, the
// next one takes its turn.
func leaveLocked(kq *keyQueue, w *queueWaiter) {
	wasHead := kq.waiters.Front() == w.elem
	kq.waiters.Remove(w.elem)
	if wasHead {
		wakeHeadLocked(kq)
	}
}

// wakeHeadLocked makes the first waiter of kq look at its turn again.
func wakeHeadLocked(kq *keyQueue) {
	if f := kq.waiters.Front(); f != nil {
		if w := f.Value.(*queueWaiter); w.wake != nil {
			w.wake()
		}
	}
}

// sweepLocked drops idle limiters (nothing running or waiting for
// idleAfter) and learned entries past their use.
func (q *Queues) sweepLocked(now time.Time) {
	q.lastSweep = now
	for key, kq := range q.queues {
		if kq.running == 0 && kq.waiters.Len() == 0 && now.Sub(kq.lastUsed) >= idleAfter {
			delete(q.queues, key)
		}
	}
	for key, e := range q.learned {
		if e.stale(now) {
			delete(q.learned, key)
		}
	}
}

// Reconfigure applies changed global settings to live limiters that used
// them unchanged at their last admission (keys with overrides keep theirs
// until their next admission, which passes the new effective config) and
// makes every waiting request look at its turn again. Call it after the
// settings changed; every Admit applies its own config anyway.
func (q *Queues) Reconfigure() {
	global := q.global()
	q.mu.Lock()
	defer q.mu.Unlock()
	now := q.clock.Now()
	for _, kq := range q.queues {
		if kq.inherits {
			q.configureLocked(kq, global, true, now)
		}
		wakeHeadLocked(kq)
	}
}

// Reset clears learned throttles and rebuilds every live limiter from its
// settings (POST /api/concurrency/reset, target queues); queued requests keep
// their order, executing ones their hold, counters their counts. The stored
// learned limits go first: when that fails nothing is reset (memory cleared
// before the store would bring the throttles back at the next start). It
// returns the number of keys reset.
func (q *Queues) Reset(ctx context.Context) (int, error) {
	return q.reset(ctx, func(string) bool { return true })
}

// ResetConnection is Reset for the keys of one connection.
func (q *Queues) ResetConnection(ctx context.Context, connectionID string) (int, error) {
	return q.reset(ctx, func(key string) bool {
		_, id, _ := splitKey(key)
		return id == connectionID
	})
}

func (q *Queues) reset(ctx context.Context, match func(key string) bool) (int, error) {
	global := q.global()
	// persistMu keeps PersistLearned from storing an entry between the
	// delete and the memory reset.
	q.persistMu.Lock()
	defer q.persistMu.Unlock()
	if store := q.learnedStore; store != nil {
		var keys []string
		q.mu.Lock()
		for key := range q.learned {
			if match(key) {
				keys = append(keys, key)
			}
		}
		q.mu.Unlock()
		if len(keys) > 0 {
			if err := store.DeleteLearnedLimits(ctx, keys); err != nil {
				return 0, fmt.Errorf("traffic: reset learned limits: %w", err)
			}
		}
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	n := 0
	for key := range q.learned {
		if match(key) {
			delete(q.learned, key)
		}
	}
	for key, kq := range q.queues {
		if !match(key) {
			continue
		}
		n++
		if kq.inherits {
			kq.cfg = global
		}
		kq.lim = newBucket(kq.cfg.RequestsPerMinute)
		kq.lastStart = time.Time{}
		wakeHeadLocked(kq)
	}
	return n, nil
}

// Stats returns every key with a live limiter, learned limits or refusals,
// by key.
func (q *Queues) Stats() []QueueStats {
	global := q.global()
	q.mu.Lock()
	now := q.clock.Now()
	keys := make(map[string]struct{}, len(q.queues)+len(q.learned)+len(q.rejections))
	for k := range q.queues {
		keys[k] = struct{}{}
	}
	for k := range q.learned {
		keys[k] = struct{}{}
	}
	for k := range q.rejections {
		keys[k] = struct{}{}
	}
	out := make([]QueueStats, 0, len(keys))
	for key := range keys {
		st := QueueStats{Key: key, Config: global}
		st.Provider, st.ConnectionID, st.Model = splitKey(key)
		if kq := q.queues[key]; kq != nil {
			st.Queued, st.Running, st.Config = kq.waiters.Len(), kq.running, kq.cfg
		}
		if e := q.learned[key]; e != nil {
			l := e.snapshot(key, now)
			st.Learned = &l
		}
		if r := q.rejections[key]; r != nil {
			st.Rejections = *r
		}
		out = append(out, st)
	}
	q.mu.Unlock()
	slices.SortFunc(out, func(a, b QueueStats) int { return strings.Compare(a.Key, b.Key) })
	return out
}

// Totals sums every key: waiting, executing, refusals.
func (q *Queues) Totals() QueueTotals {
	q.mu.Lock()
	defer q.mu.Unlock()
	t := QueueTotals{Rejections: q.totals}
	for _, kq := range q.queues {
		t.Queued += kq.waiters.Len()
		t.Running += kq.running
	}
	return t
}
