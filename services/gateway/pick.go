package gateway

import (
	"sync"
	"sync/atomic"
	"time"

	"switchyard/services"
	"switchyard/services/accounts"
	"switchyard/services/affinity"
	"switchyard/services/leases"
	"switchyard/services/resilience"
)

// The account pick's eligibility cache.
//
// pickUncached runs the connection gates of 30-routing §5 (7–12) for every
// connection of a provider on every pick: a terminal-state, lockout,
// cooldown and quota lookup per connection, about 0.2 ms for 1,000
// connections. Only gates 7 (enabled, terminal) to 10 (quota) are the same
// for every request; the key's allowances, the request's exclusions, its
// lease and the leases of other keys are not. So the gateway keeps, per
// (provider, model), the request-independent part — each connection's
// class (eligible, disabled, blocked and by what until when), the eligible
// connections as selector columns, and what the exclusion record of
// pickUncached needs when nothing else filters — and runs the per-request
// filters on top.
//
// Leases of other keys are a per-request filter too, but a cheap one: the
// entry also records the live leases on its connections (key and expiry,
// from the leases.View it was built from) and keeps, besides its eligible
// columns, the eligible columns without the leased connections, with the
// exclusion record pickUncached would make with those connections held by
// another key. A request of a key that holds none of those leases, the
// usual case, picks from these columns on the fast path; only a key that
// holds a lease on the provider (its unmanaged traffic may use its own
// leased connection) or a request bound to a lease goes to pickFiltered.
//
// An entry is valid while all of these hold:
//   - the snapshot is the one it was built from (connections, their
//     enabled flags, order and quota reserves live in the snapshot);
//   - resilience.Engine.StateVersion is unchanged (every write of a
//     connection's cooldown or terminal state and of the lockout records
//     bumps it, including clears, re-enables, decay, sweeps and loads);
//   - quota.Tracker.Version is unchanged (every observation that can move
//     the quota gate, Load and Forget bump it), and so are the lockout
//     master switch and routing.quotaMaxStaleMs, which are settings the
//     state machines read on every call rather than writes they see;
//   - the clock has not reached the earliest end among the timed blockers
//     it saw, nor gone back before the instant it was built. Blockers only
//     lapse with time, never start (a lock, cooldown or exhausted quota
//     window is written, or observed), and each blocker ends exactly at the
//     end it reported, so until then every connection's class and blocker
//     are what the entry holds;
//   - the leases service publishes the same leases.View (every change of
//     its mirror — grant, renew, release, transition, invalidation, load,
//     expiry sweep — publishes a new one), and its clock (Leases.Now, the
//     instant HeldByOthers judges liveness at) has neither reached the
//     earliest expiry among the live leases the entry saw nor gone back
//     before the instant it was built at. A row of the View only turns
//     from live to ended with time, never back, so until then each
//     lease's liveness is what the entry holds.
//
// Readers take no lock: the versions are atomics, entries are immutable and
// published through an atomic pointer per (provider, model). An entry is
// built from the versions read before the state it reflects, so a write
// that lands while it is built makes it stale at once rather than wrong;
// the leases.View is immutable, so the entry reflects exactly the one it
// holds.

// maxPickSlots bounds the (provider, model) pairs kept; past it the cache
// starts over (models come from requests, so their number is not bounded
// by the configuration alone).
const maxPickSlots = 256

type pickKey struct{ provider, model string }

type pickSlot struct{ entry atomic.Pointer[pickEntry] }

// pickCache maps (provider, model) to its slot. The map is copied on the
// rare insert, so a lookup is a plain map read.
type pickCache struct {
	mu    sync.Mutex // serialises inserts
	slots atomic.Pointer[map[pickKey]*pickSlot]
}

