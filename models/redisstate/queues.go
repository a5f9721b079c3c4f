package redisstate

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"time"

	"switchyard/services"
	"switchyard/services/traffic"
)

// Queues is the request queue of rate-limit protection shared by the fleet
// (20-resilience §10; scale-out §3.4 row 9): per limiter key one token
// bucket, one minimum spacing between send starts, one cap on executing
// requests, one FIFO of waiters and one learned throttle for every replica,
// decided by one script per admission attempt on the Redis server's clock.
// The local *traffic.Queues stays the source of learned limits (it parses
// the upstream headers and persists them), keeps the counters, and answers
// every admission while Redis is unavailable (limits per replica then).
// A key that nothing paces (no spacing, no learned throttle, nobody
// waiting) with room to spare admits from this replica's reserve of it — a
// token block and the running grants of ended requests (reserve.go) — with
// no round trip.
type Queues struct {
	c      *Client
	prefix string
	local  *traffic.Queues
	g      *grants
	poll   time.Duration
	// onFallback counts a local decision taken because Redis was unavailable.
	onFallback func(mechanism string)

	mu   sync.Mutex
	wake map[string]chan struct{}
	// own is this replica's token-block field; res its reserves by key.
	own string
	res reserves
}

var _ traffic.RateStore = (*Queues)(nil)

// QueuesOptions configure Queues; see SlotsOptions.
type QueuesOptions struct {
	Prefix     string
	Replica    string
	GrantTTL   time.Duration
	Poll       time.Duration
	OnFallback func(mechanism string)
}

// NewQueues returns the shared queues over local.
func NewQueues(c *Client, local *traffic.Queues, opts QueuesOptions) *Queues {
	if opts.Prefix == "" {
		opts.Prefix = "sy"
	}
	if opts.GrantTTL <= 0 {
		opts.GrantTTL = 30 * time.Second
	}
	if opts.Poll <= 0 {
		opts.Poll = 100 * time.Millisecond
	}
	if opts.OnFallback == nil {
		opts.OnFallback = func(string) {}
	}
	return &Queues{c: c, prefix: opts.Prefix, local: local, g: newGrants(c, opts.Replica, opts.GrantTTL),
		poll: opts.Poll, onFallback: opts.OnFallback, wake: map[string]chan struct{}{}, own: "r:" + opts.Replica}
}

// Run renews running grants, listens for releases and need notices and
// gives idle reserves back until ctx ends.
func (q *Queues) Run(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Go(func() { q.listen(ctx) })
	wg.Go(func() { every(ctx, reserveSweep, q.sweep) })
	q.g.run(ctx)
	wg.Wait()
}

func (q *Queues) needChannel(key string) string { return q.prefix + ":rqneed:" + key }

// giveBack hands a reserve's spare running grants and unspent tokens back.
func (q *Queues) giveBack(key string, spares []string, unused int) {
	state, running, waitq, _, _, channel := q.keys(key)
	for _, id := range spares {
		q.g.drop(id)
		q.c.release(slotRelease, []string{running, waitq, channel}, id)
	}
	if unused > 0 {
		q.c.release(settleBlock, []string{state}, q.own, unused)
	}
}

func (q *Queues) sweep() { q.res.sweepAll(q.c.opts.ReserveNow(), q.giveBack) }

// forgetReserves drops the reserves of the keys match selects (a reset
// deleted their state in Redis).
func (q *Queues) forgetReserves(match func(key string) bool) {
	q.res.each(func(key string, r *reserve) {
		if !match(key) {
			return
		}
		r.mu.Lock()
		for _, id := range r.forget() {
			q.g.drop(id)
		}
		r.mu.Unlock()
	})
}

// fromReserve admits a request of key from this replica's reserve when the
// key's pacing allows one and the reserve holds what it needs: a token
// (when the key has a rate) and a spare running grant (when it has a
// concurrency cap).
func (q *Queues) fromReserve(key string, cfg traffic.QueueConfig) (traffic.Ticket, bool) {
	rpm, conc := cfg.RequestsPerMinute, cfg.ConcurrentRequests
	if q.c.Degraded() || cfg.MinTimeBetweenRequestsMs > 0 || (rpm <= 0 && conc <= 0) {
		return traffic.Ticket{}, false
	}
	r := q.res.peek(key)
	if r == nil {
		return traffic.Ticket{}, false
	}
	if minTime, _, _, throttled, _ := q.local.LearnedThrottle(key); minTime > 0 || throttled {
		return traffic.Ticket{}, false
	}
	now := q.c.opts.ReserveNow()
	r.mu.Lock()
	if rpm > 0 && (r.tokens == 0 || !now.Before(r.blockEnd)) {
		r.mu.Unlock()
		return traffic.Ticket{}, false
	}
	owner := &queueTicket{q: q, key: key, r: r, limit: conc}
	if conc > 0 {
		id, ok := r.takeSpare(conc, now)
		if !ok {
			r.mu.Unlock()
			return traffic.Ticket{}, false
		}
		owner.grant = id
		if r.grantKey == "" {
			_, r.grantKey, r.waitKey, _, _, r.channel = q.keys(key)
		}
		owner.running, owner.waitq, owner.channel = r.grantKey, r.waitKey, r.channel
	}
	if rpm > 0 {
		r.takeToken(now)
	}
	r.mu.Unlock()
	return traffic.NewTicket(owner, q.local.Now(), time.Duration(cfg.MaxWaitMs)*time.Millisecond), true
}

