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
//     are what the entry holds.
//
// Readers take no lock: the versions are atomics, entries are immutable and
// published through an atomic pointer per (provider, model). An entry is
// built from the versions read before the state it reflects, so a write
// that lands while it is built makes it stale at once rather than wrong.

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

	pos      map[string]int32 // connection id → index into conns
	class    []pickClass      // by conns index
	blk      []int32          // by conns index: index into blockers, -1
	eligAt   []int32          // by conns index: index into the eligible columns, -1
	blockers []pickBlocker

	// The eligible connections in configured order, as selector columns.
	elig     []int32 // conns index
	ids      []string
	backoff  []int
	lastUsed []*atomic.Int64
	rts      []*ConnRuntime

	// What pickUncached's exclusion record needs when no per-request
	// filter applies: the last untimed reason, the soonest-ending timed
	// blocker, and the earliest end of a waitable one.
	hard      string
	soonest   int32 // index into blockers, -1
	anyBlock  bool
	allLocked bool
	waitEnd   time.Time
}

func (e *pickEntry) valid(s *Snapshot, v pickVersion, now time.Time) bool {
	return e.snap == s && e.ver == v && !now.Before(e.built) && (e.expires.IsZero() || now.Before(e.expires))
}

// Index and Load make the entry the accounts.PoolSource of its columns.
func (e *pickEntry) Index(id string) int {
	if i, ok := e.pos[id]; ok {
		return int(e.eligAt[i])
	}
	return -1
}

func (e *pickEntry) Load(i int) (int, float64) { return e.rts[i].InFlight(), e.rts[i].SuccessRate() }

// pickEntryFor returns a valid entry for (provider, model), building one
// when the cached one is stale.
func (g *Gateway) pickEntryFor(s *Snapshot, provider, model string, now time.Time) *pickEntry {
	v := g.pickVersion() // before any state the entry reflects
	sl := g.picks.slot(provider, model)
	old := sl.entry.Load()
	if old != nil && old.valid(s, v, now) {
		return old
	}
	e := g.buildPickEntry(s, provider, model, v, now, old)
	sl.entry.CompareAndSwap(old, e) // a concurrent builder's entry is as good
	return e
}

// buildPickEntry runs the request-independent gates of pickUncached over
// every connection of provider, with the same calls in the same order.
func (g *Gateway) buildPickEntry(s *Snapshot, provider, model string, v pickVersion, now time.Time, prev *pickEntry) *pickEntry {
	conns := s.Connections(provider)
	n := len(conns)
	e := &pickEntry{snap: s, conns: conns, ver: v, built: now, soonest: -1, allLocked: true,
		class: make([]pickClass, n), blk: make([]int32, n), eligAt: make([]int32, n)}
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
	mk := resilience.KeysForModel(provider, model)
	for i, c := range conns {
		e.blk[i], e.eligAt[i] = -1, -1
		if !c.Enabled {
			e.class[i] = pcDisabled
			e.hard = "disabled"
			continue
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
			e.anyBlock = true
			if b.RetryAfter <= 0 {
				e.hard = b.Reason
				e.allLocked = false
			} else {
				pb.end = now.Add(b.RetryAfter)
				if e.expires.IsZero() || pb.end.Before(e.expires) {
					e.expires = pb.end
				}
				if pb.waitable && (e.waitEnd.IsZero() || pb.end.Before(e.waitEnd)) {
					e.waitEnd = pb.end
				}
				if b.Reason != "model_lockout" {
					e.allLocked = false
				}
				if e.soonest < 0 || pb.end.Before(e.blockers[e.soonest].end) {
					e.soonest = e.blk[i]
				}
			}
			e.blockers = append(e.blockers, pb)
			continue
		}
		rt := g.reg.Runtime(c.ID)
		e.eligAt[i] = int32(len(e.elig))
		e.elig = append(e.elig, int32(i))
		e.ids = append(e.ids, c.ID)
		e.backoff = append(e.backoff, g.res.Cooldowns.BackoffLevel(c.ID))
		e.lastUsed = append(e.lastUsed, &rt.lastUsedMs)
		e.rts = append(e.rts, rt)
	}
	return e
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
	e        *pickEntry
	marks    []uint8
	at       []int32 // by conns index: index into the columns below, -1
	elig     []int32
	ids      []string
	backoff  []int
	lastUsed []*atomic.Int64
	rts      []*ConnRuntime

	pinKey, pinProvider, pinSession, pin string
}

func (sc *pickScratch) Index(id string) int {
	if i, ok := sc.e.pos[id]; ok {
		return int(sc.at[i])
	}
	return -1
}

func (sc *pickScratch) Load(i int) (int, float64) {
	return sc.rts[i].InFlight(), sc.rts[i].SuccessRate()
}

