package redisstate

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"switchyard/services"
	"switchyard/services/traffic"
)

// Slots are the max_concurrent gates of every connection, shared by the
// fleet (20-resilience §8): a slot is a grant in a Redis sorted set scored by
// its expiry, renewed while the request runs; waiters queue in one FIFO per
// connection across all replicas and are woken by a release published on
// Redis. While Redis is unavailable every call answers from local, the
// per-replica gates of today, and counts the fallback. A connection with
// room to spare keeps the slots of ended requests as spares for the next
// ones of this replica (reserve.go), so most admissions and releases make
// no round trip; a waiter anywhere makes every replica give them back.
type Slots struct {
	c      *Client
	prefix string
	local  *traffic.Slots
	cfg    func() traffic.SlotConfig
	g      *grants
	// poll is how often a waiter asks again without a release notice.
	poll time.Duration
	// onFallback counts a decision taken locally because Redis was not
	// available (metric switchyard_shared_state_fallback_total).
	onFallback func(mechanism string)

	mu   sync.Mutex
	wake map[string]chan struct{} // connection → closed on a release notice
	// held and waiting count this replica's shared grants and waiters per
	// connection (Stats); the fleet-wide numbers are in Redis.
	held    map[string]int
	waiting map[string]int
	limits  map[string]int
	// res are this replica's spare grants by connection (reserve.go).
	res reserves
}

var _ traffic.SlotStore = (*Slots)(nil)

// SlotsOptions configure Slots.
type SlotsOptions struct {
	// Prefix of every key (default "sy"); tests isolate themselves with it.
	Prefix string
	// Replica names this process in grant ids.
	Replica string
	// GrantTTL is how long a grant lives without renewal (default 30 s): a
	// crashed replica's slots return within it.
	GrantTTL time.Duration
	// Poll bounds a waiter's wait between two tries (default 100 ms).
	Poll time.Duration
	// OnFallback is called with "slots" for each local decision.
	OnFallback func(mechanism string)
	// Config returns the live connectionConcurrency settings (nil: defaults).
	Config func() traffic.SlotConfig
}

// NewSlots returns the shared gates; local serves while Redis is down.
func NewSlots(c *Client, local *traffic.Slots, opts SlotsOptions) *Slots {
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
	if opts.Config == nil {
		opts.Config = traffic.DefaultSlotConfig
	}
	return &Slots{c: c, prefix: opts.Prefix, local: local, cfg: opts.Config, g: newGrants(c, opts.Replica, opts.GrantTTL),
		poll: opts.Poll, onFallback: opts.OnFallback, wake: make(map[string]chan struct{}),
		held: map[string]int{}, waiting: map[string]int{}, limits: map[string]int{}}
}

// Acquire implements traffic.SlotStore with the live settings.
func (s *Slots) Acquire(ctx context.Context, connectionID string, limit int) (func(), bool, error) {
	return s.AcquireWith(ctx, connectionID, limit, s.cfg())
}

func (s *Slots) count(m map[string]int, conn string, d int) {
	s.mu.Lock()
	m[conn] += d
	if m[conn] <= 0 {
		delete(m, conn)
	}
	s.mu.Unlock()
}

// Stats lists every connection gate this replica used: the local gates'
// counters (fallback decisions and fail-open grants included) plus this
// replica's shared grants and waiters.
func (s *Slots) Stats() []traffic.SlotStats {
	out := s.local.Stats()
	s.mu.Lock()
	defer s.mu.Unlock()
	seen := map[string]bool{}
	for i := range out {
		c := out[i].ConnectionID
		seen[c] = true
		out[i].InFlight += s.held[c]
		out[i].Waiting += s.waiting[c]
		if out[i].Limit == 0 {
			out[i].Limit = s.limits[c]
		}
	}
	for c, n := range s.held {
		if !seen[c] {
			seen[c] = true
			out = append(out, traffic.SlotStats{ConnectionID: c, Limit: s.limits[c], InFlight: n, Waiting: s.waiting[c]})
		}
	}
	for c, n := range s.waiting {
		if !seen[c] {
			out = append(out, traffic.SlotStats{ConnectionID: c, Limit: s.limits[c], Waiting: n})
		}
	}
	slices.SortFunc(out, func(a, b traffic.SlotStats) int { return strings.Compare(a.ConnectionID, b.ConnectionID) })
	return out
}

