// Package leases owns exclusive session leases (20-resilience §6): durable,
// exclusive ownership of one connection by one managed client session,
// behind a generation fence.
//
// The state machine is written once, here, against Tx — the view of the
// exclusive_leases rows inside one BEGIN IMMEDIATE transaction. TxStore turns
// any Tx runner into a Store: models supplies the database one, the test
// kit (internal/testkit/leasestore) an in-memory one. Every Store operation
// first expires active rows whose expiry has passed. The partial unique indexes (one active row per owner,
// one per connection) are the final guard: an insert they reject becomes a
// lease error, never a 500.
//
// Leases keeps a memory mirror of the active rows, refreshed on every write,
// for the request path (fence checks, routing's HeldByOthers), and publishes
// its by-connection half as an immutable View that readers load without a
// lock (routing's per-pick lease filter). Replicas sharing one store (Share,
// fleet.go) also refresh it on each other's writes, and Check reads through
// to the store before refusing a lease its mirror does not know.
//
// The package imports the standard library, switchyard/services and
// switchyard/services/events only; it must not import models, handlers, app
// or any ORM or HTTP framework.
package leases

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"switchyard/services"
	"switchyard/services/events"
)

// Lease TTL bounds (acquire and renew ttlMs): default 120 000 ms, clamped to
// 1 000–1 800 000 ms.
const (
	DefaultTTL = 120 * time.Second
	MinTTL     = time.Second
	MaxTTL     = 30 * time.Minute
)

// MaxGeneration is the largest fence generation, 2^53 − 1, so it survives a
// JSON number in every client.
const MaxGeneration int64 = 1<<53 - 1

// Retry-After bounds of LEASE_CAPACITY_UNAVAILABLE.
const (
	minRetryAfter = time.Second
	maxRetryAfter = 120 * time.Second
)

// Headers carrying the lease context. Both are stripped from request logs,
// stored snapshots and upstream headers.
const (
	OwnerHeader      = "X-Switchyard-Lease-Owner"
	GenerationHeader = "X-Switchyard-Lease-Generation"
)

// WaitingForCapacity is the top-level "status" of a LEASE_CAPACITY_UNAVAILABLE body.
const WaitingForCapacity = "waiting_for_capacity"

// State is a lease row's state.
type State string

// Lease states.
const (
	StateActive      State = "active"
	StateReleased    State = "released"
	StateExpired     State = "expired"
	StateInvalidated State = "invalidated"
)

// End reasons.
const (
	ReasonOwnerExit            = "owner_exit"
	ReasonClientCancelled      = "client_cancelled"
	ReasonTTLExpired           = "ttl_expired"
	ReasonConnectionIneligible = "connection_ineligible"
	ReasonHealthOrCooldown     = "health_or_cooldown"
	ReasonModelIneligible      = "model_ineligible"
	ReasonQuotaUnavailable     = "quota_unavailable"
	ReasonAuthorizationChanged = "authorization_changed"
	ReasonManagedKeyRevoked    = "managed_key_revoked"
	ReasonAdminEnded           = "admin_ended"
)

// invalidationReasons are the reasons Invalidate and InvalidateKey accept.
var invalidationReasons = []string{ReasonConnectionIneligible, ReasonHealthOrCooldown,
	ReasonModelIneligible, ReasonQuotaUnavailable, ReasonAuthorizationChanged,
	ReasonManagedKeyRevoked, ReasonAdminEnded}

// transitionReasons are the reasons a binding may be moved for.
var transitionReasons = []string{ReasonHealthOrCooldown, ReasonModelIneligible, ReasonQuotaUnavailable}

// Holder is a lease as routing reads it from a View: the key holding the
// connection and when the lease ends.
type Holder struct {
	KeyID     string
	ExpiresAt time.Time
}

// Live reports whether the lease is unexpired at now, an instant of
// Leases.Now: Lease.Live of the active row it mirrors.
func (h Holder) Live(now time.Time) bool { return now.Before(h.ExpiresAt) }

// View is an immutable snapshot of the mirror's active leases by connection
// id. Rows past their expiry but not yet swept are in it: readers judge
// liveness with Holder.Live at Leases.Now, as HeldByOthers does. Every
// change of the mirror publishes a new View with a higher Version, so a
// reader that keeps what it derived from one View knows it is current
// while Leases.View still returns that View (pointer or Version equal) and
// Leases.Now has not reached the ExpiresAt of a lease it counted as live.
type View struct {
	Version uint64
	ByConn  map[string]Holder // read-only
}