// pinID is g.pinID, remembering the last id it hashed: a request asks for
// the same (key, provider, session) at every pick.
func (sc *pickScratch) pinID(g *Gateway, req *Request, provider string) string {
	if req.SessionKey == "" || req.LeaseConnID != "" || g.traffic == nil || g.traffic.Pins == nil {
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
	if _, ok := pipelineFor(req.Inbound, t.provider.Format, set.DefaultMaxTokens); !ok {
		return g.pickUncached(s, t, req, st, set, record)
	}
	now := g.clock.Now()
	provider := t.provider.ID
	e := g.pickEntryFor(s, provider, t.model, now)
	if !e.usable {
		return g.pickUncached(s, t, req, st, set, record)
	}
	// Per-request filters: a pinned connection, the key's allowances, the
	// request's lease, connections that failed in this request, and
	// connections other keys lease.
	slow := t.connID != "" || req.Key.AllowedConnections != nil || req.LeaseConnID != ""
	if !slow {
		for id, failed := range st.excluded {
			if _, ok := e.pos[id]; ok && failed {
				slow = true
				break
			}
		}
	}
	var held []leases.Lease
	if req.LeaseConnID == "" && g.traffic != nil && g.traffic.Leases != nil {
		held = g.traffic.Leases.Active()
		for _, l := range held {
			if _, ok := e.pos[l.ConnectionID]; ok && l.KeyID != req.Key.ID {
				slow = true
			}
		}
	}
	sc := &st.pickScr
	var pool accounts.Pool
	var elig []int32
	if !slow {
		if !e.waitEnd.IsZero() {
			st.noteWaitable(e.waitEnd.Sub(now))
		}
		if len(e.elig) == 0 {
			if record {
				g.pickExclude(t, st, e, e.hard, e.soonest, e.anyBlock, e.allLocked, now)
			}
			return nil
		}
		elig = e.elig
		pool = accounts.Pool{IDs: e.ids, Backoff: e.backoff, LastUsed: e.lastUsed, Src: e}
	} else {
		if !g.pickFiltered(e, t, req, st, held, now, record) {
			return nil
		}
		elig = sc.elig
		pool = accounts.Pool{IDs: sc.ids, Backoff: sc.backoff, LastUsed: sc.lastUsed, Src: sc}
	}
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
		if i := pool.Src.Index(t.prefConn); i >= 0 {
			return e.conns[elig[i]]
		}
	}
	// An eligible affinity pin wins (a preference, never a wall: BD 7).
	if pin := sc.pinID(g, req, provider); pin != "" {
		if id, ok := g.traffic.Pins.Lookup(pin); ok {
			if i := pool.Src.Index(id); i >= 0 {
				st.log.AffinityHit = true
				return e.conns[elig[i]]
			}
		}
	}
	i := g.sel.PickPool(provider, strategy, sticky, &pool, st.failedProv[provider])
	if i < 0 {
		return nil
	}
	return e.conns[elig[i]]
}

// pickFiltered is pickUncached's gate loop on the entry's classes with the
// per-request filters applied, in pickUncached's order per connection. It
// fills the scratch columns and reports whether any connection is eligible
// (recording the exclusion when none is and record is set).
func (g *Gateway) pickFiltered(e *pickEntry, t target, req *Request, st *attemptState, held []leases.Lease, now time.Time, record bool) bool {
	sc := &st.pickScr
	n := len(e.conns)
	sc.e = e
	sc.marks = growZero(sc.marks, n)
	sc.at = growInt32(sc.at, n)
	sc.elig, sc.ids, sc.backoff, sc.lastUsed, sc.rts = sc.elig[:0], sc.ids[:0], sc.backoff[:0], sc.lastUsed[:0], sc.rts[:0]
	for id, failed := range st.excluded {
		if i, ok := e.pos[id]; ok && failed {
			sc.marks[i] |= markExcluded
		}
	}
	for _, l := range held {
		if i, ok := e.pos[l.ConnectionID]; ok && l.KeyID != req.Key.ID {
			sc.marks[i] |= markHeld
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
		k := e.eligAt[i]
		sc.at[i] = int32(len(sc.elig))
		sc.elig = append(sc.elig, int32(i))
		sc.ids = append(sc.ids, e.ids[k])
		sc.backoff = append(sc.backoff, e.backoff[k])
		sc.lastUsed = append(sc.lastUsed, e.lastUsed[k])
		sc.rts = append(sc.rts, e.rts[k])
	}
	if !waitEnd.IsZero() {
		st.noteWaitable(waitEnd.Sub(now))
	}
	if len(sc.elig) > 0 {
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
