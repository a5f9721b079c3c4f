// Package quota learns the quota windows of every connection passively from
// upstream response headers (30-routing §8.3, 20-resilience §13.4) and
// answers the questions routing asks about them: the windows as they count
// now (View, for the candidate-level strategies) and the quota gate
// (gate 10, §8.4).
//
// Observe sits on the proxy hot path: a response without quota headers
// costs one allocation-free pass over its header names; one with them
// swaps an immutable per-connection snapshot (no lock shared between
// connections, no database round trip). Rows of quota_windows are written
// asynchronously by one goroutine, at most once per connection per
// WriteInterval (10 s), and reloaded by Load at start.
//
// The package imports the standard library, switchyard/services (Clock)
// and switchyard/services/routing (the view type it produces) only.
package quota

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"switchyard/services"
	"switchyard/services/routing"
)

// Defaults of Options.
const (
	// DefaultMaxStale is routing.quotaMaxStaleMs (86 400 000 ms).
	DefaultMaxStale = 24 * time.Hour
	// DefaultWriteInterval bounds writes to one per connection per 10 s.
	DefaultWriteInterval = 10 * time.Second
	// minuteFallback is how long a minute window without a known reset
	// counts.
	minuteFallback = time.Minute
)

// Record is one stored row of quota_windows.
type Record struct {
	ConnectionID string
	Window       string
	// Used is the used fraction u in [0, 1] (stored as used_percent).
	Used float64
	// Limit and Remaining are a minute window's counts; Limit 0 = unknown.
	Limit, Remaining int64
	// ResetAt is zero when unknown.
	ResetAt    time.Time
	Source     string
	ObservedAt time.Time
}

// Store persists quota windows (quota_windows, 20-resilience §15); models
// implements it.
type Store interface {
	// LoadQuotaWindows returns every stored row.
	LoadQuotaWindows(ctx context.Context) ([]Record, error)
	// SaveQuotaWindows inserts or replaces each (connection, window) row.
	SaveQuotaWindows(ctx context.Context, recs []Record) error
	// DeleteQuotaWindows deletes the rows of a connection; none is no error.
	DeleteQuotaWindows(ctx context.Context, connectionID string) error
}

// Options configures a Tracker. Every field is optional.
type Options struct {
	// Store persists windows; nil keeps them in memory only.
	Store Store
	// Clock times the background writes and Load; nil means the wall
	// clock. Observe, Windows and Gate take the time as an argument.
	Clock services.Clock
	// MaxStale returns routing.quotaMaxStaleMs, read on every use; nil or
	// a value ≤ 0 means DefaultMaxStale.
	MaxStale func() time.Duration
	// WriteInterval is the shortest time between two writes of one
	// connection's rows, by Clock. Default DefaultWriteInterval.
	WriteInterval time.Duration
	// Logger receives write failures; nil discards them.
	Logger *slog.Logger
	// Feed, when set, shares the windows with the other replicas of a
	// fleet (shared.go): a change that can move the quota gate is written
	// at once instead of after WriteInterval, every write is published,
	// and the other replicas' windows are applied to this tracker. nil in
	// a single process.
	Feed services.ChangeFeed
}

// Tracker holds the latest quota windows of every connection. It is safe
// for concurrent use; Close stops its writer.
type Tracker struct {
	store    Store
	clock    services.Clock
	maxStale func() time.Duration
	interval time.Duration
	log      *slog.Logger
	feed     services.ChangeFeed

	conns sync.Map // connection id → *conn
	// version is bumped after every change that can change what Gate
	// answers (see Version).
	version atomic.Uint64

	kick      chan *conn
	stop      chan struct{}
	done      chan struct{}
	closeOnce sync.Once
}

// conn is one connection's state. snap is replaced, never modified.
type conn struct {
	id   string
	snap atomic.Pointer[snapshot]

	dirty     atomic.Bool  // memory holds observations not yet written
	queued    atomic.Bool  // handed to the writer, not yet taken
	lastWrite atomic.Int64 // Clock reading of the last write, Unix ns; 0 never

	// wmu serialises this connection's store writes and Forget.
	wmu       sync.Mutex
	forgotten bool // guarded by wmu
}

