package gateway

import (
	"context"
	"errors"
	"net/http"
	"time"

	"switchyard/services"
	"switchyard/services/affinity"
	"switchyard/services/leases"
	"switchyard/services/resilience"
	"switchyard/services/traffic"
)

// Traffic holds the admission and placement mechanisms of the request path:
// connection slots (§8), the request queue (§10), session-affinity pins (§5)
// and exclusive leases (§6). Slots and Queues are the shared-state
// interfaces (in-process *traffic.Slots and *traffic.Queues by default). A
// nil field switches its mechanism off; Doc is the resilience settings
// document (nil: the defaults).
type Traffic struct {
	Slots  traffic.SlotStore
	Queues traffic.RateStore
	Pins   *affinity.Pins
	Leases *leases.Leases
	Doc    func() *resilience.Document
	// Waiting shows the requests waiting now (cooldown waits, slot and
	// queue waits); nil records nothing.
	Waiting *traffic.Waiting
}

// beginCooldownWait puts a cooldown-aware wait of d on the waiting board
// (and in the request's trace).
func (g *Gateway) beginCooldownWait(ctx context.Context, req *Request, d time.Duration) traffic.WaitToken {
	var tok traffic.WaitToken
	if g.traffic.Waiting != nil {
		tok = g.traffic.Waiting.Begin(traffic.WaitCooldown, req.Model, req.ID, d)
	}
	return g.traceWait(ctx, tok, traffic.WaitCooldown, req.Model, d)
}

func queueConfig(doc *resilience.Document) traffic.QueueConfig {
	q := doc.RequestQueue
	return traffic.QueueConfig{RequestsPerMinute: q.RequestsPerMinute, MinTimeBetweenRequestsMs: q.MinTimeBetweenRequestsMs,
		ConcurrentRequests: q.ConcurrentRequests, MaxWaitMs: q.MaxWaitMs, MaxQueueDepth: q.MaxQueueDepth, QueueWaitMs: q.QueueWaitMs}
}

// admission holds what a dispatch acquired; done releases it exactly once.
type admission struct {
	release  func()
	ticket   *traffic.Ticket
	queueKey string
	maxWait  time.Duration
	// gated: a slot or queue gate was consulted and may have made the
	// dispatch wait (its waits are then in the request's log).
	gated bool
}

// minLoggedWait is the shortest admission wait the request log records;
// shorter ones are the gate's own cost, not waiting.
const minLoggedWait = time.Millisecond

// logWait records an admission wait of kind from start to now when it
// lasted at least minLoggedWait; rec may be nil.
func (g *Gateway) logWait(rec *LogRecord, kind, reason, connID string, start time.Time) {
	if end := g.clock.Now(); rec != nil && end.Sub(start) >= minLoggedWait {
		rec.waited(kind, reason, connID, start, end)
	}
}

func (a *admission) done() {
	if a.ticket != nil {
		a.ticket.Done()
		a.ticket = nil
	}
	if a.release != nil {
		a.release()
		a.release = nil
	}
}

// admit takes a max_concurrent slot and, for protected connections, a
// request-queue ticket, and logs in rec (nil: nowhere) the time it waited
// for them. On an error the admission holds nothing. A local limit comes
// back as a typed error that penalises nothing; a client leaving while
// queued never reaches upstream.
// A shared slot or queue store that cannot answer (services.ErrUnavailable)
// fails open: the request goes without that gate and the error is counted,
// since refusing it would turn an outage of Switchyard's own state into
// failed requests (scale-out §3.6).
func (g *Gateway) admit(ctx context.Context, t target, c *services.Connection, req *Request, rec *LogRecord) (*admission, error) {
	a := &admission{}
	tr := g.traffic
	doc := tr.Doc()
	slot := tr.Slots != nil && doc.ConnectionConcurrency.Enabled && c.MaxConcurrent != nil && *c.MaxConcurrent > 0
	queue := tr.Queues != nil && doc.QueueProtected(c)
	if tr.Waiting != nil && (slot || queue) {
		// Only dispatches that may wait carry the board (one context value).
		ctx = traffic.WithWaiting(ctx, tr.Waiting, req.ID)
	}
	a.gated = slot || queue
	if slot && queue && g.pair != nil {
		return a, g.admitPaired(ctx, a, t, c, doc, rec)
	}
	if slot {
		start := g.clock.Now()
		release, _, err := tr.Slots.Acquire(ctx, c.ID, *c.MaxConcurrent)
		g.logWait(rec, services.WaitKindSlot, "max_concurrent", c.ID, start)
		if err := g.slotTaken(a, release, err); err != nil {
			return a, err
		}
	}
	if queue {
		cfg := queueConfig(doc).WithOverrides(c.RateLimitOverrides)
		key := traffic.QueueKey(t.provider.ID, c.ID, "")
		start := g.clock.Now()
		ticket, err := tr.Queues.Admit(ctx, key, cfg)
		g.logWait(rec, services.WaitKindQueue, "request_queue", c.ID, start)
		return a, g.queueTaken(a, key, ticket, err)
	}
	return a, nil
}

