package models

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"

	"switchyard/migrations"
	"switchyard/services/leases"
)

// LeaseStore implements leases.Store on exclusive_leases (20-resilience §6).
// The state machine is leases.TxStore's; this file supplies the rows inside
// one transaction. With _txlock=immediate every db.Transaction is a BEGIN
// IMMEDIATE, so an operation's reads and writes see no other writer; the
// partial unique indexes exclusive_leases_owner_active and
// exclusive_leases_conn_active still reject a second active row, and such a
// rejection reaches the state machine as leases.ErrDuplicate.
//
// On PostgreSQL, where transactions are READ COMMITTED and never lock the
// database as a whole, every transaction first takes a transaction-scoped
// advisory lock on the lease table: the BEGIN IMMEDIATE equivalent, so lease
// operations of every replica run one at a time and the state machine's
// reads stay true until its writes commit.
type LeaseStore struct {
	*leases.TxStore
	db *gorm.DB
}

var _ leases.Store = (*LeaseStore)(nil)

// NewLeaseStore builds the repository.
func NewLeaseStore(db *gorm.DB) *LeaseStore {
	s := &LeaseStore{db: db}
	s.TxStore = leases.NewTxStore(s.run)
	return s
}

func (s *LeaseStore) run(ctx context.Context, fn func(leases.Tx) error) error {
	var fnErr error
	pg := Dialect(s.db) == migrations.Postgres
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if pg {
			if err := tx.Exec(`SELECT pg_advisory_xact_lock(hashtext('exclusive_leases'))`).Error; err != nil {
				return translate(err, "lock leases")
			}
		}
		fnErr = fn(leaseTx{tx: tx, pg: pg})
		return fnErr
	})
	if err == nil || err == fnErr {
		// Refusals (*leases.Error, leases.ErrNoEligible) pass through as they
		// are; row errors were translated where they happened.
		return err
	}
	return translate(err, "lease transaction") // begin or commit
}

var _ leases.Reader = (*LeaseStore)(nil)

// LiveByOwner implements leases.Reader with one indexed read outside any
// lease transaction: no advisory lock, no expiry write. Under READ
// COMMITTED it sees every lease transaction that committed before it.
func (s *LeaseStore) LiveByOwner(ctx context.Context, ownerHash string, now time.Time) (leases.Lease, bool, error) {
	t := leaseTx{tx: s.db.WithContext(ctx), pg: Dialect(s.db) == migrations.Postgres}
	return t.one("read lease of owner",
		t.tx.Where(activeLease+" AND owner_hash = ? AND expires_at > ?", ownerHash, now.UnixMilli()))
}

// LiveLeases implements leases.Reader: the active rows unexpired at now,
// read as LiveByOwner reads.
func (s *LeaseStore) LiveLeases(ctx context.Context, now time.Time) ([]leases.Lease, error) {
	t := leaseTx{tx: s.db.WithContext(ctx), pg: Dialect(s.db) == migrations.Postgres}
	return t.list("read active leases", t.tx.Where(activeLease+" AND expires_at > ?", now.UnixMilli()))
}

func leaseRowOf(l leases.Lease) LeaseRow {
	row := LeaseRow{
		ID:           l.ID,
		OwnerHash:    l.OwnerHash,
		APIKeyID:     l.KeyID,
		Provider:     l.Provider,
		ConnectionID: l.ConnectionID,
		Generation:   l.Generation,
		State:        string(l.State),
		AcquiredAt:   l.AcquiredAt.UnixMilli(),
		RenewedAt:    l.RenewedAt.UnixMilli(),
		ExpiresAt:    l.ExpiresAt.UnixMilli(),
	}
	if !l.EndedAt.IsZero() {
		row.EndedAt = ms(&l.EndedAt)
	}
	if l.EndReason != "" {
		r := l.EndReason
		row.EndReason = &r
	}
	return row
}

func (r LeaseRow) domain() leases.Lease {
	l := leases.Lease{
		ID:           r.ID,
		OwnerHash:    r.OwnerHash,
		KeyID:        r.APIKeyID,
		Provider:     r.Provider,
		ConnectionID: r.ConnectionID,
		Generation:   r.Generation,
		State:        leases.State(r.State),
		AcquiredAt:   time.UnixMilli(r.AcquiredAt).UTC(),
		RenewedAt:    time.UnixMilli(r.RenewedAt).UTC(),
		ExpiresAt:    time.UnixMilli(r.ExpiresAt).UTC(),
	}
	if t := fromMs(r.EndedAt); t != nil {
		l.EndedAt = *t
	}
	if r.EndReason != nil {
		l.EndReason = *r.EndReason
	}
	return l
}

// leaseTx is exclusive_leases inside one transaction; pg says the database
// is PostgreSQL.
type leaseTx struct {
	tx *gorm.DB
	pg bool
}

var _ leases.Tx = leaseTx{}

const activeLease = "state = 'active'"