// Window indexes of a snapshot.
const (
	iMinute = iota
	i5h
	iDaily
	iWeekly
	iMonthly
	numWindows
)

var windowNames = [numWindows]string{Minute, FiveH, Daily, Weekly, Monthly}

var nominal = [numWindows]time.Duration{
	iMinute: time.Minute, i5h: routing.FiveHours, iDaily: routing.OneDay,
	iWeekly: routing.OneWeek, iMonthly: routing.OneMonth,
}

func windowIndex(name string) int {
	for i, n := range windowNames {
		if n == name {
			return i
		}
	}
	return -1
}

// obs is the latest observation of one window.
type obs struct {
	set              bool
	used             float64
	resetAt          time.Time
	observedAt       time.Time
	limit, remaining int64
	source           string
}

type snapshot struct {
	w [numWindows]obs
}

var emptySnapshot = &snapshot{}

// with returns a copy of s with the windows of ws observed at t; s itself
// when every window of ws is older than what s holds.
func (s *snapshot) with(ws []Window, t time.Time) *snapshot {
	var n *snapshot
	for _, w := range ws {
		i := windowIndex(w.Name)
		if i < 0 {
			continue
		}
		if cur := s.w[i]; cur.set && t.Before(cur.observedAt) {
			continue // an older reading: the newer one stays
		}
		if n == nil {
			c := *s
			n = &c
		}
		n.w[i] = obs{set: true, used: clamp01(w.Used), resetAt: w.ResetAt, observedAt: t,
			limit: max(w.Limit, 0), remaining: max(w.Remaining, 0), source: w.Source}
	}
	if n == nil {
		return s
	}
	return n
}

// New builds a tracker and, when a store is given, starts its writer.
func New(opts Options) *Tracker { return newTracker(opts, 0) }

// newTracker is New with the writer's sweep period (0: half the write
// interval).
func newTracker(opts Options, sweep time.Duration) *Tracker {
	t := &Tracker{store: opts.Store, clock: opts.Clock, maxStale: opts.MaxStale, interval: opts.WriteInterval, log: opts.Logger,
		feed: opts.Feed}
	if t.clock == nil {
		t.clock = services.RealClock{}
	}
	if t.interval <= 0 {
		t.interval = DefaultWriteInterval
	}
	if t.log == nil {
		t.log = slog.New(slog.DiscardHandler)
	}
	if sweep <= 0 {
		sweep = max(t.interval/2, time.Millisecond)
	}
	if t.store != nil {
		t.kick = make(chan *conn, 256)
		t.stop = make(chan struct{})
		t.done = make(chan struct{})
		go t.run(sweep)
	}
	if t.feed != nil {
		t.feed.Subscribe(services.ChangeQuota, t.follow)
	}
	return t
}

// Version changes after every change of the windows that can change what
// Gate answers for some connection: an observation that moves a long
// window which is, or becomes, at or above gateFloor, Load and Forget.
// Time passing and routing.quotaMaxStaleMs (MaxStale) do not change it.
// Read it before the state it guards.
func (t *Tracker) Version() uint64 { return t.version.Load() }

// MaxStale is routing.quotaMaxStaleMs as Gate applies it now.
func (t *Tracker) MaxStale() time.Duration { return t.staleAfter() }

// gateFloor is the lowest used fraction at which a window can make Gate
// block: u ≥ 1 − reserve/100 with the reserve clamped to at most 50.
const gateFloor = 0.5

// gateChange reports whether replacing old by n can change what Gate
// answers: a long window changed that was or is at or above gateFloor (a
// window below it never blocks and never sets the gate's until).
func gateChange(old, n *snapshot) bool {
	for i := i5h; i < numWindows; i++ {
		o, w := old.w[i], n.w[i]
		if o == w {
			continue
		}
		if (o.set && o.used >= gateFloor) || (w.set && w.used >= gateFloor) {
			return true
		}
	}
	return false
}

