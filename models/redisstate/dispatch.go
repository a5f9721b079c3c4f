package redisstate

import (
	"context"
	"errors"

	"switchyard/services"
	"switchyard/services/traffic"
)

// Dispatch admits the slot and the request-queue ticket of one dispatch
// through a connection that has both in one script (dispatchAdmit): the
// slot's first try and, when it grants, the queue's first try, so a dispatch
// both admit at once costs one round trip, not two. Anything else — the slot
// queued or refused, the queue making the request wait, Redis not answering
// — goes on exactly as Slots.AcquireWith and then Queues.Admit do, with
// their waits, fallbacks and counters; releases stay two, sent off the
// request path by the releaser.
type Dispatch struct {
	s *Slots
	q *Queues
}

var (
	_ traffic.DispatchPairer   = (*Slots)(nil)
	_ traffic.DispatchAdmitter = (*Dispatch)(nil)
)

// PairWith implements traffic.DispatchPairer: the shared queues on the same
// Redis client pair with s; any other RateStore does not (nil).
func (s *Slots) PairWith(rs traffic.RateStore) traffic.DispatchAdmitter {
	q, ok := rs.(*Queues)
	if !ok || q.c != s.c {
		return nil
	}
	return &Dispatch{s: s, q: q}
}

// AdmitDispatch implements traffic.DispatchAdmitter with the live
// connectionConcurrency settings.
func (d *Dispatch) AdmitDispatch(ctx context.Context, g traffic.DispatchGates, slotDone func()) traffic.DispatchAdmission {
	s, q := d.s, d.q
	cfg := s.cfg()
	var a traffic.DispatchAdmission
	if ctx.Err() != nil || g.Limit <= 0 || !cfg.Enabled {
		// No slot to take (or the client is gone): Acquire's own answer.
		a.Release, _, a.SlotErr = s.AcquireWith(ctx, g.ConnectionID, g.Limit, cfg)
		slotDone()
		if queueNext(a.SlotErr) {
			a.Ticket, a.QueueErr = q.Admit(ctx, g.QueueKey, g.Queue)
		}
		return a
	}
	if rel, ok := s.fromReserve(g.ConnectionID, g.Limit); ok {
		// A spare slot: no round trip for it, and the queue's own reserve
		// may spare the other.
		a.Release = rel
		slotDone()
		a.Ticket, a.QueueErr = q.Admit(ctx, g.QueueKey, g.Queue)
		return a
	}
	st, qt := s.newTry(g.ConnectionID, g.Limit, cfg), q.newTry(g.QueueKey, g.Queue)
	keys := append(append(make([]string, 0, len(st.keys)+len(qt.keys)), st.keys...), qt.keys...)
	res, err := s.c.run(ctx, dispatchAdmit, keys, append(s.args(st, ""), q.args(qt)...)...)
	if err != nil || asInt(res[0]) != 1 {
		// The slot did not come at once, so the script left the queue
		// alone: wait for the slot (or fall back), then admit as usual.
		q.endTry(qt, nil)
		a.Release, _, a.SlotErr = s.settle(ctx, st, res, err)
		slotDone()
		if queueNext(a.SlotErr) {
			a.Ticket, a.QueueErr = q.Admit(ctx, g.QueueKey, g.Queue)
		}
		return a
	}
	st.held, st.waiting = int(asInt(res[1])), int(asInt(res[2]))
	a.Release = s.granted(st)
	slotDone()
	a.Ticket, a.QueueErr = q.settle(ctx, qt, res[3:], nil)
	return a
}

// queueNext reports whether the queue is consulted after the slot's
// outcome err: on success and on the fail-open of an unavailable store.
func queueNext(err error) bool { return err == nil || errors.Is(err, services.ErrUnavailable) }
