package traffic

import (
	"context"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"

	"switchyard/services"
)

// SlotStore counts the max_concurrent slots of connections (20-resilience
// §8). *Slots is the in-process implementation and the default; a shared
// one (Redis, scale-out §3.4 row 8) holds the in-flight count of a
// connection for every replica, so the cap holds fleet-wide.
//
// Acquire is one call per dispatch of a connection with maxConcurrent, and
// it reads time from the implementation. Its errors: a *LimitError
// (CONNECTION_SLOTS_BUSY) is a decision; ctx.Err() when the client left
// first; an error wrapping services.ErrUnavailable when the shared state
// cannot answer. A shared implementation should first fall back itself to a
// local *Slots (the cap then holds per process, scale-out §3.6); when it
// still returns ErrUnavailable the gateway falls back to fail-open: the
// request is dispatched without a slot and the error counted, never failed
// and never held against the connection. Stats and Totals describe this
// process's view. The combo entry queue (30-routing
// §6.5) is per process by spec and always uses a *Slots directly.
type SlotStore interface {
	// Acquire takes a slot of connectionID (limit = its maxConcurrent; ≤ 0
	// = no gate). release is never nil and is idempotent.
	Acquire(ctx context.Context, connectionID string, limit int) (release func(), failOpen bool, err error)
	// Stats lists every connection gate, by connection id.
	Stats() []SlotStats
	// Totals sums Stats.
	Totals() SlotTotals
	// Reset restarts every gate's in-flight count (POST /api/concurrency/reset)
	// and returns how many gates it reset.
	Reset(ctx context.Context) (int, error)
	// ResetConnection is Reset for one connection.
	ResetConnection(ctx context.Context, connectionID string) (int, error)
}

// RateStore is the request queue of rate-limit protection with its learned
// limits (20-resilience §10). *Queues is the in-process implementation and
// the default; a shared one (Redis, scale-out §3.4 row 9) keeps the token
// bucket, spacing, running count, depth and learned limits of a key for every
// replica.
//
// Admit is one call per admission attempt (a waiting request asks again when
// its turn may have come) and reads time from the implementation. Its errors
// are those of Queues.Admit, plus an error wrapping services.ErrUnavailable
// when the shared state cannot answer, handled as for SlotStore: a shared
// implementation falls back to a local *Queues first; the gateway then sends
// the request unpaced and counts the error.
// Learn and LearnRateLimited run once per response of a protected
// connection, possibly with a request context that has already ended (a
// shared implementation detaches from its cancellation); their error is
// counted by the caller, the response being decided. Stats, Totals and
// Learned describe this process's view.
type RateStore interface {
	Admit(ctx context.Context, key string, cfg QueueConfig) (Ticket, error)
	Learn(ctx context.Context, key string, h http.Header) error
	LearnRateLimited(ctx context.Context, key string, h http.Header) error
	// Effective returns the live global settings with a connection's
	// overrides applied, ready for Admit.
	Effective(o services.RateLimitOverrides) QueueConfig
	// Reconfigure applies changed global settings to live limiters.
	Reconfigure()
	// Reset clears learned throttles (stored ones included) and rebuilds
	// every limiter; it returns how many keys it reset.
	Reset(ctx context.Context) (int, error)
	// ResetConnection is Reset for the keys of one connection.
	ResetConnection(ctx context.Context, connectionID string) (int, error)
	Stats() []QueueStats
	Totals() QueueTotals
	Learned() []LearnedLimit
}

var (
	_ SlotStore = (*Slots)(nil)
	_ RateStore = (*Queues)(nil)
)

// DispatchPairer is an optional interface of a shared SlotStore whose state
// lives beside a RateStore's (one Redis): PairWith returns the
// DispatchAdmitter that decides a dispatch's slot and queue ticket over both
// stores together, or nil when rs is not one it can pair with. The gateway
// asks once, when it is built.
type DispatchPairer interface {
	PairWith(rs RateStore) DispatchAdmitter
}