func (t *Tracker) staleAfter() time.Duration {
	if t.maxStale != nil {
		if d := t.maxStale(); d > 0 {
			return d
		}
	}
	return DefaultMaxStale
}

// lookup returns the state of a connection or nil.
func (t *Tracker) lookup(connID string) *conn {
	if v, ok := t.conns.Load(connID); ok {
		return v.(*conn)
	}
	return nil
}

func (t *Tracker) connFor(connID string) *conn {
	if c := t.lookup(connID); c != nil {
		return c
	}
	c := &conn{id: connID}
	c.snap.Store(emptySnapshot)
	v, _ := t.conns.LoadOrStore(connID, c)
	return v.(*conn)
}

// Observe learns the quota windows of one upstream response (any status,
// any endpoint) served by connection connID and received at now. A newer
// observation of a window replaces the older one; an observation older than
// the one held is ignored. Responses without quota headers return at once
// without allocating.
func (t *Tracker) Observe(connID string, h http.Header, now time.Time) {
	if connID == "" || !HasHeaders(h) {
		return
	}
	var buf [numWindows]Window
	if ws := parseInto(h, now, buf[:0]); len(ws) > 0 {
		t.ObserveWindows(connID, ws, now)
	}
}

// ObserveWindows stores windows observed at now for a connection, as
// Observe does after parsing (for callers that learn quotas another way).
func (t *Tracker) ObserveWindows(connID string, ws []Window, now time.Time) {
	if connID == "" || len(ws) == 0 {
		return
	}
	c := t.connFor(connID)
	gate := false
	for {
		old := c.snap.Load()
		n := old.with(ws, now)
		if n == old {
			return
		}
		if c.snap.CompareAndSwap(old, n) {
			if gate = gateChange(old, n); gate {
				t.version.Add(1)
			}
			break
		}
	}
	if t.store == nil {
		return
	}
	c.dirty.Store(true)
	// In a fleet a change of the gate is everyone's at once (§3.4 row 11).
	t.queue(c, now, gate && t.feed != nil)
}

// queue hands c to the writer when its last write is at least interval
// old, or at once when now is set. A full queue leaves c dirty for the
// writer's periodic sweep.
func (t *Tracker) queue(c *conn, now time.Time, atOnce bool) {
	if last := c.lastWrite.Load(); !atOnce && last != 0 && now.UnixNano()-last < int64(t.interval) {
		return
	}
	if !c.queued.CompareAndSwap(false, true) {
		return
	}
	select {
	case t.kick <- c:
	default:
		c.queued.Store(false)
	}
}

// WindowView is one window of a connection as it counts at a given time.
type WindowView struct {
	// Known is false when the window was never observed or no longer
	// counts (§8.3 freshness); the other fields are then zero.
	Known bool
	// Used is u in [0, 1]; 0 for a long window whose reset has passed.
	Used float64
	// ResetAt is zero when unknown; it may have passed.
	ResetAt    time.Time
	ObservedAt time.Time
	// Limit and Remaining are a minute window's counts (Limit 0: unknown).
	Limit, Remaining int64
	Source           string
}

// View holds every window of one connection at a given time.
type View struct {
	Minute, FiveHour, Daily, Weekly, Monthly WindowView
}

// Routing converts the long windows to the view the routing strategies
// read.
func (v View) Routing() routing.QuotaView {
	conv := func(w WindowView) routing.QuotaWindow {
		return routing.QuotaWindow{Known: w.Known, Used: w.Used, ResetAt: w.ResetAt}
	}
	return routing.QuotaView{FiveHour: conv(v.FiveHour), Daily: conv(v.Daily), Weekly: conv(v.Weekly), Monthly: conv(v.Monthly)}
}