func (t leaseTx) ExpireDue(now time.Time) (int, error) {
	res := t.tx.Model(&LeaseRow{}).
		Where(activeLease+" AND expires_at <= ?", now.UnixMilli()).
		Updates(map[string]any{
			"state":      string(leases.StateExpired),
			"ended_at":   gorm.Expr("expires_at"),
			"end_reason": leases.ReasonTTLExpired,
		})
	if res.Error != nil {
		return 0, translate(res.Error, "expire leases")
	}
	return int(res.RowsAffected), nil
}

func (t leaseTx) list(op string, q *gorm.DB) ([]leases.Lease, error) {
	var rows []LeaseRow
	if err := q.Order("connection_id, id").Find(&rows).Error; err != nil {
		return nil, translate(err, op)
	}
	out := make([]leases.Lease, len(rows))
	for i, r := range rows {
		out[i] = r.domain()
	}
	return out, nil
}

func (t leaseTx) one(op string, q *gorm.DB) (leases.Lease, bool, error) {
	ls, err := t.list(op, q.Limit(1))
	if err != nil || len(ls) == 0 {
		return leases.Lease{}, false, err
	}
	return ls[0], true, nil
}

func (t leaseTx) ActiveByOwner(ownerHash string) (leases.Lease, bool, error) {
	return t.one("find lease of owner", t.tx.Where(activeLease+" AND owner_hash = ?", ownerHash))
}

func (t leaseTx) ActiveByConnection(connID string) (leases.Lease, bool, error) {
	return t.one("find lease of connection "+connID, t.tx.Where(activeLease+" AND connection_id = ?", connID))
}

func (t leaseTx) ActiveByKey(keyID string) ([]leases.Lease, error) {
	return t.list("find leases of key "+keyID, t.tx.Where(activeLease+" AND api_key_id = ?", keyID))
}

func (t leaseTx) ListActive() ([]leases.Lease, error) {
	return t.list("list active leases", t.tx.Where(activeLease))
}

func (t leaseTx) FindGeneration(ownerHash, keyID string, generation int64) (leases.Lease, bool, error) {
	var rows []LeaseRow
	// Insertion order breaks ties: SQLite's implicit rowid, PostgreSQL's
	// identity column seq.
	order := "CASE WHEN " + activeLease + " THEN 0 ELSE 1 END, acquired_at DESC, rowid DESC"
	if t.pg {
		order = "CASE WHEN " + activeLease + " THEN 0 ELSE 1 END, acquired_at DESC, seq DESC"
	}
	err := t.tx.Where("owner_hash = ? AND api_key_id = ? AND generation = ?", ownerHash, keyID, generation).
		Order(order).
		Limit(1).Find(&rows).Error
	if err != nil {
		return leases.Lease{}, false, translate(err, "find lease generation")
	}
	if len(rows) == 0 {
		return leases.Lease{}, false, nil
	}
	return rows[0].domain(), true, nil
}

func (t leaseTx) MaxGeneration(ownerHash string) (int64, error) {
	var g int64
	err := t.tx.Model(&LeaseRow{}).Where("owner_hash = ?", ownerHash).
		Select("COALESCE(MAX(generation), 0)").Scan(&g).Error
	if err != nil {
		return 0, translate(err, "max lease generation")
	}
	return g, nil
}

// Insert adds a row. SQLite aborts only the failing statement, so after a
// duplicate the transaction goes on and the state machine tries the next
// candidate. PostgreSQL aborts the whole transaction on an error, so there
// the insert runs inside a savepoint that a duplicate rolls back to.
func (t leaseTx) Insert(l leases.Lease) error {
	row := leaseRowOf(l)
	if t.pg {
		if err := t.tx.SavePoint("lease_insert").Error; err != nil {
			return translate(err, "insert lease "+l.ID)
		}
	}
	err := t.tx.Create(&row).Error
	if err != nil && t.pg {
		if rerr := t.tx.RollbackTo("lease_insert").Error; rerr != nil {
			return translate(rerr, "insert lease "+l.ID)
		}
	}
	if errors.Is(err, gorm.ErrDuplicatedKey) {
		return fmt.Errorf("models: insert lease on %s: %w", l.ConnectionID, leases.ErrDuplicate)
	}
	return translate(err, "insert lease "+l.ID)
}

func (t leaseTx) Update(l leases.Lease) error {
	row := leaseRowOf(l)
	res := t.tx.Model(&LeaseRow{}).Where("id = ?", l.ID).Updates(map[string]any{
		"state":      row.State,
		"renewed_at": row.RenewedAt,
		"expires_at": row.ExpiresAt,
		"ended_at":   row.EndedAt,
		"end_reason": row.EndReason,
	})
	if res.Error != nil {
		return translate(res.Error, "update lease "+l.ID)
	}
	if res.RowsAffected == 0 {
		return translate(gorm.ErrRecordNotFound, "update lease "+l.ID)
	}
	return nil
}
