package traffic

import (
	"container/list"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// SlotConfig is the connectionConcurrency settings section (40-admin-api §2.3,
// 20-resilience §8). Its fields have the names, types and order of
// resilience.ConnectionConcurrencySettings, so one converts to the other.
type SlotConfig struct {
	// Enabled switches every slot gate; false dispatches without one.
	// Default true.
	Enabled bool
	// QueueDepth is how many requests may wait for a slot of one connection;
	// 0 never queues. Default 20; range 0–100.
	QueueDepth int
	// SlotWaitMs bounds the wait for a slot, in milliseconds; 0 does not wait
	// at all (a saturated connection is at once a timeout). Default 30000;
	// range 0–300000.
	SlotWaitMs int64
	// FailOpen sends a request without a slot when the queue is full or the
	// wait elapsed, and counts it; false refuses it with
	// CONNECTION_SLOTS_BUSY. Default true.
	FailOpen bool
}

// DefaultSlotConfig returns the built-in connectionConcurrency defaults.
func DefaultSlotConfig() SlotConfig {
	return SlotConfig{Enabled: true, QueueDepth: 20, SlotWaitMs: 30_000, FailOpen: true}
}

// FailOpenGrants counts dispatches sent without a slot, by cause.
type FailOpenGrants struct {
	// QueueFull counts requests that found queueDepth requests waiting.
	QueueFull int64 `json:"queueFull"`
	// Timeout counts requests that waited slotWaitMs without a slot.
	Timeout int64 `json:"timeout"`
}

// SlotStats is one connection's slot gate, as GET /api/concurrency shows it
// (the handler adds the provider).
type SlotStats struct {
	ConnectionID string `json:"connectionId"`
	// Limit is the connection's maxConcurrent as last passed to Acquire.
	Limit    int `json:"maxConcurrent"`
	InFlight int `json:"inFlight"`
	Waiting  int `json:"waiting"`
	// FailOpenGrants never resets, not even with Reset.
	FailOpenGrants FailOpenGrants `json:"failOpenGrants"`
}

// SlotTotals sums SlotStats over every connection.
type SlotTotals struct {
	InFlight       int            `json:"inFlight"`
	Waiting        int            `json:"waiting"`
	FailOpenGrants FailOpenGrants `json:"failOpenGrants"`
}

// Slots caps in-flight requests per connection (max_concurrent,
// 20-resilience §8): one gate per connection id for all traffic (BD 12), a
// bounded FIFO of waiters, fail-open by default. Memory only; safe for
// concurrent use. It is the in-process SlotStore, and the combo entry queue.
type Slots struct {
	cfg func() SlotConfig

	mu    sync.Mutex
	gates map[string]*slotGate
}

// slotGate is one connection's gate. Guarded by Slots.mu.
type slotGate struct {
	id       string
	limit    int
	inFlight int
	// gen changes with Reset; releases of grants from an older generation
	// are ignored, since their slots were already forgotten.
	gen     uint64
	waiters list.List // of *slotWaiter, arrival order
	grants  FailOpenGrants
}

type slotWaiter struct {
	ready   chan struct{} // closed when granted
	granted bool          // guarded by Slots.mu
	gen     uint64
	elem    *list.Element
}

// slotGrant is one held slot; release gives it back at most once.
type slotGrant struct {
	s    *Slots
	g    *slotGate
	gen  uint64
	done atomic.Bool
}

func (r *slotGrant) release() {
	if !r.done.CompareAndSwap(false, true) {
		return
	}
	r.s.mu.Lock()
	r.g.releaseLocked(r.gen)
	r.s.mu.Unlock()
}

// noRelease is the Release of a dispatch that holds no slot.
func noRelease() {}

// Fail-open causes.
const (
	causeQueueFull = "queue_full"
	causeTimeout   = "timeout"
)

// NewSlots returns the slot gates. cfg returns the live connectionConcurrency
// settings and is read at every Acquire; nil means DefaultSlotConfig.
func NewSlots(cfg func() SlotConfig) *Slots {
	if cfg == nil {
		cfg = DefaultSlotConfig
	}
	return &Slots{cfg: cfg, gates: make(map[string]*slotGate)}
}

// Acquire takes a slot of connectionID before dispatch. limit is the
// connection's maxConcurrent; 0 (or less) means no gate, as does
// connectionConcurrency.enabled=false.
//
// A free slot is taken at once; otherwise the request joins the
// connection's FIFO and slots go to waiters in arrival order. A full queue or
// slotWaitMs elapsed either dispatches without a slot (failOpen = true,
// counted in FailOpenGrants and reported as failOpen) or returns a
// *LimitError CONNECTION_SLOTS_BUSY (429, Retry-After 1 s). When ctx ends
// first, Acquire returns ctx.Err() and the request never holds a slot.
//
// release is never nil: call it exactly when the request is finalised (stream
// end, response end, abort). It is idempotent, so a caller may defer it and
// also call it early; it is a no-op when no slot was taken.
func (s *Slots) Acquire(ctx context.Context, connectionID string, limit int) (release func(), failOpen bool, err error) {
	return s.AcquireWith(ctx, connectionID, limit, s.cfg())
}

// Busy reports whether an Acquire of key would have to wait now: limit
// slots are taken or others already wait. It takes nothing.
func (s *Slots) Busy(key string, limit int) bool {
	if limit <= 0 {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	g := s.gates[key]
	return g != nil && (g.inFlight >= limit || g.waiters.Len() > 0)
}

// AcquireWith is Acquire with the queue settings of this call instead of
// the live ones: the combo entry queue (30-routing §6.5) reuses the gate
// with each combo's queue.depth and queue.timeoutMs, always fail-open.
func (s *Slots) AcquireWith(ctx context.Context, connectionID string, limit int, cfg SlotConfig) (release func(), failOpen bool, err error) {
	if err := ctx.Err(); err != nil {
		return noRelease, false, err
	}
	if limit <= 0 {
		return noRelease, false, nil
	}
	if !cfg.Enabled {
		return noRelease, false, nil
	}

	s.mu.Lock()
	g := s.gateLocked(connectionID)
	g.setLimitLocked(limit)
	if g.inFlight < g.limit && g.waiters.Len() == 0 {
		g.inFlight++
		r := &slotGrant{s: s, g: g, gen: g.gen}
		s.mu.Unlock()
		return r.release, false, nil
	}
	wait := time.Duration(cfg.SlotWaitMs) * time.Millisecond
	switch {
	case g.waiters.Len() >= cfg.QueueDepth:
		return s.refuseLocked(g, causeQueueFull, cfg)
	case wait <= 0:
		return s.refuseLocked(g, causeTimeout, cfg)
	}
	w := &slotWaiter{ready: make(chan struct{})}
	w.elem = g.waiters.PushBack(w)
	s.mu.Unlock()
	tok := BeginWait(ctx, WaitSlot, connectionID, wait)
	defer tok.End()

	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case <-w.ready:
		return s.granted(g, w)
	case <-timer.C:
		s.mu.Lock()
		if w.granted { // granted while the timer fired: keep the slot
			s.mu.Unlock()
			return s.granted(g, w)
		}
		g.waiters.Remove(w.elem)
		return s.refuseLocked(g, causeTimeout, cfg)
	case <-ctx.Done():
		s.mu.Lock()
		if w.granted { // the client left: the slot goes to the next waiter
			g.releaseLocked(w.gen)
		} else {
			g.waiters.Remove(w.elem)
		}
		s.mu.Unlock()
		return noRelease, false, ctx.Err()
	}
}

func (s *Slots) granted(g *slotGate, w *slotWaiter) (func(), bool, error) {
	r := &slotGrant{s: s, g: g, gen: w.gen}
	return r.release, false, nil
}

// refuseLocked ends a wait without a slot: fail-open (counted) or
// CONNECTION_SLOTS_BUSY. It unlocks s.mu.
func (s *Slots) refuseLocked(g *slotGate, cause string, cfg SlotConfig) (func(), bool, error) {
	if cfg.FailOpen {
		if cause == causeQueueFull {
			g.grants.QueueFull++
		} else {
			g.grants.Timeout++
		}
		s.mu.Unlock()
		return noRelease, true, nil
	}
	limit, waiting := g.limit, g.waiters.Len()
	s.mu.Unlock()
	var why string
	if cause == causeQueueFull {
		why = fmt.Sprintf("%d requests already wait (connectionConcurrency.queueDepth = %d)", waiting, cfg.QueueDepth)
	} else {
		why = fmt.Sprintf("no slot freed within connectionConcurrency.slotWaitMs = %d", cfg.SlotWaitMs)
	}
	return noRelease, false, &LimitError{
		Code:       CodeSlotsBusy,
		Status:     429,
		RetryAfter: time.Second,
		Key:        g.id,
		Message: fmt.Sprintf("Every concurrency slot of connection %s is busy (maxConcurrent = %d) and %s, "+
			"with connectionConcurrency.failOpen = false; this is not an upstream rejection", g.id, limit, why),
	}
}

func (s *Slots) gateLocked(id string) *slotGate {
	g := s.gates[id]
	if g == nil {
		g = &slotGate{id: id}
		s.gates[id] = g
	}
	return g
}

// setLimitLocked follows a changed maxConcurrent; a raised cap serves
// waiters at once, a lowered one lets running requests finish.
func (g *slotGate) setLimitLocked(limit int) {
	if g.limit == limit {
		return
	}
	g.limit = limit
	g.grantLocked()
}

func (g *slotGate) releaseLocked(gen uint64) {
	if gen != g.gen {
		return
	}
	g.inFlight--
	g.grantLocked()
}

// grantLocked hands free slots to waiters in arrival order.
func (g *slotGate) grantLocked() {
	for g.inFlight < g.limit && g.waiters.Len() > 0 {
		w := g.waiters.Remove(g.waiters.Front()).(*slotWaiter)
		w.granted, w.gen = true, g.gen
		g.inFlight++
		close(w.ready)
	}
}

// Stats returns every connection gate seen so far, by connection id.
func (s *Slots) Stats() []SlotStats {
	s.mu.Lock()
	out := make([]SlotStats, 0, len(s.gates))
	for _, g := range s.gates {
		out = append(out, SlotStats{ConnectionID: g.id, Limit: g.limit, InFlight: g.inFlight,
			Waiting: g.waiters.Len(), FailOpenGrants: g.grants})
	}
	s.mu.Unlock()
	slices.SortFunc(out, func(a, b SlotStats) int { return strings.Compare(a.ConnectionID, b.ConnectionID) })
	return out
}

// Totals sums the gates: slots held, waiters, fail-open grants.
func (s *Slots) Totals() SlotTotals {
	var t SlotTotals
	s.mu.Lock()
	for _, g := range s.gates {
		t.InFlight += g.inFlight
		t.Waiting += g.waiters.Len()
		t.FailOpenGrants.QueueFull += g.grants.QueueFull
		t.FailOpenGrants.Timeout += g.grants.Timeout
	}
	s.mu.Unlock()
	return t
}

// Reset restarts every gate's in-flight count at 0 under a new generation
// (releases of older grants are ignored) and grants waiters in order up to
// the cap (POST /api/concurrency/reset, target slots). Requests already
// running continue, so the cap may be exceeded until they finish. Fail-open
// counters are kept. It returns the number of gates reset.
func (s *Slots) Reset(context.Context) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, g := range s.gates {
		g.resetLocked()
	}
	return len(s.gates), nil
}

// ResetConnection is Reset for one connection; it returns 0 when the
// connection has no gate yet.
func (s *Slots) ResetConnection(_ context.Context, connectionID string) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	g := s.gates[connectionID]
	if g == nil {
		return 0, nil
	}
	g.resetLocked()
	return 1, nil
}

func (g *slotGate) resetLocked() {
	g.gen++
	g.inFlight = 0
	g.grantLocked()
}
