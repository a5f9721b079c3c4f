package leases

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"switchyard/services"
)

// Leases in a fleet (scale-out §3.4 row 7). Several replicas share one
// store, whose transactions keep the exclusivity and the fence strict: an
// acquire on replica A and one on replica B for the same connection are
// serialised by the store (on PostgreSQL an advisory lock per lease
// transaction and the partial unique indexes). What each replica keeps in
// memory is a mirror that follows the others through the change feed:
//
//   - every lease write publishes ChangeLease after it committed; the
//     other replicas re-read the active rows, so their View — what
//     HeldByOthers and routing read without a lock — follows within the
//     notification latency, and unmanaged traffic avoids the connection;
//   - Check reads through to the store when the mirror has no live lease
//     of that owner, or one of another key or generation, before it
//     answers LEASE_REQUIRED or LEASE_FENCE_STALE: a client that acquired
//     through A and sends its next request to B is served at once;
//   - a store that cannot answer fails the lease call or the read-through
//     with its error (503 with Retry-After): a wall is never granted or
//     confirmed without its authority.

// Reader reads committed lease rows outside any lease transaction (no
// lock, no expiry write): the mirror's refresh and Check's read-through.
type Reader interface {
	// LiveByOwner returns the owner's active lease unexpired at now.
	LiveByOwner(ctx context.Context, ownerHash string, now time.Time) (Lease, bool, error)
	// LiveLeases returns every active lease unexpired at now.
	LiveLeases(ctx context.Context, now time.Time) ([]Lease, error)
}

type fleet struct {
	reader Reader
	feed   services.ChangeFeed
	// onError sees a change that could not be published (the write stands;
	// the others catch up at their next resync) or applied.
	onError func(error)
}

// Share makes the service one replica of a fleet sharing its store: the
// mirror is read through reader, every write is published on feed, and
// the other replicas' lease changes refresh the mirror. Call it once,
// before traffic. onError (may be nil) sees publish failures.
func (s *Leases) Share(reader Reader, feed services.ChangeFeed, onError func(error)) {
	s.fleet = &fleet{reader: reader, feed: feed, onError: onError}
	feed.Subscribe(services.ChangeLease, s.follow)
}

// leasePayload is what a ChangeLease carries: "<id> <state> <expires ms>".
func leasePayload(l Lease) string {
	return l.ID + " " + string(l.State) + " " + strconv.FormatInt(l.ExpiresAt.UnixMilli(), 10)
}

// parseLeasePayload reads leasePayload; ok is false for anything else.
func parseLeasePayload(p string) (id string, state State, expires time.Time, ok bool) {
	parts := strings.Fields(p)
	if len(parts) != 3 {
		return "", "", time.Time{}, false
	}
	ms, err := strconv.ParseInt(parts[2], 10, 64)
	if err != nil {
		return "", "", time.Time{}, false
	}
	return parts[0], State(parts[1]), time.UnixMilli(ms).UTC(), true
}

// announce publishes the rows a write changed, after its commit. Called
// without wmu: the local echo of the change must not wait for it.
func (s *Leases) announce(ctx context.Context, changed ...Lease) {
	if s.fleet == nil || len(changed) == 0 {
		return
	}
	c := services.Change{Kind: services.ChangeLease}
	if len(changed) == 1 {
		c.Key, c.Payload = changed[0].ConnectionID, leasePayload(changed[0])
	}
	if err := s.fleet.feed.Publish(context.WithoutCancel(ctx), c); err != nil && s.fleet.onError != nil {
		s.fleet.onError(fmt.Errorf("leases: publish %s: %w", c, err))
	}
}

// follow applies a lease change of the feed: another replica's write, or a
// resync (Key ""), refreshes the mirror from the store unless the mirror
// already holds what the change announces. This process's own changes were
// applied when they were written.
func (s *Leases) follow(ctx context.Context, c services.Change) error {
	if c.Origin == "" && c.Key != "" {
		return nil
	}
	if c.Key != "" && s.mirrors(c.Key, c.Payload) {
		return nil
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	return s.refresh(ctx)
}

// mirrors reports whether the mirror already shows the row a change of
// connection connID announces: the same active lease with the same expiry,
// or no longer that lease once it ended.
func (s *Leases) mirrors(connID, payload string) bool {
	id, state, expires, ok := parseLeasePayload(payload)
	if !ok {
		return false
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	cur, held := s.byConn[connID]
	if state == StateActive {
		return held && cur.ID == id && cur.ExpiresAt.Equal(expires)
	}
	return !held || cur.ID != id
}

// readThrough asks the store for the owner's live lease and, when the
// mirror did not change since seen (its changes count when the miss was
// read), patches the row in so the next check and HeldByOthers see it
// without waiting for the change feed.
func (s *Leases) readThrough(ctx context.Context, hash string, now time.Time, seen uint64) (Lease, bool, error) {
	l, ok, err := s.fleet.reader.LiveByOwner(ctx, hash, now)
	if err != nil {
		return Lease{}, false, fmt.Errorf("leases: read through: %w", err)
	}
	if !ok {
		return Lease{}, false, nil
	}
	s.mu.Lock()
	if s.changes == seen {
		s.patchLocked(l)
		s.publish()
	}
	s.mu.Unlock()
	return l, true, nil
}
