package leases

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"switchyard/services"
)

// The lease rows: the Store interface and TxStore, its implementation as
// transactions over Tx, where each rule of 20-resilience §6 (acquire,
// reuse, transition, fence, invalidate, expire) is applied to the rows.

// AcquireRequest is one acquire, or with Generation > 0 one transition of an
// existing binding to another connection under the same generation.
type AcquireRequest struct {
	OwnerHash string
	KeyID     string
	Provider  string
	// Candidates are eligible, allowed connection ids in preference order.
	Candidates []string
	// TTL is already clamped; a transition with TTL 0 keeps the old expiry.
	TTL time.Duration
	Now time.Time
	// Generation > 0 makes this a transition: the owner's active lease must
	// have this generation and key, and the new row keeps it.
	Generation int64
	// ReplaceReason ends the owner's active lease on a connection that is not
	// a candidate; "" means model_ineligible.
	ReplaceReason string
}

// FenceRequest addresses the owner's lease of one generation under one key:
// renew (TTL), release (Reason) and status.
type FenceRequest struct {
	OwnerHash  string
	KeyID      string
	Generation int64
	TTL        time.Duration // renew; already clamped
	Reason     string        // release; owner_exit or client_cancelled
	Now        time.Time
}

// Store holds the lease rows. Every method is one transaction (BEGIN
// IMMEDIATE on SQLite) that first expires active rows with ExpiresAt ≤ now.
type Store interface {
	// Acquire takes, reuses or transitions the owner's lease (20-resilience §6).
	Acquire(ctx context.Context, req AcquireRequest) (Lease, error)
	// Renew extends the owner's active lease of req.Generation under req.KeyID.
	Renew(ctx context.Context, req FenceRequest) (Lease, error)
	// Release ends the owner's lease of req.Generation; idempotent.
	Release(ctx context.Context, req FenceRequest) (Lease, error)
	// Status returns the owner's active lease of req.Generation under req.KeyID.
	Status(ctx context.Context, req FenceRequest) (Lease, error)
	// Invalidate ends the active lease of a connection and returns it.
	Invalidate(ctx context.Context, connID, reason string, now time.Time) ([]Lease, error)
	// InvalidateKey ends every active lease of a client key and returns them.
	InvalidateKey(ctx context.Context, keyID, reason string, now time.Time) ([]Lease, error)
	// ActiveByConnection returns the active lease of a connection.
	ActiveByConnection(ctx context.Context, connID string, now time.Time) (Lease, bool, error)
	// ActiveByOwner returns the active lease of an owner hash.
	ActiveByOwner(ctx context.Context, ownerHash string, now time.Time) (Lease, bool, error)
	// ListActive returns every active lease.
	ListActive(ctx context.Context, now time.Time) ([]Lease, error)
	// Expire only expires due rows and returns how many.
	Expire(ctx context.Context, now time.Time) (int, error)
}

// Tx is the exclusive_leases table inside one transaction.
type Tx interface {
	// ExpireDue marks active rows with ExpiresAt ≤ now expired (ttl_expired,
	// ended at their expiry) and returns how many.
	ExpireDue(now time.Time) (int, error)
	ActiveByOwner(ownerHash string) (Lease, bool, error)
	ActiveByConnection(connID string) (Lease, bool, error)
	ActiveByKey(keyID string) ([]Lease, error)
	ListActive() ([]Lease, error)
	// FindGeneration returns the owner's row of a generation under a key:
	// the active one if any, else the most recently acquired.
	FindGeneration(ownerHash, keyID string, generation int64) (Lease, bool, error)
	// MaxGeneration returns the owner's highest generation over all rows, 0 if none.
	MaxGeneration(ownerHash string) (int64, error)
	// Insert adds a row; an active row whose owner or connection already has
	// one fails with an error wrapping ErrDuplicate.
	Insert(l Lease) error
	// Update writes State, RenewedAt, ExpiresAt, EndedAt and EndReason of row l.ID.
	Update(l Lease) error
}

// TxStore implements Store on any Tx runner.
type TxStore struct {
	run func(ctx context.Context, fn func(Tx) error) error
}

var _ Store = (*TxStore)(nil)

// NewTxStore builds a Store whose every operation runs inside run, which
// must call fn in one transaction and commit only when fn returns nil.
func NewTxStore(run func(ctx context.Context, fn func(Tx) error) error) *TxStore {
	return &TxStore{run: run}
}

func (s *TxStore) in(ctx context.Context, now time.Time, fn func(Tx) error) error {
	return s.run(ctx, func(tx Tx) error {
		if _, err := tx.ExpireDue(now); err != nil {
			return err
		}
		return fn(tx)
	})
}

