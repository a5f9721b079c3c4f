package traffic

import (
	"context"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"switchyard/services"
)

// Why a request waits inside the gateway. A client that waits for its
// answer sees only latency; these name the cause (the Overview's "Waiting
// now" tile, the Runtime page's Waiting requests panel, the health report's
// waiting section, switchyard_waiting_requests).
const (
	// WaitCooldown is the cooldown-aware wait (20-resilience §9): every
	// target is cooling, locked or behind an open breaker and the request
	// waits for the soonest to lapse. Target is the requested model or combo.
	WaitCooldown = "cooldown"
	// WaitSlot is a wait for a max_concurrent slot (§8). Target is the
	// connection id.
	WaitSlot = "slot"
	// WaitQueue is a wait in a protected connection's request queue
	// (§10). Target is the queue key.
	WaitQueue = "queue"
)

// WaitReasons lists the reasons in display order.
var WaitReasons = []string{WaitCooldown, WaitSlot, WaitQueue}

func reasonIndex(reason string) int {
	switch reason {
	case WaitCooldown:
		return 0
	case WaitSlot:
		return 1
	default:
		return 2
	}
}

// WaitEntry is one request waiting now.
type WaitEntry struct {
	RequestID string    `json:"requestId"`
	Reason    string    `json:"reason"`
	Target    string    `json:"target"`
	Since     time.Time `json:"since"`
	// ResumeAt is when the wait ends at the latest: the end of a cooldown
	// wait, the slot or queue timeout (zero when unbounded).
	ResumeAt time.Time `json:"resumeAt,omitzero"`
}

// WaitCounts counts the waiting requests by reason and by target.
type WaitCounts struct {
	Total    int            `json:"total"`
	ByReason map[string]int `json:"byReason"`
	// ByTarget is keyed "reason target", e.g. "slot c_7".
	ByTarget map[string]int `json:"byTarget"`
}

const waitShards = 16

// Waiting is the board of requests waiting now. Begin and End touch one
// shard, picked by the wait's sequence number, so concurrent waits never
// share a lock; only requests that really wait use it. Memory only, per
// replica; safe for concurrent use.
type Waiting struct {
	clock  services.Clock
	seq    atomic.Uint64
	counts [3]atomic.Int64
	shards [waitShards]waitShard
}

type waitShard struct {
	mu sync.Mutex
	m  map[uint64]WaitEntry
	_  [40]byte // keep shards on their own cache lines
}

// NewWaiting returns an empty board on clock (nil = services.RealClock).
func NewWaiting(clock services.Clock) *Waiting {
	if clock == nil {
		clock = services.RealClock{}
	}
	w := &Waiting{clock: clock}
	for i := range w.shards {
		w.shards[i].m = make(map[uint64]WaitEntry)
	}
	return w
}

// WaitToken ends one wait. The zero token ends nothing.
type WaitToken struct {
	w      *Waiting
	id     uint64
	reason int
	end    func() // a WaitHook's, or nil
}

// Begin records that requestID starts waiting for reason on target; the
// wait ends at the latest after resumeIn (0 = unbounded). Call End on the
// token when the wait is over, whatever its outcome.
func (w *Waiting) Begin(reason, target, requestID string, resumeIn time.Duration) WaitToken {
	if w == nil {
		return WaitToken{}
	}
	now := w.clock.Now()
	e := WaitEntry{RequestID: requestID, Reason: reason, Target: target, Since: now}
	if resumeIn > 0 {
		e.ResumeAt = now.Add(resumeIn)
	}
	id := w.seq.Add(1)
	ri := reasonIndex(reason)
	sh := &w.shards[id%waitShards]
	sh.mu.Lock()
	sh.m[id] = e
	sh.mu.Unlock()
	w.counts[ri].Add(1)
	return WaitToken{w: w, id: id, reason: ri}
}

// End removes the wait; a second End is a no-op.
func (t WaitToken) End() {
	if t.end != nil {
		t.end()
	}
	if t.w == nil {
		return
	}
	sh := &t.w.shards[t.id%waitShards]
	sh.mu.Lock()
	_, ok := sh.m[t.id]
	delete(sh.m, t.id)
	sh.mu.Unlock()
	if ok {
		t.w.counts[t.reason].Add(-1)
	}
}

// Count returns how many requests wait now (all reasons).
func (w *Waiting) Count() int {
	if w == nil {
		return 0
	}
	n := int64(0)
	for i := range w.counts {
		n += w.counts[i].Load()
	}
	return int(n)
}

// List returns the waiting requests, longest waiting first.
func (w *Waiting) List() []WaitEntry {
	out := []WaitEntry{}
	if w == nil {
		return out
	}
	for i := range w.shards {
		sh := &w.shards[i]
		sh.mu.Lock()
		for _, e := range sh.m {
			out = append(out, e)
		}
		sh.mu.Unlock()
	}
	slices.SortFunc(out, func(a, b WaitEntry) int {
		if c := a.Since.Compare(b.Since); c != 0 {
			return c
		}
		return strings.Compare(a.RequestID, b.RequestID)
	})
	return out
}

// Counts counts List by reason (every reason present, 0 included) and by
// target.
func (w *Waiting) Counts() WaitCounts {
	c := WaitCounts{ByReason: map[string]int{}, ByTarget: map[string]int{}}
	for _, r := range WaitReasons {
		c.ByReason[r] = 0
	}
	for _, e := range w.List() {
		c.Total++
		c.ByReason[e.Reason]++
		c.ByTarget[e.Reason+" "+e.Target]++
	}
	return c
}

// Now is the board's clock (ages and countdowns of List).
func (w *Waiting) Now() time.Time {
	if w == nil {
		return time.Now()
	}
	return w.clock.Now()
}

type waitScopeKey struct{}

type waitScope struct {
	w         *Waiting
	requestID string
}

// WithWaiting makes the admission waits under ctx (slots, request queue,
// in process or shared) show on w as requestID's.
func WithWaiting(ctx context.Context, w *Waiting, requestID string) context.Context {
	if w == nil {
		return ctx
	}
	return context.WithValue(ctx, waitScopeKey{}, waitScope{w: w, requestID: requestID})
}

// BeginWait records a wait on the board of ctx (WithWaiting); without one
// it returns the zero token. Admission stores call it when a request
// really starts to wait, never on the way through.
func BeginWait(ctx context.Context, reason, target string, resumeIn time.Duration) WaitToken {
	var tok WaitToken
	if s, ok := ctx.Value(waitScopeKey{}).(waitScope); ok {
		tok = s.w.Begin(reason, target, s.requestID, resumeIn)
	}
	if h, ok := ctx.Value(waitHookKey{}).(WaitHook); ok {
		tok = tok.Also(h(ctx, reason, target, resumeIn))
	}
	return tok
}