// Lease is one exclusive_leases row. Reused, TTL and Ended are not stored:
// they describe the acquire, renew or release that returned the lease.
type Lease struct {
	ID           string
	OwnerHash    string // SHA-256 hex of the owner token; the token is never kept
	KeyID        string
	Provider     string
	ConnectionID string
	Generation   int64
	State        State
	AcquiredAt   time.Time
	RenewedAt    time.Time
	ExpiresAt    time.Time
	EndedAt      time.Time // zero while active
	EndReason    string    // "" while active

	Reused bool          // acquire renewed the owner's existing lease
	TTL    time.Duration // effective TTL of the acquire or renew
	Ended  bool          // release ended the lease (false when it had ended before)
}

// Live reports whether the lease is active and unexpired at now.
func (l Lease) Live(now time.Time) bool {
	return l.State == StateActive && now.Before(l.ExpiresAt)
}

// Error codes of 10-gateway-api §9.3, from the table in services/errcodes.go.
const (
	CodeContextRequired         = services.CodeLeaseContextRequired
	CodeContextInvalid          = services.CodeLeaseContextInvalid
	CodeRequired                = services.CodeLeaseRequired
	CodeFenceStale              = services.CodeLeaseFenceStale
	CodeConnectionMismatch      = services.CodeLeaseConnectionMismatch
	CodeUnsupportedRoute        = services.CodeLeaseUnsupportedRoute
	CodeScopeRequired           = services.CodeLeaseScopeRequired
	CodeKeyConfigurationInvalid = services.CodeLeaseKeyConfigurationInvalid
	CodeCapacityUnavailable     = services.CodeLeaseCapacityUnavailable
	CodeActionInvalid           = services.CodeLeaseActionInvalid
	CodeOwnerConflict           = services.CodeLeaseOwnerConflict
)

// Error is a lease refusal with its code and HTTP status of 10-gateway-api
// §9.3. RetryAfter is set on LEASE_CAPACITY_UNAVAILABLE only.
type Error struct {
	Code       string
	Status     int
	RetryAfter time.Duration
	Message    string
}

func (e *Error) Error() string { return e.Message }

// BodyStatus is the top-level "status" of the error body: "waiting_for_capacity"
// for LEASE_CAPACITY_UNAVAILABLE, else "".
func (e *Error) BodyStatus() string {
	if e.Code == CodeCapacityUnavailable {
		return WaitingForCapacity
	}
	return ""
}

// GatewayError converts the refusal into the /v1 error the error handler
// writes; Retry-After is whole seconds, rounded up.
func (e *Error) GatewayError() *services.GatewayError {
	return &services.GatewayError{Status: e.Status, Code: e.Code, Message: e.Message,
		RetryAfter: int((e.RetryAfter + time.Second - 1) / time.Second), TopStatus: e.BodyStatus()}
}

// newError builds a refusal; its status is the code's (services.StatusOfCode).
func newError(code, msg string) *Error {
	return &Error{Code: code, Status: services.StatusOfCode(code), Message: msg}
}

func errContextRequired(what string) *Error {
	return newError(CodeContextRequired,
		"This key is lease-managed: send the "+what+" header.")
}

func errContextInvalid(what string) *Error {
	return newError(CodeContextInvalid, "The "+what+" header is malformed.")
}

func errActionInvalid(field, msg string) *Error {
	return newError(CodeActionInvalid, "Invalid lease action field "+field+": "+msg)
}

func errRequired() *Error {
	return newError(CodeRequired,
		"No active lease for this owner and key; acquire one at POST /v1/session-leases.")
}

func errFenceStale() *Error {
	return newError(CodeFenceStale,
		"The lease generation is stale, or the lease is inactive or belongs to another key.")
}

func errOwnerConflict() *Error {
	return newError(CodeOwnerConflict,
		"This lease owner holds an active lease under another key.")
}

func errCapacity(retry time.Duration) *Error {
	e := newError(CodeCapacityUnavailable, fmt.Sprintf(
		"Every eligible connection is leased by another session; retry in %d s.", int(retry/time.Second)))
	e.RetryAfter = retry
	return e
}

// ErrNoEligible means no candidate connection was given: the caller answers
// with the normal routing error (20-resilience §14), not a lease conflict.
var ErrNoEligible = errors.New("leases: no eligible connection")