// Acquire implements Store.
func (s *TxStore) Acquire(ctx context.Context, req AcquireRequest) (Lease, error) {
	var out Lease
	err := s.in(ctx, req.Now, func(tx Tx) (err error) {
		out, err = acquire(tx, req)
		return err
	})
	return out, err
}

func acquire(tx Tx, req AcquireRequest) (Lease, error) {
	transition := req.Generation > 0
	own, hasOwn, err := tx.ActiveByOwner(req.OwnerHash)
	if err != nil {
		return Lease{}, err
	}
	switch {
	case transition && !hasOwn:
		return Lease{}, errRequired()
	case transition && (own.KeyID != req.KeyID || own.Generation != req.Generation):
		return Lease{}, errFenceStale()
	case !transition && hasOwn && own.KeyID != req.KeyID:
		return Lease{}, errOwnerConflict()
	}
	candidates := dedupe(req.Candidates)
	if len(candidates) == 0 {
		return Lease{}, ErrNoEligible
	}
	if hasOwn && slices.Contains(candidates, own.ConnectionID) {
		if transition { // the binding is still a candidate: nothing to move
			return own, nil
		}
		own.RenewedAt, own.ExpiresAt = req.Now, req.Now.Add(req.TTL)
		if err := tx.Update(own); err != nil {
			return Lease{}, err
		}
		own.Reused = true
		return own, nil
	}
	gen, ttl := req.Generation, req.TTL
	if transition && ttl <= 0 {
		ttl = own.ExpiresAt.Sub(req.Now) // the moved lease keeps its expiry
	}
	if !transition {
		highest, err := tx.MaxGeneration(req.OwnerHash)
		if err != nil {
			return Lease{}, err
		}
		if highest >= MaxGeneration {
			return Lease{}, fmt.Errorf("leases: owner generation exhausted at %d", highest)
		}
		gen = highest + 1
	}
	if hasOwn {
		own.State, own.EndedAt = StateInvalidated, req.Now
		own.EndReason = cmp.Or(req.ReplaceReason, ReasonModelIneligible)
		if err := tx.Update(own); err != nil {
			return Lease{}, err
		}
	}
	var held []Lease
	for _, c := range candidates {
		l := Lease{ID: services.NewID("ls_"), OwnerHash: req.OwnerHash, KeyID: req.KeyID,
			Provider: req.Provider, ConnectionID: c, Generation: gen, State: StateActive,
			AcquiredAt: req.Now, RenewedAt: req.Now, ExpiresAt: req.Now.Add(ttl)}
		err := tx.Insert(l)
		if err == nil {
			return l, nil
		}
		if !errors.Is(err, ErrDuplicate) {
			return Lease{}, err
		}
		// The index refused the row: the connection is leased, or (only if
		// another writer slipped in) the owner is.
		other, found, ferr := tx.ActiveByConnection(c)
		if ferr != nil {
			return Lease{}, ferr
		}
		if !found {
			return Lease{}, errOwnerConflict()
		}
		held = append(held, other)
	}
	return Lease{}, errCapacity(retryAfter(held, req.Now))
}

// retryAfter is the time to the earliest expiry of held, in whole seconds
// rounded up, bounded to 1–120 s.
func retryAfter(held []Lease, now time.Time) time.Duration {
	if len(held) == 0 {
		return minRetryAfter
	}
	earliest := held[0].ExpiresAt
	for _, l := range held[1:] {
		if l.ExpiresAt.Before(earliest) {
			earliest = l.ExpiresAt
		}
	}
	d := earliest.Sub(now)
	d = (d + time.Second - 1) / time.Second * time.Second
	return min(max(d, minRetryAfter), maxRetryAfter)
}