// evaluate applies the freshness rules of §8.3 to window i at now and
// returns it with the instant it stops counting.
func evaluate(o obs, i int, now time.Time, maxStale time.Duration) (WindowView, time.Time) {
	if !o.set {
		return WindowView{}, time.Time{}
	}
	var until time.Time
	if i == iMinute {
		until = o.resetAt
		if until.IsZero() {
			until = o.observedAt.Add(minuteFallback)
		}
	} else {
		until = o.observedAt.Add(maxStale)
		if o.resetAt.IsZero() {
			if n := o.observedAt.Add(nominal[i]); n.Before(until) {
				until = n
			}
		}
	}
	if !now.Before(until) {
		return WindowView{}, time.Time{}
	}
	v := WindowView{Known: true, Used: o.used, ResetAt: o.resetAt, ObservedAt: o.observedAt,
		Limit: o.limit, Remaining: o.remaining, Source: o.source}
	if i != iMinute && !o.resetAt.IsZero() && !now.Before(o.resetAt) {
		v.Used = 0 // reset passed: known, unused
	}
	return v, until
}

// Windows returns the windows of a connection as they count at now. A
// connection never observed has every window unknown.
func (t *Tracker) Windows(connID string, now time.Time) View {
	c := t.lookup(connID)
	if c == nil {
		return View{}
	}
	s, stale := c.snap.Load(), t.staleAfter()
	var out [numWindows]WindowView
	for i := range out {
		out[i], _ = evaluate(s.w[i], i, now, stale)
	}
	return View{Minute: out[iMinute], FiveHour: out[i5h], Daily: out[iDaily], Weekly: out[iWeekly], Monthly: out[iMonthly]}
}

// RoutingView is Windows(connID, now).Routing(), without the minute window.
func (t *Tracker) RoutingView(connID string, now time.Time) routing.QuotaView {
	return t.Windows(connID, now).Routing()
}

// QuotaFunc returns the reader to put in routing.Request.Quota for a
// request routed at now.
func (t *Tracker) QuotaFunc(now time.Time) func(connectionID string) routing.QuotaView {
	return func(id string) routing.QuotaView { return t.RoutingView(id, now) }
}

// Gate is the quota gate of §8.4 (gate 10, detail quota_window) for a
// connection whose quotaReservePercent is reservePercent (0–50; values
// outside are clamped). It blocks while a known long window has u ≥ 1 and
// a known reset in the future, or, with a reserve r > 0, u ≥ 1 − r/100.
// until is when the gate lifts unless a newer observation lowers u first:
// the latest, over the blocking windows, of the window's reset or the end
// of its freshness, whichever comes first. Minute windows never gate.
func (t *Tracker) Gate(connID string, reservePercent int, now time.Time) (blocked bool, until time.Time) {
	c := t.lookup(connID)
	if c == nil {
		return false, time.Time{}
	}
	reserve := min(max(reservePercent, 0), 50)
	threshold := float64(100-reserve) / 100
	s, stale := c.snap.Load(), t.staleAfter()
	for i := i5h; i < numWindows; i++ {
		v, end := evaluate(s.w[i], i, now, stale)
		if !v.Known {
			continue
		}
		futureReset := !v.ResetAt.IsZero() && now.Before(v.ResetAt)
		if !(v.Used >= 1 && futureReset) && !(reserve > 0 && v.Used >= threshold) {
			continue
		}
		if futureReset && v.ResetAt.Before(end) {
			end = v.ResetAt
		}
		blocked = true
		if end.After(until) {
			until = end
		}
	}
	return blocked, until
}

// Load restores the stored windows (rows observed more than
// routing.quotaMaxStaleMs ago are ignored). Observations already in memory
// that are newer win. Call it once at start, before traffic.
func (t *Tracker) Load(ctx context.Context) error {
	if t.store == nil {
		return nil
	}
	recs, err := t.store.LoadQuotaWindows(ctx)
	if err != nil {
		return fmt.Errorf("quota: load windows: %w", err)
	}
	now, stale := t.clock.Now(), t.staleAfter()
	for _, r := range recs {
		if r.ConnectionID == "" || windowIndex(r.Window) < 0 || now.Sub(r.ObservedAt) > stale {
			continue
		}
		c := t.connFor(r.ConnectionID)
		w := []Window{{Name: r.Window, Used: r.Used, ResetAt: r.ResetAt, Limit: r.Limit, Remaining: r.Remaining, Source: r.Source}}
		for {
			old := c.snap.Load()
			n := old.with(w, r.ObservedAt)
			if n == old || c.snap.CompareAndSwap(old, n) {
				break
			}
		}
	}
	t.version.Add(1)
	return nil
}