// ErrDuplicate is what a Tx returns (wrapped) when a partial unique index
// rejects an inserted active row.
var ErrDuplicate = errors.New("leases: duplicate active lease")

var (
	ownerSyntax      = regexp.MustCompile(`^vlo_[A-Za-z0-9_-]{43}$`)
	generationSyntax = regexp.MustCompile(`^[1-9][0-9]*$`)
)

// ParseOwner validates the X-Switchyard-Lease-Owner value ("vlo_" + 43
// base64url characters) and returns it: empty → LEASE_CONTEXT_REQUIRED,
// malformed → LEASE_CONTEXT_INVALID.
func ParseOwner(v string) (string, error) {
	switch {
	case v == "":
		return "", errContextRequired(OwnerHeader)
	case !ownerSyntax.MatchString(v):
		return "", errContextInvalid(OwnerHeader)
	}
	return v, nil
}

// HashOwner is what is stored of an owner token: its SHA-256, lowercase hex.
func HashOwner(owner string) string { return services.SHA256Hex(owner) }

// ParseGeneration validates the X-Switchyard-Lease-Generation value
// (^[1-9][0-9]*$, at most 2^53 − 1): empty → LEASE_CONTEXT_REQUIRED,
// malformed or too large → LEASE_CONTEXT_INVALID.
func ParseGeneration(v string) (int64, error) {
	if v == "" {
		return 0, errContextRequired(GenerationHeader)
	}
	if len(v) > 16 || !generationSyntax.MatchString(v) {
		return 0, errContextInvalid(GenerationHeader)
	}
	g, err := strconv.ParseInt(v, 10, 64)
	if err != nil || g > MaxGeneration {
		return 0, errContextInvalid(GenerationHeader)
	}
	return g, nil
}

// ClampTTL applies the acquire/renew TTL rule: 0 → DefaultTTL, else clamped
// to MinTTL–MaxTTL.
func ClampTTL(d time.Duration) time.Duration {
	if d == 0 {
		return DefaultTTL
	}
	return min(max(d, MinTTL), MaxTTL)
}

// CheckKey refuses keys that may not hold leases: without lease:exclusive →
// 403 LEASE_SCOPE_REQUIRED; with it but no allowed connection → 403
// LEASE_KEY_CONFIGURATION_INVALID.
func CheckKey(key services.APIKey) error {
	if !key.HasScope(services.ScopeLeaseExclusive) {
		return newError(CodeScopeRequired,
			"This key lacks the lease:exclusive scope needed for lease headers and /v1/session-leases.")
	}
	if len(key.AllowedConnections) == 0 {
		return newError(CodeKeyConfigurationInvalid,
			"This key has lease:exclusive but no allowed connections; an admin must allow at least one.")
	}
	return nil
}

// Leases is the lease service: lifecycle operations for /v1/session-leases,
// the per-request fence check, invalidation hooks and routing's fast read.
//
// Lock order: wmu, then mu. wmu serialises this process's writes together
// with the mirror refresh that follows each, so the mirror never goes back
// to an older snapshot; mu guards the mirror maps and is never held across I/O.
// view is byConn as a View, republished under mu with every change of
// byConn (refresh and wrote, the only writers of the mirror).
type Leases struct {
	store Store
	clock services.Clock

	// fleet is set when replicas share the store (Share): the mirror then
	// also follows the other replicas' writes, and Check reads through to
	// the store on a miss. nil in a single process.
	fleet *fleet

	wmu     sync.Mutex
	mu      sync.RWMutex
	byConn  map[string]Lease
	byOwner map[string]Lease
	// changes counts mutations of the two maps (under mu), so a read-through
	// result is patched in only when no newer state replaced the mirror
	// while it was read.
	changes uint64
	view    atomic.Pointer[View]

	// Events receives the leases that end on this process: released,
	// invalidated, or gone from the mirror past their expiry. nil records
	// nothing. Set before use.
	Events events.Recorder
}

// New builds the service with an empty mirror; call Load at start.
func New(store Store, clock services.Clock) *Leases {
	s := &Leases{store: store, clock: clock, byConn: map[string]Lease{}, byOwner: map[string]Lease{}}
	s.view.Store(&View{Version: 1, ByConn: map[string]Holder{}})
	return s
}

func (s *Leases) now() time.Time { return s.clock.Now().UTC().Truncate(time.Millisecond) }