// Totals sums Stats.
func (s *Slots) Totals() traffic.SlotTotals {
	var t traffic.SlotTotals
	for _, st := range s.Stats() {
		t.InFlight += st.InFlight
		t.Waiting += st.Waiting
		t.FailOpenGrants.QueueFull += st.FailOpenGrants.QueueFull
		t.FailOpenGrants.Timeout += st.FailOpenGrants.Timeout
	}
	return t
}

// Reset restarts the in-flight count of every gate this replica knows, in
// Redis for the whole fleet and locally; requests already running continue.
func (s *Slots) Reset(ctx context.Context) (int, error) {
	n, err := s.local.Reset(ctx)
	s.mu.Lock()
	conns := make([]string, 0, len(s.limits))
	for c := range s.limits {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	for _, c := range conns {
		s.forgetSpares(c)
		if err := s.resetShared(ctx, c); err != nil {
			return n, err
		}
	}
	return max(n, len(conns)), err
}

// ResetConnection is Reset for one connection.
func (s *Slots) ResetConnection(ctx context.Context, connectionID string) (int, error) {
	n, err := s.local.ResetConnection(ctx, connectionID)
	if err != nil {
		return n, err
	}
	s.forgetSpares(connectionID)
	if err := s.resetShared(ctx, connectionID); err != nil {
		return n, err
	}
	return 1, nil
}

func (s *Slots) resetShared(ctx context.Context, conn string) error {
	grants, _, _, _, _ := s.keys(conn)
	err := s.c.call(ctx, func(ctx context.Context) error { return s.c.rdb.Del(ctx, grants).Err() })
	if err != nil {
		return fmt.Errorf("redisstate: reset slots of %s: %w", conn, services.ErrUnavailable)
	}
	return nil
}

// Run renews live grants, listens for releases and need notices and gives
// idle spares back until ctx ends.
func (s *Slots) Run(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Go(func() { s.listen(ctx) })
	wg.Go(func() { every(ctx, reserveSweep, s.sweep) })
	s.g.run(ctx)
	wg.Wait()
}

func (s *Slots) keys(conn string) (grants, waitq, waitexp, seq, channel string) {
	base := s.prefix + ":slot:{" + conn + "}"
	return base, base + ":wq", base + ":we", base + ":seq", s.prefix + ":slotfree:" + conn
}

// listen turns release notices into wake-ups of this replica's waiters,
// and need notices into the return of its spares.
func (s *Slots) listen(ctx context.Context) {
	listenFreeNeed(ctx, s.c.rdb, s.prefix+":slotfree:", s.prefix+":slotneed:", s.notify,
		func(conn string) { s.res.needed(conn, s.c.opts.ReserveNow(), s.giveBack) })
}

// giveBack is the giveBackFunc of slot reserves (they hold no tokens).
func (s *Slots) giveBack(conn string, spares []string, _ int) { s.releaseSpares(conn, spares) }

// releaseSpares gives spare slots of conn back to the fleet.
func (s *Slots) releaseSpares(conn string, ids []string) {
	if len(ids) == 0 {
		return
	}
	grants, waitq, _, _, channel := s.keys(conn)
	for _, id := range ids {
		s.g.drop(id)
		s.c.release(slotRelease, []string{grants, waitq, channel}, id)
	}
}

func (s *Slots) sweep() { s.res.sweepAll(s.c.opts.ReserveNow(), s.giveBack) }

// forgetSpares drops the spares of conn that a reset deleted in Redis.
func (s *Slots) forgetSpares(conn string) {
	if r := s.res.peek(conn); r != nil {
		r.mu.Lock()
		for _, id := range r.forget() {
			s.g.drop(id)
		}
		r.mu.Unlock()
	}
}

// fromReserve takes a spare slot of conn, if this replica holds one and
// Redis answers (no round trip).
func (s *Slots) fromReserve(conn string, limit int) (func(), bool) {
	if limit < reserveMinLimit || s.c.Degraded() {
		return nil, false
	}
	r := s.res.peek(conn)
	if r == nil {
		return nil, false
	}
	r.mu.Lock()
	id, ok := r.takeSpare(limit, s.c.opts.ReserveNow())
	r.mu.Unlock()
	if !ok {
		return nil, false
	}
	s.count(s.held, conn, 1)
	return s.releaseFunc(conn, id, limit, r), true
}

func (s *Slots) notify(conn string) {
	s.mu.Lock()
	if w, ok := s.wake[conn]; ok {
		close(w)
		delete(s.wake, conn)
	}
	s.mu.Unlock()
}

func (s *Slots) waitChan(conn string) chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	w, ok := s.wake[conn]
	if !ok {
		w = make(chan struct{})
		s.wake[conn] = w
	}
	return w
}

