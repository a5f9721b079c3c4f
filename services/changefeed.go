package services

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
)

// ChangeKind names what changed in a Change. Each kind has one set of
// subscribers that cache it; a subscriber of one kind never sees another.
type ChangeKind string

// The kinds that admin writes publish. Payloads are the Change* constants
// below; Key is the item's id ("" = every item of the kind).
const (
	// ChangeConnection: a connection was created, edited (enabled, limits,
	// credentials, test result) or deleted. Key = connection id.
	ChangeConnection ChangeKind = "connection"
	// ChangeCombo: a combo was created, edited, reordered or deleted.
	// Key = combo id.
	ChangeCombo ChangeKind = "combo"
	// ChangeKey: a client API key was created, edited, revoked or deleted.
	// Key = key id.
	ChangeKey ChangeKind = "key"
	// ChangeCatalogue: a custom provider or its model list changed. Key =
	// provider id.
	ChangeCatalogue ChangeKind = "catalogue"
	// ChangeSettings: a settings document was stored. Key = its store key
	// (SettingsResilience, SettingsGeneral), Version = its new revision.
	ChangeSettings ChangeKind = "settings"

	// The resilience decisions (20-resilience §2, §4, §7, §12), published
	// by the replica whose compare-and-set wrote them; Payload carries the
	// decision so receivers need no re-read (services/resilience decodes
	// it). Key "" asks for a reload of the kind.

	// ChangeConnectionState: a connection's cooldown, backoff or terminal
	// state. Key = connection id, Version = its state_version.
	ChangeConnectionState ChangeKind = "connection_state"
	// ChangeModelLockout: a model lockout was set, extended, decayed or
	// deleted. Key = the lock key, Version = its row version.
	ChangeModelLockout ChangeKind = "model_lockout"
	// ChangeBreaker: a provider breaker's state or count. Key = provider
	// id, Version = its generation.
	ChangeBreaker ChangeKind = "breaker"
)

// The kinds of learned and session state a fleet shares (scale-out §3.4:
// leases, pins, LKGP, quota windows, tool limits, handoffs, learned rate
// limits). Their writers publish only where replicas share one database;
// embedded mode has nobody else to tell.
const (
	// ChangeLease: exclusive leases changed. Key = connection id of the
	// lease that changed ("" = several), Payload = leases' summary of the
	// row (id, state, expiry); receivers re-read the active leases.
	ChangeLease ChangeKind = "lease"
	// ChangePin: a session-affinity pin or combo session preference was
	// written (Payload = the pin) or deleted (ChangeDeleted). Key = pin id;
	// Key "" with ChangeDeleted = every pin was cleared.
	ChangePin ChangeKind = "pin"
	// ChangeLKGP: a combo's last-known-good record was written (Payload =
	// the record) or deleted (ChangeDeleted). Key = combo id.
	ChangeLKGP ChangeKind = "lkgp"
	// ChangeQuota: a connection's quota windows were written. Key =
	// connection id, Payload = the windows as written.
	ChangeQuota ChangeKind = "quota"
	// ChangeToolLimit: a learned tool limit was written (Payload = the
	// limit); Key "" = the limits were cleared.
	ChangeToolLimit ChangeKind = "toollimit"
	// ChangeHandoff: a context-relay record was written. Key = its id; no
	// payload (a summary may not fit): receivers re-read the row.
	ChangeHandoff ChangeKind = "handoff"
	// ChangeLearnedLimit: a learned rate limit was stored. Key = limiter
	// key, Payload = the limit.
	ChangeLearnedLimit ChangeKind = "learnedlimit"
)

// ChangeDeleted is the Payload of a change that removed its item; the
// subscribers drop what they hold for it. Any other payload means the item
// was created or changed and must be re-read.
const ChangeDeleted = "deleted"

// Change says that state some component caches was written to its store.
// It carries only what a receiver needs to know which cache is stale (and,
// for small decisions, the new value): receivers re-read the store. A
// Change must fit a PostgreSQL NOTIFY payload (under 8000 bytes encoded).
type Change struct {
	Kind ChangeKind
	// Key is the id of the changed item; "" means every item of Kind (a
	// resync after lost notifications, or a bulk write).
	Key string
	// Version orders changes of one item where the writer has a counter
	// (the settings revision); receivers ignore a version at or below the
	// one they hold. 0 = unversioned: always apply.
	Version int64
	// Payload is small kind-specific data: ChangeDeleted, "", or the
	// encoded value the kind's comment names.
	Payload string
	// Origin is the replica that published the change when it came from
	// another one; "" for a change published (or resynced) in this process.
	// A cache that already applied its own write skips its local echo by it.
	Origin string
}

func (c Change) String() string {
	s := string(c.Kind)
	if c.Key != "" {
		s += ":" + c.Key
	}
	if c.Version != 0 {
		s += fmt.Sprintf("@%d", c.Version)
	}
	if c.Payload != "" {
		s += " " + c.Payload
	}
	return s
}