// Now is the instant lease liveness is judged at (the service's clock, in
// UTC, truncated to the millisecond): pass it to Holder.Live.
func (s *Leases) Now() time.Time { return s.now() }

// View returns the current snapshot of active leases by connection, without
// a lock or an allocation. Never nil; callers must not modify it.
func (s *Leases) View() *View { return s.view.Load() }

// Version is View().Version: it grows with every change of the mirror's
// active leases (grant, renew, release, transition, invalidation, load,
// expiry sweep).
func (s *Leases) Version() uint64 { return s.view.Load().Version }

// publish republishes byConn as a View when it differs from the current
// one (a write's reload after its patch usually changes nothing). Called
// with mu held for writing, after every change of byConn.
func (s *Leases) publish() {
	cur := s.view.Load()
	same := len(cur.ByConn) == len(s.byConn)
	for id, l := range s.byConn {
		if !same {
			break
		}
		h, ok := cur.ByConn[id]
		same = ok && h.KeyID == l.KeyID && h.ExpiresAt.Equal(l.ExpiresAt)
	}
	if same {
		return
	}
	m := make(map[string]Holder, len(s.byConn))
	for id, l := range s.byConn {
		m[id] = Holder{KeyID: l.KeyID, ExpiresAt: l.ExpiresAt}
	}
	s.view.Store(&View{Version: cur.Version + 1, ByConn: m})
}

// Load fills the mirror from the store (start-up, restart restore).
func (s *Leases) Load(ctx context.Context) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	return s.refresh(ctx)
}

func (s *Leases) refresh(ctx context.Context) error {
	var active []Lease
	var err error
	if s.fleet != nil {
		// The committed rows, without the lease lock: every write that
		// committed before this read is in it.
		active, err = s.fleet.reader.LiveLeases(ctx, s.now())
	} else {
		active, err = s.store.ListActive(ctx, s.now())
	}
	if err != nil {
		return fmt.Errorf("leases: load active leases: %w", err)
	}
	byConn := make(map[string]Lease, len(active))
	byOwner := make(map[string]Lease, len(active))
	for _, l := range active {
		l.Reused, l.TTL = false, 0
		byConn[l.ConnectionID], byOwner[l.OwnerHash] = l, l
	}
	s.mu.Lock()
	s.byConn, s.byOwner = byConn, byOwner
	s.changes++
	s.publish()
	s.mu.Unlock()
	return nil
}

// heldLocked is the mirror's leases by id, for recordExpired; nil without
// Events. Called with mu held.
func (s *Leases) heldLocked() map[string]Lease {
	if s.Events == nil {
		return nil
	}
	m := make(map[string]Lease, len(s.byConn))
	for _, l := range s.byConn {
		m[l.ID] = l
	}
	return m
}

// recordExpired records the leases of before (heldLocked ahead of this
// process's write) that the write and the reload after it took out of the
// mirror past their expiry: they ran out of time. Rows the write changed
// itself are recorded by the caller.
func (s *Leases) recordExpired(before map[string]Lease, changed []Lease) {
	if len(before) == 0 {
		return
	}
	for _, l := range changed {
		delete(before, l.ID)
	}
	now := s.now()
	s.mu.RLock()
	for _, l := range s.byConn {
		delete(before, l.ID)
	}
	s.mu.RUnlock()
	for _, l := range before {
		if !now.Before(l.ExpiresAt) {
			s.record(l, ReasonTTLExpired, "")
		}
	}
}

// record hands one ended lease to Events; an admin end is caused by
// "admin". actor names the admin whose request ended it, directly or by
// changing its connection or key ("" when none did).
func (s *Leases) record(l Lease, reason, actor string) {
	if s.Events == nil {
		return
	}
	if reason == ReasonAdminEnded {
		reason = events.CauseAdmin
	}
	s.Events.Record(events.Event{Type: events.LeaseEnded, Provider: l.Provider, ConnectionID: l.ConnectionID,
		LeaseID: l.ID, Cause: reason, Actor: actor})
}

// recordEnded records the rows a write ended (invalidations, a release).
func (s *Leases) recordEnded(ctx context.Context, ls []Lease) {
	for _, l := range ls {
		if l.State != StateActive {
			s.record(l, l.EndReason, events.ActorOf(ctx))
		}
	}
}

