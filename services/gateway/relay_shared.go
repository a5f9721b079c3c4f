package gateway

import (
	"context"
	"fmt"
	"time"

	"switchyard/services"
)

// Context relay in a fleet (scale-out §3.4 row 16). A summary made through
// replica A must be injectable when the session's next request lands on B:
// every record write is published (the record itself may be too large for
// a notification, so receivers re-read its row), a record missing from
// memory is read through from the store once, and of several replicas that
// see a session reach the threshold together only the one that claims the
// summary in the store makes it.

// relayMissTTL is how long a record found missing in the store is not
// looked up again (unless a change for it arrives first): the read-through
// costs at most one query per session and combo per period.
const relayMissTTL = 10 * time.Second

// relayClaimFor bounds a summary claim: the summary call's 60 s timeout and
// a margin, so the claim of a replica that died lapses soon after.
const relayClaimFor = 90 * time.Second

// relayMissCap bounds the remembered misses; beyond it lapsed ones go.
const relayMissCap = 4096

// HandoffFleet is what the relay needs of a store that replicas share.
type HandoffFleet interface {
	// LoadHandoff returns the record id unexpired at now.
	LoadHandoff(ctx context.Context, id string, now time.Time) (Handoff, bool, error)
	// ClaimHandoff claims making id's summary until until; false when
	// another replica's claim is live at now.
	ClaimHandoff(ctx context.Context, id string, until, now time.Time) (bool, error)
	// ReleaseHandoffClaim ends a claim.
	ReleaseHandoffClaim(ctx context.Context, id string) error
}

type relayFleet struct {
	store HandoffFleet
	feed  services.ChangeFeed
	onErr func(error)
	miss  map[string]time.Time // id → when a lookup may ask the store again; under relay.mu
}

// ShareHandoffs makes the relay one replica of a fleet sharing the handoff
// store: record writes are published on feed, the other replicas' records
// are read when they announce them, a record missing here is read through,
// and summaries are claimed in the store. Call it after New (which loads
// Deps.Handoffs), before traffic. onErr (may be nil) sees failed publishes
// and reads.
func (g *Gateway) ShareHandoffs(store HandoffFleet, feed services.ChangeFeed, onErr func(error)) {
	g.relay.mu.Lock()
	g.relay.shared = &relayFleet{store: store, feed: feed, onErr: onErr, miss: map[string]time.Time{}}
	if g.relay.recs == nil {
		g.relay.busy, g.relay.recs = map[string]bool{}, map[string]*handoff{}
	}
	g.relay.mu.Unlock()
	feed.Subscribe(services.ChangeHandoff, g.followHandoff)
}

func (f *relayFleet) fail(err error) {
	if f.onErr != nil {
		f.onErr(err)
	}
}

// announceHandoff publishes a stored record's id (fleet only).
func (g *Gateway) announceHandoff(ctx context.Context, id string) {
	f := g.relay.shared
	if f == nil {
		return
	}
	if err := f.feed.Publish(ctx, services.Change{Kind: services.ChangeHandoff, Key: id}); err != nil {
		f.fail(fmt.Errorf("gateway: publish handoff: %w", err))
	}
}

// claimSummary claims making id's summary in the store (fleet only; a
// single process has its busy map). release ends the claim.
func (g *Gateway) claimSummary(id string) (release func(), ok bool) {
	f := g.relay.shared
	if f == nil {
		return func() {}, true
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	now := g.clock.Now()
	ok, err := f.store.ClaimHandoff(ctx, id, now.Add(relayClaimFor), now)
	if err != nil {
		f.fail(fmt.Errorf("gateway: claim handoff summary: %w", err))
		return nil, false
	}
	if !ok {
		return nil, false
	}
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := f.store.ReleaseHandoffClaim(ctx, id); err != nil {
			f.fail(fmt.Errorf("gateway: release handoff claim: %w", err))
		}
	}, true
}

// lockRecord takes relay.mu and returns the record id (nil if none). In a
// fleet a record missing here is read through from the store first (outside
// the lock), at most once per relayMissTTL per id. The caller unlocks.
func (g *Gateway) lockRecord(id string) *handoff {
	g.relay.mu.Lock()
	f := g.relay.shared
	now := g.clock.Now()
	if h := g.relay.recs[id]; h != nil || f == nil || now.Before(f.miss[id]) {
		return h
	}
	g.relay.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	rec, found, err := f.store.LoadHandoff(ctx, id, now)
	cancel()
	if err != nil {
		f.fail(fmt.Errorf("gateway: read handoff through: %w", err))
	}
	g.relay.mu.Lock()
	switch {
	case found:
		g.installLocked(rec)
		delete(f.miss, id)
	case err == nil:
		if len(f.miss) >= relayMissCap {
			for k, until := range f.miss {
				if !now.Before(until) {
					delete(f.miss, k)
				}
			}
		}
		f.miss[id] = now.Add(relayMissTTL)
	}
	return g.relay.recs[id]
}

// installLocked puts a stored record into memory. The same record (same
// expiry) keeps the destinations either side gave it; a newer summary
// replaces the old one. Called with relay.mu held.
func (g *Gateway) installLocked(h Handoff) {
	cur := g.relay.recs[h.ID]
	rec := &handoff{HandoffSummary: h.Summary, source: h.Source, expires: h.ExpiresAt, injected: map[string]bool{}}
	if cur != nil && cur.expires.Equal(h.ExpiresAt) {
		for c := range cur.injected {
			rec.injected[c] = true
		}
	}
	for _, c := range h.Injected {
		rec.injected[c] = true
	}
	g.relay.recs[h.ID] = rec
}

// followHandoff re-reads a record another replica wrote; a resync merges
// every stored record in. This process's own writes are skipped.
func (g *Gateway) followHandoff(ctx context.Context, c services.Change) error {
	f := g.relay.shared
	now := g.clock.Now()
	if c.Key == "" {
		hs, err := g.relay.store.LoadHandoffs(ctx, now)
		if err != nil {
			return fmt.Errorf("gateway: reload handoffs: %w", err)
		}
		g.relay.mu.Lock()
		for _, h := range hs {
			g.installLocked(h)
		}
		clear(f.miss)
		g.relay.mu.Unlock()
		return nil
	}
	if c.Origin == "" {
		return nil
	}
	h, found, err := f.store.LoadHandoff(ctx, c.Key, now)
	if err != nil {
		return fmt.Errorf("gateway: read handoff %s: %w", c.Key, err)
	}
	g.relay.mu.Lock()
	defer g.relay.mu.Unlock()
	delete(f.miss, c.Key)
	if found {
		g.installLocked(h)
	}
	return nil
}
