package gateway

import (
	"time"

	"switchyard/services"
	"switchyard/services/accounts"
	"switchyard/services/resilience"
)

// uncachedGates is what pickUncached's gate loop learned about the
// connections it could not use: the soonest-ending timed blocker, the last
// untimed reason, and whether every block was a model lockout.
type uncachedGates struct {
	soonest     resilience.Blocker
	soonestConn string
	allLocked   bool
	any         bool
	hard        string
}

// pickUncached chooses the next connection for a target, or nil when none
// is left. The connection gates of 30-routing §5 (7–12) run here for every
// connection; when nothing is eligible the target's exclusion names its
// soonest-ending blocker. pick (pick.go) makes the same decision from its
// eligibility cache; this is the reference it is tested against.
func (g *Gateway) pickUncached(s *Snapshot, t target, req *Request, st *attemptState, set *Settings, record bool) *services.Connection {
	// The candidate buffers live in the attempt state: one request's picks
	// reuse them, so a pick allocates nothing once they have grown.
	eligible, conns := st.pickCands[:0], st.pickConns[:0] // conns[i] is eligible[i]'s connection
	defer func() { st.pickCands, st.pickConns = eligible[:0], conns[:0] }()
	if _, ok := pipelineFor(req.Inbound, t.provider.Format, nativeAnthropic(t.provider), set.DefaultMaxTokens); !ok {
		if record {
			st.exclude(t, "", exclUnavailable, detailIncompatible, 0) // e.g. embeddings on an anthropic-format upstream
			g.obs.Excluded(detailIncompatible)
		}
		return nil
	}
	gates := uncachedGates{allLocked: true}
	now := g.clock.Now()
	mk := resilience.KeysForModel(t.provider.ID, t.model)
	for _, c := range s.Connections(t.provider.ID) {
		if !g.passesGates(c, t, req, st, mk, now, &gates) {
			continue
		}
		rt := g.reg.Runtime(c.ID)
		eligible = append(eligible, accounts.Candidate{ID: c.ID, Priority: c.Priority, CreatedAt: c.CreatedAt,
			BackoffLevel: g.res.Cooldowns.BackoffLevel(c.ID), LastUsedAt: rt.LastUsed(), InFlight: rt.InFlight(), SuccessRate: rt.SuccessRate()})
		conns = append(conns, c)
	}
	if len(eligible) == 0 {
		if record {
			g.excludeUncached(t, st, &gates)
		}
		return nil
	}
	strategy, sticky := set.FallbackStrategy, set.StickyLimit
	if ps, ok := set.ProviderStrategy[t.provider.ID]; ok {
		if ps.FallbackStrategy != "" {
			strategy = ps.FallbackStrategy
		}
		if ps.StickyLimit > 0 {
			sticky = ps.StickyLimit
		}
	}
	// The strategy's preferred connection (lkgp), when eligible.
	if t.prefConn != "" {
		if c := eligibleByID(conns, t.prefConn); c != nil {
			return c
		}
	}
	// An eligible affinity pin wins (a preference, never a wall: BD 7).
	if pin := g.pinID(req, t.provider.ID); pin != "" {
		if id, ok := g.traffic.Pins.Lookup(pin); ok {
			if c := eligibleByID(conns, id); c != nil {
				st.log.AffinityHit = true
				return c
			}
		}
	}
	id := g.sel.Pick(t.provider.ID, strategy, sticky, eligible, st.failedProv[t.provider.ID])
	return eligibleByID(conns, id)
}

// passesGates runs gates 7–12 for one connection in order and reports
// whether it is eligible, recording in gates why not.
func (g *Gateway) passesGates(c *services.Connection, t target, req *Request, st *attemptState, mk resilience.ModelKeys, now time.Time, gates *uncachedGates) bool {
	switch {
	case t.connID != "" && c.ID != t.connID:
		return false
	case !c.Enabled:
		gates.hard = detailDisabled
		return false
	case !req.Key.AllowsConnection(c.ID):
		gates.hard = detailNotAllowed
		return false
	case st.excluded[c.ID]:
		return false
	case req.LeaseConnID != "" && c.ID != req.LeaseConnID:
		return false
	case g.heldByOthers(c.ID, req):
		if !dispatchedOnce(st) {
			gates.hard = detailLeaseBusy
		}
		return false
	}
	b, blocked := g.res.BlockerKeys(t.provider.ID, c.ID, mk, now)
	if !blocked && g.quota != nil {
		if qb := g.quotaBlocker(c, now); qb != nil {
			b, blocked = *qb, true
		}
	}
	if !blocked {
		return true
	}
	gates.any = true
	if b.Waitable {
		st.noteWaitable(b.RetryAfter)
	}
	if b.RetryAfter <= 0 {
		gates.hard = b.Reason
		gates.allLocked = false
		return false
	}
	if b.Reason != exclModelLockout {
		gates.allLocked = false
	}
	if gates.soonestConn == "" || b.RetryAfter < gates.soonest.RetryAfter {
		gates.soonest, gates.soonestConn = b, c.ID
	}
	return false
}

// excludeUncached records why a target has no eligible connection: its
// soonest-ending blocker, else the last untimed reason, else none left.
func (g *Gateway) excludeUncached(t target, st *attemptState, gates *uncachedGates) {
	switch {
	case gates.soonestConn != "":
		reason, detail := exclUnavailable, gates.soonest.Reason
		if gates.soonest.Reason == exclModelLockout && gates.allLocked && gates.any {
			reason, detail = exclModelLockout, ""
		}
		st.exclude(t, gates.soonestConn, reason, detail, gates.soonest.RetryAfter)
		g.obs.Excluded(gates.soonest.Reason)
	case gates.hard != "":
		st.exclude(t, "", exclUnavailable, gates.hard, 0)
		g.obs.Excluded(gates.hard)
	default:
		st.exclude(t, "", exclNoConnection, "", 0)
	}
}

// eligibleByID finds id among the eligible connections. A linear scan: it
// runs at most three times per pick, and building a map per request cost
// more than the scans it saved.
func eligibleByID(conns []*services.Connection, id string) *services.Connection {
	if id == "" {
		return nil
	}
	for _, c := range conns {
		if c.ID == id {
			return c
		}
	}
	return nil
}