func (q *Queues) keys(key string) (state, running, waitq, waitexp, seq, channel string) {
	base := q.prefix + ":rq:{" + key + "}"
	return base, base + ":run", base + ":wq", base + ":we", base + ":seq", q.prefix + ":rqfree:" + key
}

// listen turns release notices into wake-ups of this replica's waiters,
// and need notices into the return of its reserve of the key.
func (q *Queues) listen(ctx context.Context) {
	listenFreeNeed(ctx, q.c.rdb, q.prefix+":rqfree:", q.prefix+":rqneed:", q.notify,
		func(key string) { q.res.needed(key, q.c.opts.ReserveNow(), q.giveBack) })
}

func (q *Queues) notify(key string) {
	q.mu.Lock()
	if w, ok := q.wake[key]; ok {
		close(w)
		delete(q.wake, key)
	}
	q.mu.Unlock()
}

func (q *Queues) waitChan(key string) chan struct{} {
	q.mu.Lock()
	defer q.mu.Unlock()
	w, ok := q.wake[key]
	if !ok {
		w = make(chan struct{})
		q.wake[key] = w
	}
	return w
}

// learnedArgs returns the spacing and throttle the local learned limits
// impose on key, for the script.
func (q *Queues) learnedArgs(key string) (minTimeMs int64) {
	minTime, _, _, _, _ := q.local.LearnedThrottle(key)
	return minTime.Milliseconds()
}

// Admit implements traffic.RateStore: it waits until the fleet's limiter for
// key lets the request be dispatched.
func (q *Queues) Admit(ctx context.Context, key string, cfg traffic.QueueConfig) (traffic.Ticket, error) {
	if err := ctx.Err(); err != nil {
		return traffic.Ticket{}, err
	}
	if tk, ok := q.fromReserve(key, cfg); ok {
		return tk, nil
	}
	t := q.newTry(key, cfg)
	res, err := q.c.run(ctx, queueDecide, t.keys, q.args(t)...)
	return q.settle(ctx, t, res, err)
}

// queueTry is one admission to a key's queue: its keys, the arguments of
// queueDecide and where its wait stands.
type queueTry struct {
	key, id                                      string
	cfg                                          traffic.QueueConfig
	spacing                                      int64
	dwellEnd                                     time.Time
	waiterTTL                                    time.Duration
	state, running, waitq, waitexp, seq, channel string
	keys                                         []string
	// waiter is the id under which the request waits in the shared queue
	// ("" until it does); onBoard is set once it is on the waiting board.
	waiter  string
	onBoard bool
	// r is the key's reserve; unused and want are the first try's block
	// settlement and request (reserve.startBlock), ended by endTry.
	r            *reserve
	unused, want int
	tried        bool
}

func (q *Queues) newTry(key string, cfg traffic.QueueConfig) *queueTry {
	t := &queueTry{key: key, id: q.g.newID(), cfg: cfg, waiterTTL: max(10*q.poll, 5*time.Second),
		spacing: max(cfg.MinTimeBetweenRequestsMs, q.learnedArgs(key))}
	if cfg.QueueWaitMs > 0 {
		t.dwellEnd = time.Now().Add(time.Duration(cfg.QueueWaitMs) * time.Millisecond)
	}
	t.state, t.running, t.waitq, t.waitexp, t.seq, t.channel = q.keys(key)
	t.keys = []string{t.state, t.running, t.waitq, t.waitexp, t.seq}
	if cfg.RequestsPerMinute > 0 || cfg.ConcurrentRequests > 0 {
		t.r = q.res.get(key)
		if cfg.RequestsPerMinute > 0 {
			t.r.mu.Lock()
			t.unused, t.want = t.r.startBlock(cfg.RequestsPerMinute, q.c.opts.ReserveNow())
			t.r.mu.Unlock()
		}
	}
	return t
}