// wrote updates the mirror after a successful write: first with the rows
// the write returned, then with a full reload (which also sees writers
// sharing the store). If the reload fails the patched mirror stands.
func (s *Leases) wrote(ctx context.Context, changed ...Lease) {
	s.mu.Lock()
	before := s.heldLocked()
	for _, l := range changed {
		s.patchLocked(l)
	}
	s.publish()
	s.mu.Unlock()
	_ = s.refresh(context.WithoutCancel(ctx))
	s.recordExpired(before, changed)
}

// patchLocked puts one row into the mirror: an active row replaces what
// its owner and its connection held, an ended one leaves. Called with mu
// held for writing; the caller publishes.
func (s *Leases) patchLocked(l Lease) {
	s.changes++
	l.Reused, l.TTL = false, 0
	if cur, ok := s.byOwner[l.OwnerHash]; ok && cur.ID != l.ID {
		if s.byConn[cur.ConnectionID].ID == cur.ID {
			delete(s.byConn, cur.ConnectionID)
		}
	}
	if l.State == StateActive {
		if cur, ok := s.byConn[l.ConnectionID]; ok && cur.ID != l.ID && s.byOwner[cur.OwnerHash].ID == cur.ID {
			delete(s.byOwner, cur.OwnerHash)
		}
		s.byConn[l.ConnectionID], s.byOwner[l.OwnerHash] = l, l
		return
	}
	if s.byConn[l.ConnectionID].ID == l.ID {
		delete(s.byConn, l.ConnectionID)
	}
	if s.byOwner[l.OwnerHash].ID == l.ID {
		delete(s.byOwner, l.OwnerHash)
	}
}

// Acquire takes a lease for owner on the first free candidate (eligible
// connection ids of provider in preference order), or renews the owner's
// lease under the same generation (Reused) when its connection is still a
// candidate. ttl 0 means DefaultTTL; it is clamped to MinTTL–MaxTTL and
// returned in Lease.TTL. Candidates the key does not allow are ignored; none
// left → ErrNoEligible. All held by others → 429 LEASE_CAPACITY_UNAVAILABLE
// with RetryAfter = time to the earliest of their expiries, 1–120 s.
func (s *Leases) Acquire(ctx context.Context, key services.APIKey, owner string, provider string, candidates []string, ttl time.Duration) (Lease, error) {
	hash, err := s.context(key, owner)
	if err != nil {
		return Lease{}, err
	}
	ttl = ClampTTL(ttl)
	allowed := allowedCandidates(key, candidates)
	if len(allowed) == 0 {
		return Lease{}, ErrNoEligible
	}
	s.wmu.Lock()
	l, err := s.store.Acquire(ctx, AcquireRequest{OwnerHash: hash, KeyID: key.ID, Provider: provider,
		Candidates: allowed, TTL: ttl, Now: s.now()})
	if err != nil {
		s.wmu.Unlock()
		return Lease{}, err
	}
	s.wrote(ctx, l)
	s.wmu.Unlock()
	s.announce(ctx, l)
	l.TTL = ttl
	return l, nil
}

// Transition moves the owner's binding, which is no longer eligible for the
// request's model, to the first free candidate under the same generation;
// the old row ends invalidated with reason (health_or_cooldown,
// model_ineligible or quota_unavailable). The new row keeps the old expiry.
// No candidate → ErrNoEligible and the lease stays; all held → 429 as in
// Acquire, and the lease stays. No active lease → LEASE_REQUIRED; another key
// or generation → LEASE_FENCE_STALE.
func (s *Leases) Transition(ctx context.Context, key services.APIKey, owner string, generation int64, provider string, candidates []string, reason string) (Lease, error) {
	hash, err := s.context(key, owner)
	if err != nil {
		return Lease{}, err
	}
	if generation < 1 || generation > MaxGeneration {
		return Lease{}, errContextInvalid(GenerationHeader)
	}
	if !slices.Contains(transitionReasons, reason) {
		return Lease{}, fmt.Errorf("leases: transition reason %q not allowed", reason)
	}
	allowed := allowedCandidates(key, candidates)
	if len(allowed) == 0 {
		return Lease{}, ErrNoEligible
	}
	s.wmu.Lock()
	l, err := s.store.Acquire(ctx, AcquireRequest{OwnerHash: hash, KeyID: key.ID, Provider: provider,
		Candidates: allowed, Now: s.now(), Generation: generation, ReplaceReason: reason})
	if err != nil {
		s.wmu.Unlock()
		return Lease{}, err
	}
	s.wrote(ctx, l)
	s.wmu.Unlock()
	s.announce(ctx, l)
	if s.Events != nil {
		s.Events.Record(events.Event{Type: events.LeaseMoved, Provider: l.Provider, ConnectionID: l.ConnectionID,
			LeaseID: l.ID, Cause: reason, Actor: events.ActorOf(ctx)})
	}
	return l, nil
}