// AcquireWith takes a slot of connectionID before dispatch, with the
// semantics of traffic.Slots.AcquireWith, counted fleet-wide.
func (s *Slots) AcquireWith(ctx context.Context, connectionID string, limit int, cfg traffic.SlotConfig) (func(), bool, error) {
	if err := ctx.Err(); err != nil {
		return func() {}, false, err
	}
	if limit <= 0 || !cfg.Enabled {
		return func() {}, false, nil
	}
	if rel, ok := s.fromReserve(connectionID, limit); ok {
		return rel, false, nil
	}
	t := s.newTry(connectionID, limit, cfg)
	res, err := s.c.run(ctx, slotAcquire, t.keys, s.args(t, "")...)
	return s.settle(ctx, t, res, err)
}

// slotTry is one admission to a connection's gate: its keys and the
// arguments of slotAcquire.
type slotTry struct {
	conn, id                             string
	limit, depth                         int
	cfg                                  traffic.SlotConfig
	wait, waiterTTL                      time.Duration
	grants, waitq, waitexp, seq, channel string
	keys                                 []string
	// held and waiting are the fleet's counts the granting try saw.
	held, waiting int
}

// newTry prepares an admission of a connection with a gate (limit > 0,
// enabled) and notes its limit for Stats.
func (s *Slots) newTry(conn string, limit int, cfg traffic.SlotConfig) *slotTry {
	t := &slotTry{conn: conn, id: s.g.newID(), limit: limit, depth: cfg.QueueDepth, cfg: cfg,
		wait: time.Duration(cfg.SlotWaitMs) * time.Millisecond}
	t.waiterTTL = max(t.wait, s.poll*10)
	if t.wait <= 0 {
		t.depth = 0 // never queue: a saturated connection is at once a timeout
	}
	t.grants, t.waitq, t.waitexp, t.seq, t.channel = s.keys(conn)
	t.keys = []string{t.grants, t.waitq, t.waitexp, t.seq}
	s.mu.Lock()
	s.limits[conn] = limit
	s.mu.Unlock()
	return t
}

// args are slotAcquire's ARGV; waiter is "" on the first try.
func (s *Slots) args(t *slotTry, waiter string) []any {
	return []any{t.id, t.limit, s.g.ttl.Milliseconds(), waiter, t.depth, t.waiterTTL.Milliseconds(), s.prefix + ":slotneed:" + t.conn}
}

// settle takes the answer (res, err) of the first try of t to its end:
// granted, refused, answered locally, or — queued — tried again on every
// release notice, at least every poll, until the wait elapses or the client
// leaves.
func (s *Slots) settle(ctx context.Context, t *slotTry, res []any, err error) (func(), bool, error) {
	if err != nil {
		return s.fallback(ctx, t.conn, t.limit, t.cfg, err)
	}
	switch asInt(res[0]) {
	case 1:
		t.held, t.waiting = int(asInt(res[1])), int(asInt(res[2]))
		return s.granted(t), false, nil
	case -1:
		cause := "queue_full"
		if t.wait <= 0 {
			cause = "timeout"
		}
		return s.refuse(t.conn, t.limit, cause, int(asInt(res[2])), t.cfg)
	}
	s.count(s.waiting, t.conn, 1)
	defer s.count(s.waiting, t.conn, -1)
	tok := traffic.BeginWait(ctx, traffic.WaitSlot, t.conn, t.wait)
	defer tok.End()
	deadline := time.NewTimer(t.wait)
	defer deadline.Stop()
	leave := func() {
		lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.c.opts.CallTimeout)
		_, _ = s.c.run(lctx, leaveWait, []string{t.waitq, t.waitexp, t.channel}, t.id)
		cancel()
	}
	for {
		wake := s.waitChan(t.conn)
		poll := time.NewTimer(s.poll)
		select {
		case <-ctx.Done():
			poll.Stop()
			leave()
			return func() {}, false, ctx.Err()
		case <-deadline.C:
			poll.Stop()
			leave()
			return s.refuse(t.conn, t.limit, "timeout", 0, t.cfg)
		case <-wake:
		case <-poll.C:
		}
		poll.Stop()
		res, err := s.c.run(ctx, slotAcquire, t.keys, s.args(t, t.id)...)
		if err != nil {
			if ctx.Err() != nil {
				return func() {}, false, ctx.Err()
			}
			return s.fallback(ctx, t.conn, t.limit, t.cfg, err)
		}
		switch asInt(res[0]) {
		case 1:
			return s.granted(t), false, nil
		case -2: // lapsed (a long pause): join again at the tail
			res, err = s.c.run(ctx, slotAcquire, t.keys, s.args(t, "")...)
			if err != nil {
				return s.fallback(ctx, t.conn, t.limit, t.cfg, err)
			}
			if asInt(res[0]) == 1 {
				return s.granted(t), false, nil
			}
			if asInt(res[0]) == -1 {
				return s.refuse(t.conn, t.limit, "queue_full", int(asInt(res[2])), t.cfg)
			}
		}
	}
}