// args are queueDecide's ARGV for the next try of t; only the first
// settles or asks for a block.
func (q *Queues) args(t *queueTry) []any {
	cfg := t.cfg
	settle, unused, want := 0, 0, 0
	if !t.tried && (t.unused > 0 || t.want > 0) {
		settle, unused, want = 1, t.unused, t.want
	}
	return []any{cfg.RequestsPerMinute, t.spacing, cfg.ConcurrentRequests, cfg.MaxQueueDepth, t.id,
		q.g.ttl.Milliseconds(), t.waiter, t.waiterTTL.Milliseconds(),
		q.own, settle, unused, want, reserveBlockTTL.Milliseconds(), q.needChannel(t.key)}
}

// endTry records the first try's answer res (nil: it did not reach the
// queue) in the key's reserve: the block it granted and, for a dispatch,
// whether the running count leaves room for spares. Unspent tokens the
// try meant to settle go back off the request path when it did not
// dispatch (a wait or refusal can end the script before the bucket).
func (q *Queues) endTry(t *queueTry, res []any) {
	if t.tried || t.r == nil {
		return
	}
	t.tried = true
	dispatched := len(res) >= 6 && asInt(res[0]) == 1
	got := 0
	if dispatched {
		got = int(asInt(res[4]))
	}
	r := t.r
	r.mu.Lock()
	back := r.endBlock(t.want, got, q.c.opts.ReserveNow())
	var giveBack []string
	if dispatched && t.cfg.ConcurrentRequests > 0 {
		giveBack = r.observe(t.cfg.ConcurrentRequests, int(asInt(res[5])), int(asInt(res[3])))
	}
	r.mu.Unlock()
	unused := back
	if !dispatched && (t.unused > 0 || t.want > 0) {
		unused += t.unused
	}
	if len(giveBack) > 0 || unused > 0 {
		q.giveBack(t.key, giveBack, unused)
	}
}

// settle takes the answer (res, err) of a try of t to its end: dispatched,
// refused, answered locally, or waiting — asking again after the delay the
// script named, a release notice or a poll — until the queue wait elapses
// or the client leaves.
func (q *Queues) settle(ctx context.Context, t *queueTry, res []any, err error) (traffic.Ticket, error) {
	key, cfg := t.key, t.cfg
	leave := func() {
		if t.waiter == "" {
			return
		}
		lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), q.c.opts.CallTimeout)
		_, _ = q.c.run(lctx, leaveWait, []string{t.waitq, t.waitexp, t.channel}, t.waiter)
		cancel()
	}
	for ; ; res, err = q.c.run(ctx, queueDecide, t.keys, q.args(t)...) {
		q.endTry(t, res)
		if err != nil {
			if ctx.Err() != nil {
				leave()
				return traffic.Ticket{}, ctx.Err()
			}
			if errors.Is(err, ErrDegraded) {
				q.onFallback("request_queue")
				return q.local.Admit(ctx, key, cfg)
			}
			return traffic.Ticket{}, err
		}
		switch asInt(res[0]) {
		case 1:
			q.g.hold(t.id, t.running)
			owner := &queueTicket{q: q, key: key, grant: t.id, running: t.running, waitq: t.waitq, channel: t.channel}
			if t.r != nil && t.waiter == "" && cfg.ConcurrentRequests > 0 {
				owner.r, owner.limit = t.r, cfg.ConcurrentRequests // a waited dispatch keeps no spare
			}
			return traffic.NewTicket(owner, q.local.Now(), time.Duration(cfg.MaxWaitMs)*time.Millisecond), nil
		case -1:
			return traffic.Ticket{}, q.local.Refuse(key, traffic.CodeQueueFull, int(asInt(res[3])), cfg)
		case -2:
			t.waiter = "" // lapsed: join again at the tail
			continue
		}
		if !t.onBoard {
			// First time in the shared queue: on the waiting board until
			// admitted, refused or gone (a lapsed rejoin is the same wait).
			t.onBoard = true
			tok := traffic.BeginWait(ctx, traffic.WaitQueue, key, time.Duration(cfg.QueueWaitMs)*time.Millisecond)
			defer tok.End()
		}
		t.waiter = t.id
		delay := time.Duration(asInt(res[1])) * time.Millisecond
		if delay <= 0 || delay > q.poll {
			delay = q.poll
		}
		if !t.dwellEnd.IsZero() {
			left := time.Until(t.dwellEnd)
			if left <= 0 {
				leave()
				return traffic.Ticket{}, q.local.Refuse(key, traffic.CodeQueueTimeout, int(asInt(res[3])), cfg)
			}
			delay = min(delay, left)
		}
		wake := q.waitChan(key)
		tm := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			tm.Stop()
			leave()
			return traffic.Ticket{}, ctx.Err()
		case <-wake:
		case <-tm.C:
		}
		tm.Stop()
	}
}