func (c *pickCache) slot(provider, model string) *pickSlot {
	k := pickKey{provider, model}
	if m := c.slots.Load(); m != nil {
		if sl, ok := (*m)[k]; ok {
			return sl
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var n map[pickKey]*pickSlot
	if m := c.slots.Load(); m != nil {
		if sl, ok := (*m)[k]; ok {
			return sl
		}
		if len(*m) < maxPickSlots {
			n = make(map[pickKey]*pickSlot, len(*m)+1)
			for kk, v := range *m {
				n[kk] = v
			}
		}
	}
	if n == nil {
		n = map[pickKey]*pickSlot{}
	}
	sl := &pickSlot{}
	n[k] = sl
	c.slots.Store(&n)
	return sl
}

// pickVersion is what an entry must match besides its snapshot and clock.
type pickVersion struct {
	state    uint64 // resilience.Engine.StateVersion
	quota    uint64 // quota.Tracker.Version
	lockOn   bool   // modelLockout.enabled
	maxStale time.Duration
}

func (g *Gateway) pickVersion() pickVersion {
	v := pickVersion{state: g.res.StateVersion(), lockOn: g.res.Lockouts.Enabled()}
	if g.quota != nil {
		v.quota, v.maxStale = g.quota.Version(), g.quota.MaxStale()
	}
	return v
}

type pickClass uint8

const (
	pcEligible pickClass = iota
	pcDisabled
	pcBlocked
)

// pickBlocker is a connection's blocker as pickUncached sees it, with its
// end as an instant (zero: not a timer).
type pickBlocker struct {
	conn     int32 // index into the entry's conns
	reason   string
	end      time.Time
	waitable bool
}

// pickLease is a live lease on one of an entry's connections.
type pickLease struct {
	conn int32 // index into the entry's conns
	key  string
}

// pickCols are eligible connections in configured order as selector
// columns: the accounts.PoolSource of a pick.
type pickCols struct {
	pos      map[string]int32 // the entry's: connection id → conns index
	at       []int32          // by conns index: index into the columns, -1
	elig     []int32          // conns index
	ids      []string
	backoff  []int
	lastUsed []*atomic.Int64
	rts      []*ConnRuntime
}

func (c *pickCols) add(i int32, id string, backoff int, lastUsed *atomic.Int64, rt *ConnRuntime) {
	c.at[i] = int32(len(c.elig))
	c.elig = append(c.elig, i)
	c.ids = append(c.ids, id)
	c.backoff = append(c.backoff, backoff)
	c.lastUsed = append(c.lastUsed, lastUsed)
	c.rts = append(c.rts, rt)
}

func (c *pickCols) Index(id string) int {
	if i, ok := c.pos[id]; ok {
		return int(c.at[i])
	}
	return -1
}

func (c *pickCols) Load(i int) (int, float64) { return c.rts[i].InFlight(), c.rts[i].SuccessRate() }

// pickEntry is the request-independent part of one (provider, model)'s
// pick at one state version. Immutable once published.
type pickEntry struct {
	snap    *Snapshot
	conns   []*services.Connection
	ver     pickVersion
	built   time.Time
	expires time.Time // earliest end of a timed blocker; zero = none
	// usable: conns is in configured order with distinct ids (always, for
	// a Registry snapshot); otherwise pick runs uncached.
	usable bool

	// The leases the entry was built from: the View (nil without a lease
	// service) and, when a row of it is on one of conns (live or not),
	// the lease clock at build and the earliest expiry of a live one.
	lview  *leases.View
	lclock bool
	lbuilt time.Time
	lexp   time.Time // zero = no live lease
	leased []pickLease

	pos      map[string]int32 // connection id → index into conns
	class    []pickClass      // by conns index
	blk      []int32          // by conns index: index into blockers, -1
	blockers []pickBlocker

	// all: the eligible connections. free: those not leased (all itself
	// when nothing is), what a key holding none of the leases picks from.
	all, free pickCols

	// What pickUncached's exclusion record needs when no per-request
	// filter applies but the leases of other keys: the last untimed
	// reason (hardD once the request has dispatched, when lease_busy no
	// longer counts), the soonest-ending timed blocker, and the earliest
	// end of a waitable one, all over the connections not leased.
	hard, hardD string
	soonest     int32 // index into blockers, -1
	anyBlock    bool
	allLocked   bool
	waitEnd     time.Time
}

func (e *pickEntry) valid(s *Snapshot, v pickVersion, lv *leases.View, now time.Time) bool {
	return e.snap == s && e.ver == v && e.lview == lv && !now.Before(e.built) && (e.expires.IsZero() || now.Before(e.expires))
}

// leasesValid reports the entry's leases current at lnow, an instant of
// the lease clock (the View is checked by valid).
func (e *pickEntry) leasesValid(lnow time.Time) bool {
	return !lnow.Before(e.lbuilt) && (e.lexp.IsZero() || lnow.Before(e.lexp))
}

// leaseService is the lease service pick consults, nil when none.
func (g *Gateway) leaseService() *leases.Leases { return g.traffic.Leases }

// pickEntryFor returns a valid entry for (provider, model), building one
// when the cached one is stale.
func (g *Gateway) pickEntryFor(s *Snapshot, provider, model string, now time.Time) *pickEntry {
	v := g.pickVersion() // before any state the entry reflects
	ls := g.leaseService()
	var lv *leases.View
	if ls != nil {
		lv = ls.View()
	}
	sl := g.picks.slot(provider, model)
	old := sl.entry.Load()
	if old != nil && old.valid(s, v, lv, now) && (!old.lclock || old.leasesValid(ls.Now())) {
		return old
	}
	e := g.buildPickEntry(s, provider, model, v, ls, lv, now, old)
	sl.entry.CompareAndSwap(old, e) // a concurrent builder's entry is as good
	return e
}

// buildPickEntry runs the request-independent gates of pickUncached over
// every connection of provider, with the same calls in the same order.
//
// The leases of lv on its connections are recorded, and the columns and
// the exclusion record without the leased connections follow pickUncached
// for a request whose key holds none of them: such a connection is
// lease_busy after its enabled check and before its blocker check.
func (g *Gateway) buildPickEntry(s *Snapshot, provider, model string, v pickVersion, ls *leases.Leases, lv *leases.View, now time.Time, prev *pickEntry) *pickEntry {
	conns := s.Connections(provider)
	n := len(conns)
	e := &pickEntry{snap: s, conns: conns, ver: v, built: now, lview: lv, soonest: -1, allLocked: true,
		class: make([]pickClass, n), blk: make([]int32, n)}
	e.all.at = make([]int32, n)
	if prev != nil && prev.snap == s {
		e.pos, e.usable = prev.pos, prev.usable
	} else {
		e.pos, e.usable = make(map[string]int32, n), true
		for i, c := range conns {
			if _, dup := e.pos[c.ID]; dup || c.ID == "" {
				e.usable = false
				continue
			}
			e.pos[c.ID] = int32(i)
			if i > 0 && configuredBefore(c, conns[i-1]) {
				e.usable = false
			}
		}
	}
	if !e.usable {
		return e
	}
	e.all.pos = e.pos
	// The live leases on conns, at the lease clock now.
	var isLeased []bool
	if lv != nil && len(lv.ByConn) > 0 {
		lnow := ls.Now()
		for id, h := range lv.ByConn {
			i, ok := e.pos[id]
			if !ok {
				continue
			}
			e.lclock, e.lbuilt = true, lnow
			if !h.Live(lnow) {
				continue
			}
			if isLeased == nil {
				isLeased = make([]bool, n)
			}
			isLeased[i] = true
			e.leased = append(e.leased, pickLease{conn: i, key: h.KeyID})
			if e.lexp.IsZero() || h.ExpiresAt.Before(e.lexp) {
				e.lexp = h.ExpiresAt
			}
		}
	}
	if isLeased != nil {
		e.free = pickCols{pos: e.pos, at: make([]int32, n)}
	}
	mk := resilience.KeysForModel(provider, model)
	for i, c := range conns {
		e.blk[i], e.all.at[i] = -1, -1
		if isLeased != nil {
			e.free.at[i] = -1
		}
		leased := isLeased != nil && isLeased[i]
		if !c.Enabled {
			e.class[i] = pcDisabled
			e.hard, e.hardD = "disabled", "disabled"
			continue
		}
		if leased {
			e.hard = "lease_busy"
		}
		b, blocked := g.res.BlockerKeys(provider, c.ID, mk, now)
		if !blocked && g.quota != nil {
			if qb := g.quotaBlocker(c, now); qb != nil {
				b, blocked = *qb, true
			}
		}
		if blocked {
			e.class[i], e.blk[i] = pcBlocked, int32(len(e.blockers))
			pb := pickBlocker{conn: int32(i), reason: b.Reason, waitable: b.Waitable}
			if b.RetryAfter > 0 {
				pb.end = now.Add(b.RetryAfter)
				if e.expires.IsZero() || pb.end.Before(e.expires) {
					e.expires = pb.end
				}
			}
			e.blockers = append(e.blockers, pb)
			if !leased {
				e.recordBlocker(e.blk[i])
			}
			continue
		}
		rt := g.reg.Runtime(c.ID)
		backoff := g.res.Cooldowns.BackoffLevel(c.ID)
		e.all.add(int32(i), c.ID, backoff, &rt.lastUsedMs, rt)
		if isLeased != nil && !leased {
			e.free.add(int32(i), c.ID, backoff, &rt.lastUsedMs, rt)
		}
	}
	if isLeased == nil {
		e.free = e.all
	}
	return e
}

// recordBlocker adds blocker bi of a connection no lease holds to the
// entry's exclusion record, as pickUncached's gate loop does.
func (e *pickEntry) recordBlocker(bi int32) {
	b := &e.blockers[bi]
	e.anyBlock = true
	if b.end.IsZero() {
		e.hard, e.hardD = b.reason, b.reason
		e.allLocked = false
		return
	}
	if b.waitable && (e.waitEnd.IsZero() || b.end.Before(e.waitEnd)) {
		e.waitEnd = b.end
	}
	if b.reason != "model_lockout" {
		e.allLocked = false
	}
	if e.soonest < 0 || b.end.Before(e.blockers[e.soonest].end) {
		e.soonest = bi
	}
}

// configuredBefore reports a before b in configured order (priority,
// created, id), the order of Snapshot.Connections and of the selector.
func configuredBefore(a, b *services.Connection) bool {
	if a.Priority != b.Priority {
		return a.Priority < b.Priority
	}
	if !a.CreatedAt.Equal(b.CreatedAt) {
		return a.CreatedAt.Before(b.CreatedAt)
	}
	return a.ID < b.ID
}

// pickScratch is one request's reusable pick buffers: the per-request
// eligible columns when a per-request filter applies, and the affinity
// pin id of the last provider asked.
type pickScratch struct {
	marks []uint8
	cols  pickCols

	pinKey, pinProvider, pinSession, pin string
}

// pinID is g.pinID, remembering the last id it hashed: a request asks for
// the same (key, provider, session) at every pick.
func (sc *pickScratch) pinID(g *Gateway, req *Request, provider string) string {
	if req.SessionKey == "" || req.LeaseConnID != "" || g.traffic.Pins == nil {
		return ""
	}
	if g.traffic.Doc().SessionAffinity.TTLMs <= 0 {
		return ""
	}
	if sc.pin == "" || sc.pinKey != req.Key.ID || sc.pinProvider != provider || sc.pinSession != req.SessionKey {
		sc.pinKey, sc.pinProvider, sc.pinSession = req.Key.ID, provider, req.SessionKey
		sc.pin = affinity.PinID(req.Key.ID, provider, req.SessionKey)
	}
	return sc.pin
}

const (
	markExcluded uint8 = 1 << iota
	markHeld
	markAllowed
)

// pick chooses the next connection for a target, or nil when none is left:
// pickUncached's decision and exclusion record, from the eligibility cache.
func (g *Gateway) pick(s *Snapshot, t target, req *Request, st *attemptState, set *Settings, record bool) *services.Connection {
	if _, ok := pipelineFor(req.Inbound, t.provider.Format, nativeAnthropic(t.provider), set.DefaultMaxTokens); !ok {
		return g.pickUncached(s, t, req, st, set, record)
	}
	now := g.clock.Now()
	provider := t.provider.ID
	e := g.pickEntryFor(s, provider, t.model, now)
	if !e.usable {
		return g.pickUncached(s, t, req, st, set, record)
	}
	// Per-request filters: a pinned connection, the key's allowances, the
	// request's lease, connections that failed in this request, and the
	// key's own leases (those of other keys the fast path filters too).
	slow := t.connID != "" || req.Key.AllowedConnections != nil || req.LeaseConnID != ""
	if !slow {
		for id, failed := range st.excluded {
			if _, ok := e.pos[id]; ok && failed {
				slow = true
				break
			}
		}
	}
	if !slow {
		for i := range e.leased {
			if e.leased[i].key == req.Key.ID {
				slow = true
				break
			}
		}
	}
	sc := &st.pickScr
	var cols *pickCols
	if !slow {
		if !e.waitEnd.IsZero() {
			st.noteWaitable(e.waitEnd.Sub(now))
		}
		if len(e.free.elig) == 0 {
			if record {
				hard := e.hard
				if dispatchedOnce(st) {
					hard = e.hardD
				}
				g.pickExclude(t, st, e, hard, e.soonest, e.anyBlock, e.allLocked, now)
			}
			return nil
		}
		cols = &e.free
	} else {
		if !g.pickFiltered(e, t, req, st, now, record) {
			return nil
		}
		cols = &sc.cols
	}
	pool := accounts.Pool{IDs: cols.ids, Backoff: cols.backoff, LastUsed: cols.lastUsed, Src: cols}
	strategy, sticky := set.FallbackStrategy, set.StickyLimit
	if ps, ok := set.ProviderStrategy[provider]; ok {
		if ps.FallbackStrategy != "" {
			strategy = ps.FallbackStrategy
		}
		if ps.StickyLimit > 0 {
			sticky = ps.StickyLimit
		}
	}
	// The strategy's preferred connection (lkgp), when eligible.
	if t.prefConn != "" {
		if i := cols.Index(t.prefConn); i >= 0 {
			return e.conns[cols.elig[i]]
		}
	}
	// An eligible affinity pin wins (a preference, never a wall: BD 7).
	if pin := sc.pinID(g, req, provider); pin != "" {
		if id, ok := g.traffic.Pins.Lookup(pin); ok {
			if i := cols.Index(id); i >= 0 {
				st.log.AffinityHit = true
				return e.conns[cols.elig[i]]
			}
		}
	}
	i := g.sel.PickPool(provider, strategy, sticky, &pool, st.failedProv[provider])
	if i < 0 {
		return nil
	}
	return e.conns[cols.elig[i]]
}

// pickFiltered is pickUncached's gate loop on the entry's classes with the
// per-request filters applied, in pickUncached's order per connection. It
// fills the scratch columns and reports whether any connection is eligible
// (recording the exclusion when none is and record is set). A connection
// is held when the entry saw another key's live lease on it and the
// request is not bound to a lease (heldByOthers).
func (g *Gateway) pickFiltered(e *pickEntry, t target, req *Request, st *attemptState, now time.Time, record bool) bool {
	sc := &st.pickScr
	n := len(e.conns)
	sc.marks = growZero(sc.marks, n)
	c := &sc.cols
	c.pos, c.at = e.pos, growInt32(c.at, n)
	c.elig, c.ids, c.backoff, c.lastUsed, c.rts = c.elig[:0], c.ids[:0], c.backoff[:0], c.lastUsed[:0], c.rts[:0]
	for id, failed := range st.excluded {
		if i, ok := e.pos[id]; ok && failed {
			sc.marks[i] |= markExcluded
		}
	}
	if req.LeaseConnID == "" {
		for _, l := range e.leased {
			if l.key != req.Key.ID {
				sc.marks[l.conn] |= markHeld
			}
		}
	}
	restricted := req.Key.AllowedConnections != nil
	if restricted {
		for _, id := range req.Key.AllowedConnections {
			if i, ok := e.pos[id]; ok {
				sc.marks[i] |= markAllowed
			}
		}
	}
	lo, hi := 0, n
	if t.connID != "" {
		lo, hi = 0, 0
		if i, ok := e.pos[t.connID]; ok {
			lo, hi = int(i), int(i)+1
		}
	}
	lease := int32(-1)
	if req.LeaseConnID != "" {
		if i, ok := e.pos[req.LeaseConnID]; ok {
			lease = i
		}
	}
	hard, soonest := "", int32(-1)
	anyBlock, allLocked := false, true
	var waitEnd time.Time
	for i := lo; i < hi; i++ {
		class, m := e.class[i], sc.marks[i]
		switch {
		case class == pcDisabled:
			hard = "disabled"
			continue
		case restricted && m&markAllowed == 0:
			hard = "not_allowed"
			continue
		case m&markExcluded != 0:
			continue
		case req.LeaseConnID != "" && int32(i) != lease:
			continue
		case m&markHeld != 0:
			if !dispatchedOnce(st) {
				hard = "lease_busy"
			}
			continue
		case class == pcBlocked:
			bi := e.blk[i]
			b := &e.blockers[bi]
			anyBlock = true
			if b.end.IsZero() {
				hard = b.reason
				allLocked = false
				continue
			}
			if b.waitable && (waitEnd.IsZero() || b.end.Before(waitEnd)) {
				waitEnd = b.end
			}
			if b.reason != "model_lockout" {
				allLocked = false
			}
			if soonest < 0 || b.end.Before(e.blockers[soonest].end) {
				soonest = bi
			}
			continue
		}
		k := e.all.at[i]
		c.add(int32(i), e.all.ids[k], e.all.backoff[k], e.all.lastUsed[k], e.all.rts[k])
	}
	if !waitEnd.IsZero() {
		st.noteWaitable(waitEnd.Sub(now))
	}
	if len(c.elig) > 0 {
		return true
	}
	if record {
		g.pickExclude(t, st, e, hard, soonest, anyBlock, allLocked, now)
	}
	return false
}

// pickExclude records why a target has no eligible connection, as
// pickUncached does.
func (g *Gateway) pickExclude(t target, st *attemptState, e *pickEntry, hard string, soonest int32, anyBlock, allLocked bool, now time.Time) {
	switch {
	case soonest >= 0:
		b := &e.blockers[soonest]
		reason, detail := "unavailable", b.reason
		if b.reason == "model_lockout" && allLocked && anyBlock {
			reason, detail = "model_lockout", ""
		}
		st.exclude(t, e.conns[b.conn].ID, reason, detail, b.end.Sub(now))
		g.obs.Excluded(b.reason)
	case hard != "":
		st.exclude(t, "", "unavailable", hard, 0)
		g.obs.Excluded(hard)
	default:
		st.exclude(t, "", "no_connection", "", 0)
	}
}

func growZero(b []uint8, n int) []uint8 {
	if cap(b) < n {
		return make([]uint8, n)
	}
	b = b[:n]
	clear(b)
	return b
}

func growInt32(b []int32, n int) []int32 {
	if cap(b) < n {
		b = make([]int32, n)
	}
	b = b[:n]
	for i := range b {
		b[i] = -1
	}
	return b
}
