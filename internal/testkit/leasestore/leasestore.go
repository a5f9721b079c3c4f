// Package leasestore is an in-memory lease store for tests: the
// exclusive_leases rows of services/leases without a database, for the lease,
// gateway and fleet tests. Production always stores leases in the database
// (models.LeaseStore). It imports services and services/leases only, so the
// in-package tests of services/gateway can use it.
package leasestore

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"switchyard/services"
	"switchyard/services/leases"
)

// New returns a lease Store that keeps the rows in memory. Transactions run
// one at a time on a copy of the rows, committed only when the operation
// succeeds; inserts are refused as the partial unique indexes of
// exclusive_leases refuse them (one active row per owner, one per connection).
func New() *leases.TxStore {
	m := &memStore{}
	return leases.NewTxStore(m.run)
}

type memStore struct {
	mu   sync.Mutex
	rows []leases.Lease
}

func (m *memStore) run(ctx context.Context, fn func(leases.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	tx := &memTx{rows: slices.Clone(m.rows)}
	if err := fn(tx); err != nil {
		return err
	}
	m.rows = tx.rows
	return nil
}

type memTx struct{ rows []leases.Lease }

func (t *memTx) ExpireDue(now time.Time) (int, error) {
	n := 0
	for i, l := range t.rows {
		if l.State == leases.StateActive && !now.Before(l.ExpiresAt) {
			t.rows[i].State, t.rows[i].EndedAt, t.rows[i].EndReason = leases.StateExpired, l.ExpiresAt, leases.ReasonTTLExpired
			n++
		}
	}
	return n, nil
}

func (t *memTx) activeWhere(match func(leases.Lease) bool) []leases.Lease {
	var out []leases.Lease
	for _, l := range t.rows {
		if l.State == leases.StateActive && match(l) {
			out = append(out, l)
		}
	}
	return out
}

func first(ls []leases.Lease) (leases.Lease, bool, error) {
	if len(ls) == 0 {
		return leases.Lease{}, false, nil
	}
	return ls[0], true, nil
}

func (t *memTx) ActiveByOwner(ownerHash string) (leases.Lease, bool, error) {
	return first(t.activeWhere(func(l leases.Lease) bool { return l.OwnerHash == ownerHash }))
}

func (t *memTx) ActiveByConnection(connID string) (leases.Lease, bool, error) {
	return first(t.activeWhere(func(l leases.Lease) bool { return l.ConnectionID == connID }))
}

func (t *memTx) ActiveByKey(keyID string) ([]leases.Lease, error) {
	return t.activeWhere(func(l leases.Lease) bool { return l.KeyID == keyID }), nil
}

func (t *memTx) ListActive() ([]leases.Lease, error) {
	return t.activeWhere(func(leases.Lease) bool { return true }), nil
}

func (t *memTx) FindGeneration(ownerHash, keyID string, generation int64) (leases.Lease, bool, error) {
	var best leases.Lease
	found := false
	for _, l := range t.rows {
		if l.OwnerHash != ownerHash || l.KeyID != keyID || l.Generation != generation {
			continue
		}
		switch {
		case !found, l.State == leases.StateActive,
			best.State != leases.StateActive && !l.AcquiredAt.Before(best.AcquiredAt):
			best, found = l, true
		}
	}
	return best, found, nil
}

func (t *memTx) MaxGeneration(ownerHash string) (int64, error) {
	var g int64
	for _, l := range t.rows {
		if l.OwnerHash == ownerHash {
			g = max(g, l.Generation)
		}
	}
	return g, nil
}

func (t *memTx) Insert(l leases.Lease) error {
	for _, r := range t.rows {
		if r.ID == l.ID || l.State == leases.StateActive && r.State == leases.StateActive &&
			(r.OwnerHash == l.OwnerHash || r.ConnectionID == l.ConnectionID) {
			return fmt.Errorf("leases: insert %s: %w", l.ID, leases.ErrDuplicate)
		}
	}
	l.Reused, l.TTL = false, 0
	t.rows = append(t.rows, l)
	return nil
}

func (t *memTx) Update(l leases.Lease) error {
	for i, r := range t.rows {
		if r.ID == l.ID {
			r.State, r.RenewedAt, r.ExpiresAt, r.EndedAt, r.EndReason = l.State, l.RenewedAt, l.ExpiresAt, l.EndedAt, l.EndReason
			t.rows[i] = r
			return nil
		}
	}
	return fmt.Errorf("leases: update %s: %w", l.ID, services.ErrNotFound)
}