// DispatchAdmitter takes the max_concurrent slot and the request-queue
// ticket of one dispatch through a connection that has both: what
// SlotStore.Acquire followed by RateStore.Admit take, with their outcomes,
// in one step where the shared state allows it (one round trip instead of
// two when both admit at once).
//
// AdmitDispatch behaves as Acquire(ctx, g.ConnectionID, g.Limit) and then,
// unless Acquire failed with an error other than services.ErrUnavailable
// (the gateway's fail-open), Admit(ctx, g.QueueKey, g.Queue): the queue is
// consulted only once the slot is held (or failed open), a request waiting
// for a slot has not reached the queue, and every wait, refusal, fallback
// and counter is the one of the two calls. slotDone is called once, when the
// slot's part ends and before the queue's begins (the caller logs the two
// waits apart).
type DispatchAdmitter interface {
	AdmitDispatch(ctx context.Context, g DispatchGates, slotDone func()) DispatchAdmission
}

// DispatchGates names the two gates of one dispatch.
type DispatchGates struct {
	ConnectionID string
	// Limit is the connection's maxConcurrent.
	Limit    int
	QueueKey string
	Queue    QueueConfig
}

// DispatchAdmission is what AdmitDispatch took: Acquire's release (never
// nil) and error, and Admit's ticket and error (zero when the queue was not
// consulted). On a QueueErr the slot is still held: Release gives it back.
type DispatchAdmission struct {
	Release  func()
	SlotErr  error
	Ticket   Ticket
	QueueErr error
}

// TicketOwner is the RateStore side of a Ticket: the limiter of one key
// (the in-process one is the key's queue), told what Done and
// ExecutionTimeout say. Implementations outside this package build their
// tickets with NewTicket.
type TicketOwner interface {
	// TicketKey is the limiter key.
	TicketKey() string
	// TicketDone ends an admitted request's hold on the key's
	// concurrentRequests. It is called at most once per ticket.
	TicketDone()
	// TicketTimedOut counts an attempt aborted at its execution deadline.
	TicketTimedOut()
}

// Ticket is an admitted request of a RateStore. Its zero value is inert.
type Ticket struct{ t *ticket }

// ticket is one allocation per admission, as small as it was before the
// interface (one 64-byte size class).
type ticket struct {
	owner        TicketOwner
	dispatchedAt time.Time
	maxWait      time.Duration
	done         atomic.Bool
}

// NewTicket returns the ticket of a request owner admitted at dispatchedAt
// (on owner's clock), allowed maxWait to response headers.
func NewTicket(owner TicketOwner, dispatchedAt time.Time, maxWait time.Duration) Ticket {
	return Ticket{&ticket{owner: owner, dispatchedAt: dispatchedAt, maxWait: maxWait}}
}

// Done ends the request's hold on the key's concurrentRequests; call it when
// the request is finalised (response end, stream end, abort). Only the first
// call counts.
func (t Ticket) Done() {
	if t.t == nil || !t.t.done.CompareAndSwap(false, true) {
		return
	}
	t.t.owner.TicketDone()
}

// Key returns the limiter key the ticket was admitted on.
func (t Ticket) Key() string {
	if t.t == nil {
		return ""
	}
	return t.t.owner.TicketKey()
}

// MaxWait is requestQueue.maxWaitMs: how long the caller allows from dispatch
// to the upstream's response headers (first byte for streams), never over the
// rest of a stream (BD 14). Zero for the zero Ticket.
func (t Ticket) MaxWait() time.Duration {
	if t.t == nil {
		return 0
	}
	return t.t.maxWait
}

// ExecutionDeadline is the admission instant (on the queue's clock) plus
// MaxWait: past it without response headers the attempt is aborted with
// ExecutionTimeout's error. Zero for the zero Ticket.
func (t Ticket) ExecutionDeadline() time.Time {
	if t.t == nil {
		return time.Time{}
	}
	return t.t.dispatchedAt.Add(t.t.maxWait)
}

// ExecutionTimeout counts an attempt aborted at ExecutionDeadline and returns
// its error, RATE_LIMIT_EXECUTION_TIMEOUT (504). It does not call Done.
func (t Ticket) ExecutionTimeout() *LimitError {
	if t.t == nil {
		return nil
	}
	t.t.owner.TicketTimedOut()
	key := t.t.owner.TicketKey()
	return &LimitError{
		Code:       CodeExecutionTimeout,
		Status:     504,
		RetryAfter: time.Second,
		Key:        key,
		Message: fmt.Sprintf("No response headers from %s within requestQueue.maxWaitMs = %d of dispatch; "+
			"Switchyard's own request queue aborted the attempt; this is not an upstream rejection",
			displayKey(key), t.t.maxWait.Milliseconds()),
	}
}