// ChangeHandler applies one change to a cache. Handlers must be idempotent
// (a change may arrive twice, or after a newer one was already read) and
// must not hold a lock the publisher may hold. An error says the cache could
// not be refreshed; it is returned to a local publisher (so its write
// reports it) and counted.
type ChangeHandler func(ctx context.Context, c Change) error

// ChangeFeed carries config and settings changes from the writer to every
// component that caches them (in this process today, across replicas later:
// scale-out §3.3). Writers Publish after the store write committed; caches
// Subscribe per kind. Nothing on the request path publishes or waits.
//
// Contract for implementations:
//   - Publish delivers to the subscribers of this process before it
//     returns (an admin's next request sees its own write), in subscription
//     order, and returns their errors joined. A shared implementation then
//     sends the change to the other replicas; it returns an error wrapping
//     ErrUnavailable when it could not, and the others catch up at their
//     next Resync.
//   - Changes from other replicas are delivered on the implementation's own
//     goroutine, one at a time per kind.
//   - Resync delivers Change{Kind: kind} (Key "") to every subscriber of
//     kind, which then reloads everything it caches of that kind; a shared
//     implementation calls it itself after reconnecting.
type ChangeFeed interface {
	Publish(ctx context.Context, c Change) error
	// Subscribe adds h to the subscribers of kind, for the feed's lifetime.
	Subscribe(kind ChangeKind, h ChangeHandler)
	Resync(ctx context.Context, kind ChangeKind) error
}

// ChangeFeedStats counts what a feed delivered, by kind.
type ChangeFeedStats struct {
	Published     map[ChangeKind]int64
	HandlerErrors map[ChangeKind]int64
}

// LocalFeed is the in-process ChangeFeed: Publish calls the subscribers of
// the change's kind synchronously, in the publisher's goroutine. Publish and
// Resync take no lock (the subscriber lists are copied on write), so a
// handler may publish in turn.
type LocalFeed struct {
	mu   sync.Mutex // serialises Subscribe
	subs atomic.Pointer[map[ChangeKind][]ChangeHandler]

	statsMu sync.Mutex
	stats   ChangeFeedStats
	// onError, when set, sees every handler error (logging, metrics).
	onError func(c Change, err error)
}

var _ ChangeFeed = (*LocalFeed)(nil)

// NewLocalFeed returns a feed with no subscribers. onError (may be nil) is
// told of every handler error, besides the publisher.
func NewLocalFeed(onError func(c Change, err error)) *LocalFeed {
	f := &LocalFeed{onError: onError,
		stats: ChangeFeedStats{Published: map[ChangeKind]int64{}, HandlerErrors: map[ChangeKind]int64{}}}
	f.subs.Store(&map[ChangeKind][]ChangeHandler{})
	return f
}

// Subscribe adds h to the subscribers of kind.
func (f *LocalFeed) Subscribe(kind ChangeKind, h ChangeHandler) {
	f.mu.Lock()
	defer f.mu.Unlock()
	cur := *f.subs.Load()
	next := make(map[ChangeKind][]ChangeHandler, len(cur)+1)
	for k, hs := range cur {
		next[k] = hs
	}
	next[kind] = append(append([]ChangeHandler(nil), cur[kind]...), h)
	f.subs.Store(&next)
}

// Publish delivers c to the subscribers of c.Kind and returns their errors
// joined.
func (f *LocalFeed) Publish(ctx context.Context, c Change) error {
	if c.Kind == "" {
		return errors.New("services: publish a change without a kind")
	}
	return f.deliver(ctx, c)
}

// Resync delivers Change{Kind: kind} to the subscribers of kind.
func (f *LocalFeed) Resync(ctx context.Context, kind ChangeKind) error {
	return f.deliver(ctx, Change{Kind: kind})
}

func (f *LocalFeed) deliver(ctx context.Context, c Change) error {
	var errs []error
	for _, h := range (*f.subs.Load())[c.Kind] {
		if err := h(ctx, c); err != nil {
			errs = append(errs, err)
			if f.onError != nil {
				f.onError(c, err)
			}
		}
	}
	f.statsMu.Lock()
	f.stats.Published[c.Kind]++
	f.stats.HandlerErrors[c.Kind] += int64(len(errs))
	f.statsMu.Unlock()
	if len(errs) > 0 {
		return fmt.Errorf("services: apply change %s: %w", c, errors.Join(errs...))
	}
	return nil
}

// Stats returns a copy of the delivery counters.
func (f *LocalFeed) Stats() ChangeFeedStats {
	f.statsMu.Lock()
	defer f.statsMu.Unlock()
	out := ChangeFeedStats{Published: make(map[ChangeKind]int64, len(f.stats.Published)),
		HandlerErrors: make(map[ChangeKind]int64, len(f.stats.HandlerErrors))}
	for k, v := range f.stats.Published {
		out.Published[k] = v
	}
	for k, v := range f.stats.HandlerErrors {
		out.HandlerErrors[k] = v
	}
	return out
}

// publish is the writers' call: it publishes c on feed (nil = nobody
// caches, nothing to do).
func publish(ctx context.Context, feed ChangeFeed, c Change) error {
	if feed == nil {
		return nil
	}
	return feed.Publish(ctx, c)
}