// Renew extends the owner's active lease of generation under key by ttl
// (0 → DefaultTTL, clamped). Anything else → 409 LEASE_FENCE_STALE.
func (s *Leases) Renew(ctx context.Context, key services.APIKey, owner string, generation int64, ttl time.Duration) (Lease, error) {
	hash, err := s.fenceArgs(key, owner, generation)
	if err != nil {
		return Lease{}, err
	}
	ttl = ClampTTL(ttl)
	s.wmu.Lock()
	l, err := s.store.Renew(ctx, FenceRequest{OwnerHash: hash, KeyID: key.ID, Generation: generation, TTL: ttl, Now: s.now()})
	if err != nil {
		s.wmu.Unlock()
		return Lease{}, err
	}
	s.wrote(ctx, l)
	s.wmu.Unlock()
	s.announce(ctx, l)
	l.TTL = ttl
	return l, nil
}

// Release ends the owner's lease of generation under key with reason
// (owner_exit when "", or client_cancelled). Releasing an ended lease again
// returns it unchanged; a generation never held under key → 409
// LEASE_FENCE_STALE.
func (s *Leases) Release(ctx context.Context, key services.APIKey, owner string, generation int64, reason string) (Lease, error) {
	hash, err := s.fenceArgs(key, owner, generation)
	if err != nil {
		return Lease{}, err
	}
	reason = cmp.Or(reason, ReasonOwnerExit)
	if reason != ReasonOwnerExit && reason != ReasonClientCancelled {
		return Lease{}, errActionInvalid("reason", "use owner_exit or client_cancelled.")
	}
	s.wmu.Lock()
	l, err := s.store.Release(ctx, FenceRequest{OwnerHash: hash, KeyID: key.ID, Generation: generation, Reason: reason, Now: s.now()})
	if err != nil {
		s.wmu.Unlock()
		return Lease{}, err
	}
	s.wrote(ctx, l)
	s.wmu.Unlock()
	s.announce(ctx, l)
	if l.Ended {
		s.recordEnded(ctx, []Lease{l})
	}
	return l, nil
}