// admitPaired is admit's slot and queue through the stores' paired
// admitter (one round trip to the shared state when both admit at once),
// with the same outcomes and the same two waits in the log.
func (g *Gateway) admitPaired(ctx context.Context, a *admission, t target, c *services.Connection, doc *resilience.Document, rec *LogRecord) error {
	key := traffic.QueueKey(t.provider.ID, c.ID, "")
	gates := traffic.DispatchGates{ConnectionID: c.ID, Limit: *c.MaxConcurrent, QueueKey: key,
		Queue: queueConfig(doc).WithOverrides(c.RateLimitOverrides)}
	start := g.clock.Now()
	got := g.pair.AdmitDispatch(ctx, gates, func() {
		g.logWait(rec, services.WaitKindSlot, "max_concurrent", c.ID, start)
		start = g.clock.Now()
	})
	if err := g.slotTaken(a, got.Release, got.SlotErr); err != nil {
		return err
	}
	g.logWait(rec, services.WaitKindQueue, "request_queue", c.ID, start)
	return g.queueTaken(a, key, got.Ticket, got.QueueErr)
}

// slotTaken records the outcome of a slot admission in a: the release of a
// slot held; an unavailable shared store is counted and fails open; any
// other error ends the dispatch.
func (g *Gateway) slotTaken(a *admission, release func(), err error) error {
	switch {
	case err == nil:
		a.release = release
	case errors.Is(err, services.ErrUnavailable):
		g.storeError(StoreSlots, err)
	default:
		return err
	}
	return nil
}

// queueTaken records the outcome of a queue admission of key in a, as
// slotTaken does; on a refusal a gives back what it holds.
func (g *Gateway) queueTaken(a *admission, key string, ticket traffic.Ticket, err error) error {
	switch {
	case err == nil:
		a.ticket, a.queueKey, a.maxWait = &ticket, key, ticket.MaxWait()
	case errors.Is(err, services.ErrUnavailable):
		g.storeError(StoreRequestQueue, err)
		a.queueKey = key // still learn from the response
	default:
		a.done()
		return err
	}
	return nil
}

// learn feeds upstream rate-limit headers to the queue of a protected
// connection. The response is already decided, so a store error is counted.
func (g *Gateway) learn(ctx context.Context, a *admission, status int, h http.Header) {
	if a == nil || a.queueKey == "" || g.traffic.Queues == nil || h == nil {
		return
	}
	var err error
	if status == http.StatusTooManyRequests {
		err = g.traffic.Queues.LearnRateLimited(ctx, a.queueKey, h)
	} else {
		err = g.traffic.Queues.Learn(ctx, a.queueKey, h)
	}
	g.storeError(StoreRequestQueue, err)
}

// localLimit converts an admission error into a dispatch result.
func localLimit(ctx context.Context, err error) result {
	var le *traffic.LimitError
	if errors.As(err, &le) {
		return result{localErr: le, message: le.Message}
	}
	if ctx.Err() != nil {
		return resGone()
	}
	return resTransport(resilience.TransportDial, err.Error())
}

// pinID is the affinity pin of this request on a provider, "" when off.
func (g *Gateway) pinID(req *Request, provider string) string {
	if req.SessionKey == "" || req.LeaseConnID != "" || g.traffic.Pins == nil {
		return ""
	}
	if g.traffic.Doc().SessionAffinity.TTLMs <= 0 {
		return ""
	}
	return affinity.PinID(req.Key.ID, provider, req.SessionKey)
}

// heldByOthers reports a connection leased by another key (unmanaged
// traffic never dispatches to it).
func (g *Gateway) heldByOthers(connID string, req *Request) bool {
	if g.traffic.Leases == nil || req.LeaseConnID != "" {
		return false
	}
	return g.traffic.Leases.HeldByOthers(connID, req.Key.ID)
}