// queueTicket is the TicketOwner of a shared admission; grant is "" for
// one from the reserve of a key without a concurrency cap.
type queueTicket struct {
	q                       *Queues
	key, grant              string
	running, waitq, channel string
	// r takes the grant back as a spare when the key has room (nil: never).
	r     *reserve
	limit int
}

func (t *queueTicket) TicketKey() string { return t.key }

func (t *queueTicket) TicketDone() {
	if t.grant == "" {
		return
	}
	if t.q.c.keepSpare(t.r, t.grant, t.limit) {
		return
	}
	t.q.g.drop(t.grant)
	t.q.c.release(slotRelease, []string{t.running, t.waitq, t.channel}, t.grant)
}

func (t *queueTicket) TicketTimedOut() { t.q.local.CountTimeout(t.key) }

// Learn feeds the local learned limits (parsed and persisted there) and
// shares what they impose now with the fleet.
func (q *Queues) Learn(ctx context.Context, key string, h http.Header) error {
	if err := q.local.Learn(ctx, key, h); err != nil {
		return err
	}
	return q.share(ctx, key)
}

// LearnRateLimited is Learn for an upstream 429.
func (q *Queues) LearnRateLimited(ctx context.Context, key string, h http.Header) error {
	if err := q.local.LearnRateLimited(ctx, key, h); err != nil {
		return err
	}
	return q.share(ctx, key)
}

// share writes key's learned throttle to Redis, where every replica's
// admissions read it. It runs only when the headers taught something.
func (q *Queues) share(ctx context.Context, key string) error {
	minTime, until, budget, throttled, ok := q.local.LearnedThrottle(key)
	if !ok {
		return nil
	}
	var untilMs int64
	if throttled {
		untilMs = until.UnixMilli()
	}
	state, _, _, _, _, _ := q.keys(key)
	ctx = context.WithoutCancel(ctx) // the response is decided; its client may be gone
	_, err := q.c.run(ctx, queueLearn, []string{state}, q.local.Now().UnixMilli(), minTime.Milliseconds(), untilMs, budget, q.needChannel(key))
	if err != nil {
		q.onFallback("request_queue")
		return errors.Join(err, services.ErrUnavailable)
	}
	return nil
}

// Effective returns the live global settings with a connection's overrides.
func (q *Queues) Effective(o services.RateLimitOverrides) traffic.QueueConfig {
	return q.local.Effective(o)
}

// Reconfigure applies changed global settings to live local limiters (the
// shared ones read the settings at every admission).
func (q *Queues) Reconfigure() { q.local.Reconfigure() }

// Reset clears learned throttles and limiters locally and for the fleet.
func (q *Queues) Reset(ctx context.Context) (int, error) {
	n, err := q.local.Reset(ctx)
	if err != nil {
		return n, err
	}
	q.forgetReserves(func(string) bool { return true })
	return n, q.deleteShared(ctx, q.prefix+":rq:{*")
}

// ResetConnection is Reset for the keys of one connection.
func (q *Queues) ResetConnection(ctx context.Context, connectionID string) (int, error) {
	n, err := q.local.ResetConnection(ctx, connectionID)
	if err != nil {
		return n, err
	}
	q.forgetReserves(func(key string) bool { return strings.Contains(key, ":"+connectionID) })
	return n, q.deleteShared(ctx, q.prefix+":rq:{*:"+connectionID+"*")
}

func (q *Queues) deleteShared(ctx context.Context, pattern string) error {
	return q.c.call(ctx, func(ctx context.Context) error {
		iter := q.c.rdb.Scan(ctx, 0, pattern, 256).Iterator()
		var batch []string
		for iter.Next(ctx) {
			batch = append(batch, iter.Val())
		}
		if err := iter.Err(); err != nil || len(batch) == 0 {
			return err
		}
		return q.c.rdb.Del(ctx, batch...).Err()
	})
}

// Stats, Totals and Learned are this replica's view.
func (q *Queues) Stats() []traffic.QueueStats     { return q.local.Stats() }
func (q *Queues) Totals() traffic.QueueTotals     { return q.local.Totals() }
func (q *Queues) Learned() []traffic.LearnedLimit { return q.local.Learned() }