// Forget drops a deleted connection's windows, in memory and stored.
func (t *Tracker) Forget(ctx context.Context, connID string) error {
	c := t.lookup(connID)
	if c != nil {
		c.wmu.Lock()
		c.forgotten = true
		t.conns.CompareAndDelete(connID, c)
		c.wmu.Unlock()
		t.version.Add(1)
	}
	if t.store == nil {
		return nil
	}
	if err := t.store.DeleteQuotaWindows(ctx, connID); err != nil {
		return fmt.Errorf("quota: delete windows of %s: %w", connID, err)
	}
	return nil
}

// run is the writer: it writes queued connections, and every sweep period
// (wall time) the ones whose pending changes are due by Clock.
func (t *Tracker) run(sweep time.Duration) {
	defer close(t.done)
	tick := time.NewTicker(sweep)
	defer tick.Stop()
	ctx := context.Background()
	for {
		select {
		case c := <-t.kick:
			c.queued.Store(false)
			_ = t.write(ctx, c)
		case <-tick.C:
			t.flushDue(ctx, t.clock.Now())
		case <-t.stop:
			return
		}
	}
}

// flushDue writes the dirty connections whose last write is at least an
// interval old.
func (t *Tracker) flushDue(ctx context.Context, now time.Time) {
	t.conns.Range(func(_, v any) bool {
		c := v.(*conn)
		if last := c.lastWrite.Load(); c.dirty.Load() && (last == 0 || now.UnixNano()-last >= int64(t.interval)) {
			_ = t.write(ctx, c)
		}
		return true
	})
}

// write stores c's current snapshot if it has unwritten changes. A failed
// write leaves c dirty for a later attempt.
func (t *Tracker) write(ctx context.Context, c *conn) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.forgotten || !c.dirty.Swap(false) {
		return nil
	}
	c.lastWrite.Store(t.clock.Now().UnixNano())
	s := c.snap.Load()
	recs := make([]Record, 0, numWindows)
	for i, o := range s.w {
		if o.set {
			recs = append(recs, Record{ConnectionID: c.id, Window: windowNames[i], Used: o.used, Limit: o.limit,
				Remaining: o.remaining, ResetAt: o.resetAt, Source: o.source, ObservedAt: o.observedAt})
		}
	}
	if err := t.store.SaveQuotaWindows(ctx, recs); err != nil {
		c.dirty.Store(true)
		t.log.Warn("quota window write failed", "connection", c.id, "err", err)
		return fmt.Errorf("quota: save windows of %s: %w", c.id, err)
	}
	t.announce(ctx, c.id, recs)
	return nil
}

// Flush writes every pending change now, whatever the interval.
func (t *Tracker) Flush(ctx context.Context) error {
	if t.store == nil {
		return nil
	}
	var errs []error
	t.conns.Range(func(_, v any) bool {
		if err := t.write(ctx, v.(*conn)); err != nil {
			errs = append(errs, err)
		}
		return ctx.Err() == nil
	})
	return errors.Join(errs...)
}

// Close stops the writer and writes what is pending. Observations made
// after Close stay in memory only. Calling it again only flushes.
func (t *Tracker) Close(ctx context.Context) error {
	if t.store == nil {
		return nil
	}
	t.closeOnce.Do(func() { close(t.stop) })
	select {
	case <-t.done:
	case <-ctx.Done():
		return fmt.Errorf("quota: close: %w", ctx.Err())
	}
	return t.Flush(ctx)
}