// Status returns the owner's active lease of generation under key; an
// inactive, foreign or stale one → 409 LEASE_FENCE_STALE.
func (s *Leases) Status(ctx context.Context, key services.APIKey, owner string, generation int64) (Lease, error) {
	hash, err := s.fenceArgs(key, owner, generation)
	if err != nil {
		return Lease{}, err
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	return s.store.Status(ctx, FenceRequest{OwnerHash: hash, KeyID: key.ID, Generation: generation, Now: s.now()})
}

// Check is the fence check of an inference request of a lease-managed key,
// run before routing and again right before dispatch. It reads the mirror:
// no live lease for owner → 409 LEASE_REQUIRED; a lease of another key or
// generation → 409 LEASE_FENCE_STALE. In a fleet (Share) either answer is
// given only after the store confirmed it, so a lease another replica just
// granted serves here at once; a store that cannot answer fails the check
// with its error. A binding the key no longer allows is
// invalidated (authorization_changed) and answers LEASE_REQUIRED. owner and
// generation are header values already parsed (ParseOwner, ParseGeneration);
// an empty owner or generation 0 → 400 LEASE_CONTEXT_REQUIRED.
func (s *Leases) Check(ctx context.Context, key services.APIKey, owner string, generation int64) (Lease, error) {
	hash, err := s.context(key, owner)
	if err != nil {
		return Lease{}, err
	}
	switch {
	case generation == 0:
		return Lease{}, errContextRequired(GenerationHeader)
	case generation < 0 || generation > MaxGeneration:
		return Lease{}, errContextInvalid(GenerationHeader)
	}
	now := s.now()
	s.mu.RLock()
	l, ok := s.byOwner[hash]
	seen := s.changes
	s.mu.RUnlock()
	if s.fleet != nil && (!ok || !l.Live(now) || l.KeyID != key.ID || l.Generation != generation) {
		// The lease may be one another replica granted or renewed moments
		// ago: ask the store before refusing (fail closed when it cannot
		// answer).
		if l, ok, err = s.readThrough(ctx, hash, now, seen); err != nil {
			return Lease{}, err
		}
	}
	switch {
	case !ok || !l.Live(now):
		return Lease{}, errRequired()
	case l.KeyID != key.ID || l.Generation != generation:
		return Lease{}, errFenceStale()
	case !key.AllowsConnection(l.ConnectionID):
		if _, err := s.Invalidate(ctx, l.ConnectionID, ReasonAuthorizationChanged); err != nil {
			return Lease{}, err
		}
		return Lease{}, errRequired()
	}
	return l, nil
}

// Invalidate ends the active lease of a connection that can never serve it
// again (connection_ineligible, authorization_changed, admin_ended, …) and
// returns how many leases ended (0 or 1).
func (s *Leases) Invalidate(ctx context.Context, connID, reason string) (int, error) {
	if !slices.Contains(invalidationReasons, reason) {
		return 0, fmt.Errorf("leases: invalidation reason %q not allowed", reason)
	}
	s.wmu.Lock()
	ended, err := s.store.Invalidate(ctx, connID, reason, s.now())
	if err != nil {
		s.wmu.Unlock()
		return 0, err
	}
	s.wrote(ctx, ended...)
	s.wmu.Unlock()
	s.announce(ctx, ended...)
	s.recordEnded(ctx, ended)
	return len(ended), nil
}

// InvalidateKey ends every active lease of a client key (revoked →
// managed_key_revoked, deleted, lease scope removed) and returns how many.
func (s *Leases) InvalidateKey(ctx context.Context, keyID, reason string) (int, error) {
	if !slices.Contains(invalidationReasons, reason) {
		return 0, fmt.Errorf("leases: invalidation reason %q not allowed", reason)
	}
	s.wmu.Lock()
	ended, err := s.store.InvalidateKey(ctx, keyID, reason, s.now())
	if err != nil {
		s.wmu.Unlock()
		return 0, err
	}
	s.wrote(ctx, ended...)
	s.wmu.Unlock()
	s.announce(ctx, ended...)
	s.recordEnded(ctx, ended)
	return len(ended), nil
}

// Expire marks due leases expired in the store (a sweep; reads already treat
// them as over) and returns how many.
func (s *Leases) Expire(ctx context.Context) (int, error) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	n, err := s.store.Expire(ctx, s.now())
	if err != nil {
		return 0, err
	}
	s.wrote(ctx)
	return n, nil
}

// HeldByOthers reports, from memory, whether connID is actively leased by a
// key other than keyID. Unmanaged traffic (and pins) skip such connections.
// It reads the View, so it takes no lock.
func (s *Leases) HeldByOthers(connID, keyID string) bool {
	h, ok := s.view.Load().ByConn[connID]
	return ok && h.Live(s.now()) && h.KeyID != keyID
}

// Active returns the live leases, ordered by connection id.
func (s *Leases) Active() []Lease {
	now := s.now()
	s.mu.RLock()
	out := make([]Lease, 0, len(s.byConn))
	for _, l := range s.byConn {
		if l.Live(now) {
			out = append(out, l)
		}
	}
	s.mu.RUnlock()
	slices.SortFunc(out, func(a, b Lease) int { return cmp.Compare(a.ConnectionID, b.ConnectionID) })
	return out
}

// context validates the key and the owner token and returns its hash.
func (s *Leases) context(key services.APIKey, owner string) (string, error) {
	if err := CheckKey(key); err != nil {
		return "", err
	}
	if _, err := ParseOwner(owner); err != nil {
		return "", err
	}
	return HashOwner(owner), nil
}

// fenceArgs validates the arguments of renew, release and status, whose
// generation is a body field.
func (s *Leases) fenceArgs(key services.APIKey, owner string, generation int64) (string, error) {
	hash, err := s.context(key, owner)
	if err != nil {
		return "", err
	}
	if generation < 1 || generation > MaxGeneration {
		return "", errActionInvalid("generation", "use the positive generation the lease was acquired with.")
	}
	return hash, nil
}

func allowedCandidates(key services.APIKey, candidates []string) []string {
	out := make([]string, 0, len(candidates))
	for _, c := range dedupe(candidates) {
		if key.AllowsConnection(c) {
			out = append(out, c)
		}
	}
	return out
}