func dedupe(ids []string) []string {
	out := make([]string, 0, len(ids))
	for _, id := range ids {
		if id != "" && !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	return out
}

// fenced returns the owner's active lease when it matches the key and
// generation, else LEASE_FENCE_STALE.
func fenced(tx Tx, req FenceRequest) (Lease, error) {
	own, ok, err := tx.ActiveByOwner(req.OwnerHash)
	if err != nil {
		return Lease{}, err
	}
	if !ok || own.KeyID != req.KeyID || own.Generation != req.Generation {
		return Lease{}, errFenceStale()
	}
	return own, nil
}

// Renew implements Store.
func (s *TxStore) Renew(ctx context.Context, req FenceRequest) (Lease, error) {
	var out Lease
	err := s.in(ctx, req.Now, func(tx Tx) error {
		l, err := fenced(tx, req)
		if err != nil {
			return err
		}
		l.RenewedAt, l.ExpiresAt = req.Now, req.Now.Add(req.TTL)
		if err := tx.Update(l); err != nil {
			return err
		}
		out = l
		return nil
	})
	return out, err
}

// Release implements Store. Releasing an already ended lease returns it
// unchanged; a generation the owner never held under this key is stale.
func (s *TxStore) Release(ctx context.Context, req FenceRequest) (Lease, error) {
	var out Lease
	err := s.in(ctx, req.Now, func(tx Tx) error {
		l, ok, err := tx.FindGeneration(req.OwnerHash, req.KeyID, req.Generation)
		if err != nil {
			return err
		}
		if !ok {
			return errFenceStale()
		}
		if l.State == StateActive {
			l.State, l.EndedAt, l.EndReason = StateReleased, req.Now, cmp.Or(req.Reason, ReasonOwnerExit)
			if err := tx.Update(l); err != nil {
				return err
			}
			l.Ended = true
		}
		out = l
		return nil
	})
	return out, err
}

// Status implements Store.
func (s *TxStore) Status(ctx context.Context, req FenceRequest) (Lease, error) {
	var out Lease
	err := s.in(ctx, req.Now, func(tx Tx) (err error) {
		out, err = fenced(tx, req)
		return err
	})
	return out, err
}

func invalidate(tx Tx, ls []Lease, reason string, now time.Time) ([]Lease, error) {
	for i := range ls {
		ls[i].State, ls[i].EndedAt, ls[i].EndReason = StateInvalidated, now, reason
		if err := tx.Update(ls[i]); err != nil {
			return nil, err
		}
	}
	return ls, nil
}

// Invalidate implements Store.
func (s *TxStore) Invalidate(ctx context.Context, connID, reason string, now time.Time) ([]Lease, error) {
	var out []Lease
	err := s.in(ctx, now, func(tx Tx) error {
		l, ok, err := tx.ActiveByConnection(connID)
		if err != nil || !ok {
			return err
		}
		out, err = invalidate(tx, []Lease{l}, reason, now)
		return err
	})
	return out, err
}

// InvalidateKey implements Store.
func (s *TxStore) InvalidateKey(ctx context.Context, keyID, reason string, now time.Time) ([]Lease, error) {
	var out []Lease
	err := s.in(ctx, now, func(tx Tx) error {
		ls, err := tx.ActiveByKey(keyID)
		if err != nil {
			return err
		}
		out, err = invalidate(tx, ls, reason, now)
		return err
	})
	return out, err
}

// ActiveByConnection implements Store.
func (s *TxStore) ActiveByConnection(ctx context.Context, connID string, now time.Time) (Lease, bool, error) {
	var out Lease
	var ok bool
	err := s.in(ctx, now, func(tx Tx) (err error) {
		out, ok, err = tx.ActiveByConnection(connID)
		return err
	})
	return out, ok, err
}

// ActiveByOwner implements Store.
func (s *TxStore) ActiveByOwner(ctx context.Context, ownerHash string, now time.Time) (Lease, bool, error) {
	var out Lease
	var ok bool
	err := s.in(ctx, now, func(tx Tx) (err error) {
		out, ok, err = tx.ActiveByOwner(ownerHash)
		return err
	})
	return out, ok, err
}

// ListActive implements Store.
func (s *TxStore) ListActive(ctx context.Context, now time.Time) ([]Lease, error) {
	var out []Lease
	err := s.in(ctx, now, func(tx Tx) (err error) {
		out, err = tx.ListActive()
		return err
	})
	return out, err
}

// LiveByOwner implements Reader inside one transaction that writes
// nothing (no expiry): the owner's active row, if it is unexpired at now.
func (s *TxStore) LiveByOwner(ctx context.Context, ownerHash string, now time.Time) (Lease, bool, error) {
	var out Lease
	var ok bool
	err := s.run(ctx, func(tx Tx) (err error) {
		out, ok, err = tx.ActiveByOwner(ownerHash)
		return err
	})
	if err != nil || !ok || !out.Live(now) {
		return Lease{}, false, err
	}
	return out, true, nil
}

// LiveLeases implements Reader as LiveByOwner does: the active rows
// unexpired at now.
func (s *TxStore) LiveLeases(ctx context.Context, now time.Time) ([]Lease, error) {
	var all []Lease
	err := s.run(ctx, func(tx Tx) (err error) {
		all, err = tx.ListActive()
		return err
	})
	out := all[:0]
	for _, l := range all {
		if l.Live(now) {
			out = append(out, l)
		}
	}
	return out, err
}

var _ Reader = (*TxStore)(nil)

// Expire implements Store.
func (s *TxStore) Expire(ctx context.Context, now time.Time) (int, error) {
	var n int
	err := s.run(ctx, func(tx Tx) (err error) {
		n, err = tx.ExpireDue(now)
		return err
	})
	return n, err
}