// granted records a held slot and returns its idempotent release. A
// granting first try (t.held set) tells the connection's reserve whether
// the fleet leaves room for spares; a waited grant leaves none (calm is
// false since somebody waited).
func (s *Slots) granted(t *slotTry) func() {
	conn, id := t.conn, t.id
	s.g.hold(id, t.grants)
	s.count(s.held, conn, 1)
	var r *reserve
	if t.limit >= reserveMinLimit {
		r = s.res.get(conn)
		r.mu.Lock()
		giveBack := r.observe(t.limit, t.held, t.waiting)
		if t.held == 0 {
			r.calm = false
		}
		r.mu.Unlock()
		s.releaseSpares(conn, giveBack)
	}
	return s.releaseFunc(conn, id, t.limit, r)
}

// releaseFunc is the idempotent release of slot id: kept as a spare in r
// while the connection has room, else released to the fleet.
func (s *Slots) releaseFunc(conn, id string, limit int, r *reserve) func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			s.count(s.held, conn, -1)
			if s.c.keepSpare(r, id, limit) {
				return
			}
			s.releaseSpares(conn, []string{id})
		})
	}
}

// fallback answers from the local gates while Redis is unavailable.
func (s *Slots) fallback(ctx context.Context, conn string, limit int, cfg traffic.SlotConfig, cause error) (func(), bool, error) {
	if !errors.Is(cause, ErrDegraded) {
		return func() {}, false, cause
	}
	s.onFallback("slots")
	return s.local.AcquireWith(ctx, conn, limit, cfg)
}

// refuse ends a wait without a slot, as the local gate does: fail-open
// (counted by the local gate's counters) or CONNECTION_SLOTS_BUSY.
func (s *Slots) refuse(conn string, limit int, cause string, waiting int, cfg traffic.SlotConfig) (func(), bool, error) {
	if cfg.FailOpen {
		s.local.CountFailOpen(conn, limit, cause)
		return func() {}, true, nil
	}
	var why string
	if cause == "queue_full" {
		why = fmt.Sprintf("%d requests already wait (connectionConcurrency.queueDepth = %d)", waiting, cfg.QueueDepth)
	} else {
		why = fmt.Sprintf("no slot freed within connectionConcurrency.slotWaitMs = %d", cfg.SlotWaitMs)
	}
	return func() {}, false, &traffic.LimitError{
		Code:       traffic.CodeSlotsBusy,
		Status:     429,
		RetryAfter: time.Second,
		Key:        conn,
		Message: fmt.Sprintf("Every concurrency slot of connection %s is busy across the fleet (maxConcurrent = %d) and %s, "+
			"with connectionConcurrency.failOpen = false; this is not an upstream rejection", conn, limit, why),
	}
}

// InFlight returns the fleet-wide number of live grants of a connection.
func (s *Slots) InFlight(ctx context.Context, conn string) (int, error) {
	grants, _, _, _, _ := s.keys(conn)
	res, err := s.c.run(ctx, liveCount, []string{grants})
	if err != nil {
		return 0, err
	}
	return int(asInt(res[0])), nil
}
