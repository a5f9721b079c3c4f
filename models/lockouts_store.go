package models

import (
	"context"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"switchyard/services/resilience"
)

// LockoutStore implements resilience.LockoutStore on model_lockouts
// (20-resilience §7, BD 9). Instants are epoch milliseconds; version is the
// compare-and-set counter of the decisions (scale-out §3.4 row 4).
type LockoutStore struct{ db *gorm.DB }

var _ resilience.LockoutStore = (*LockoutStore)(nil)

// NewLockoutStore builds the repository.
func NewLockoutStore(db *gorm.DB) *LockoutStore { return &LockoutStore{db: db} }

func lockoutRowOf(r resilience.LockoutRecord) ModelLockoutRow {
	return ModelLockoutRow{
		Provider:       r.Provider,
		ConnectionID:   r.ConnectionID,
		KeyShape:       string(r.Shape),
		LockKey:        r.Key,
		Model:          r.Model,
		Reason:         r.Reason,
		LastStatus:     r.LastStatus,
		FailureCount:   r.FailureCount,
		LockedAt:       r.LockedAt.UnixMilli(),
		Until:          r.Until.UnixMilli(),
		LastFailureAt:  r.LastFailureAt.UnixMilli(),
		LastCooldownMs: r.LastCooldownMs,
		Version:        r.Version,
	}
}

func (r ModelLockoutRow) key() resilience.LockKey {
	return resilience.LockKey{Provider: r.Provider, ConnectionID: r.ConnectionID,
		Shape: resilience.LockShape(r.KeyShape), Key: r.LockKey}
}

func (r ModelLockoutRow) domain() resilience.LockoutRecord {
	return resilience.LockoutRecord{
		LockKey:        r.key(),
		Model:          r.Model,
		Reason:         r.Reason,
		LastStatus:     r.LastStatus,
		FailureCount:   r.FailureCount,
		LockedAt:       time.UnixMilli(r.LockedAt).UTC(),
		Until:          time.UnixMilli(r.Until).UTC(),
		LastFailureAt:  time.UnixMilli(r.LastFailureAt).UTC(),
		LastCooldownMs: r.LastCooldownMs,
		Version:        r.Version,
	}
}

// LoadLockouts returns every stored lockout, ordered by key.
func (s *LockoutStore) LoadLockouts(ctx context.Context) ([]resilience.LockoutRecord, error) {
	var rows []ModelLockoutRow
	err := s.db.WithContext(ctx).
		Order("provider, connection_id, key_shape, lock_key").
		Find(&rows).Error
	if err != nil {
		return nil, translate(err, "load lockouts")
	}
	out := make([]resilience.LockoutRecord, len(rows))
	for i, r := range rows {
		out[i] = r.domain()
	}
	return out, nil
}

// SaveLockout inserts the record or replaces the row of its key.
func (s *LockoutStore) SaveLockout(ctx context.Context, rec resilience.LockoutRecord) error {
	row := lockoutRowOf(rec)
	err := s.db.WithContext(ctx).Clauses(clause.OnConflict{
		Columns: []clause.Column{{Name: "provider"}, {Name: "connection_id"}, {Name: "key_shape"}, {Name: "lock_key"}},
		DoUpdates: clause.AssignmentColumns([]string{"model", "reason", "last_status", "failure_count",
			"locked_at", "until", "last_failure_at", "last_cooldown_ms", "version"}),
	}).Create(&row).Error
	return translate(err, "save lockout "+rec.LockKey.String())
}

// DeleteLockout deletes the row of key; a missing row is no error.
func (s *LockoutStore) DeleteLockout(ctx context.Context, key resilience.LockKey) error {
	err := s.db.WithContext(ctx).
		Where("provider = ? AND connection_id = ? AND key_shape = ? AND lock_key = ?",
			key.Provider, key.ConnectionID, string(key.Shape), key.Key).
		Delete(&ModelLockoutRow{}).Error
	return translate(err, "delete lockout "+key.String())
}

// DeleteLockouts deletes the rows the filter selects and returns how many.
// A model filter matches its family, base and exact keys; the family depends
// on the provider, so candidate rows are matched in Go and deleted by key.
func (s *LockoutStore) DeleteLockouts(ctx context.Context, filter resilience.LockFilter) (int, error) {
	scope := func(db *gorm.DB) *gorm.DB {
		q := db.Where("1 = 1")
		if filter.Provider != "" {
			q = q.Where("provider = ?", filter.Provider)
		}
		if filter.ConnectionID != "" {
			q = q.Where("connection_id = ?", filter.ConnectionID)
		}
		return q
	}
	if filter.Model == "" {
		res := s.db.WithContext(ctx).Scopes(scope).Delete(&ModelLockoutRow{})
		if res.Error != nil {
			return 0, translate(res.Error, "delete lockouts")
		}
		return int(res.RowsAffected), nil
	}
	n := 0
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var rows []ModelLockoutRow
		if err := tx.Scopes(scope).Find(&rows).Error; err != nil {
			return err
		}
		for _, r := range rows {
			if !filter.Matches(r.key()) {
				continue
			}
			res := tx.Where("provider = ? AND connection_id = ? AND key_shape = ? AND lock_key = ?",
				r.Provider, r.ConnectionID, r.KeyShape, r.LockKey).Delete(&ModelLockoutRow{})
			if res.Error != nil {
				return res.Error
			}
			n += int(res.RowsAffected)
		}
		return nil
	})
	if err != nil {
		return 0, translate(err, "delete lockouts of model "+filter.Model)
	}
	return n, nil
}

const lockKeyWhere = "provider = ? AND connection_id = ? AND key_shape = ? AND lock_key = ?"

func lockKeyArgs(k resilience.LockKey) []any {
	return []any{k.Provider, k.ConnectionID, string(k.Shape), k.Key}
}

// LoadLockout returns the row of key; found=false when there is none.
func (s *LockoutStore) LoadLockout(ctx context.Context, key resilience.LockKey) (resilience.LockoutRecord, bool, error) {
	var rows []ModelLockoutRow
	if err := s.db.WithContext(ctx).Where(lockKeyWhere, lockKeyArgs(key)...).Limit(1).Find(&rows).Error; err != nil {
		return resilience.LockoutRecord{}, false, translate(err, "load lockout "+key.String())
	}
	if len(rows) == 0 {
		return resilience.LockoutRecord{}, false, nil
	}
	return rows[0].domain(), true, nil
}

// CompareAndSaveLockout writes rec (with rec.Version) when the stored
// version is expect, or inserts it when expect < 0 and there is no row.
func (s *LockoutStore) CompareAndSaveLockout(ctx context.Context, expect int64, rec resilience.LockoutRecord) (resilience.LockoutRecord, bool, bool, error) {
	row := lockoutRowOf(rec)
	row.Model = PostgresText(row.Model)
	db := s.db.WithContext(ctx)
	var res *gorm.DB
	if expect < 0 {
		res = db.Clauses(clause.OnConflict{DoNothing: true}).Create(&row)
	} else {
		res = db.Model(&ModelLockoutRow{}).Where(lockKeyWhere, lockKeyArgs(rec.LockKey)...).Where("version = ?", expect).
			UpdateColumns(map[string]any{"model": row.Model, "reason": row.Reason, "last_status": row.LastStatus,
				"failure_count": row.FailureCount, "locked_at": row.LockedAt, "until": row.Until,
				"last_failure_at": row.LastFailureAt, "last_cooldown_ms": row.LastCooldownMs, "version": row.Version})
	}
	if res.Error != nil {
		return resilience.LockoutRecord{}, false, false, translate(res.Error, "save lockout "+rec.LockKey.String())
	}
	if res.RowsAffected == 1 {
		return rec, true, true, nil
	}
	cur, found, err := s.LoadLockout(ctx, rec.LockKey)
	return cur, found, false, err
}

// CompareAndDeleteLockout deletes the row of key when its version is expect.
func (s *LockoutStore) CompareAndDeleteLockout(ctx context.Context, key resilience.LockKey, expect int64) (resilience.LockoutRecord, bool, bool, error) {
	res := s.db.WithContext(ctx).Where(lockKeyWhere, lockKeyArgs(key)...).Where("version = ?", expect).Delete(&ModelLockoutRow{})
	if res.Error != nil {
		return resilience.LockoutRecord{}, false, false, translate(res.Error, "delete lockout "+key.String())
	}
	if res.RowsAffected == 1 {
		return resilience.LockoutRecord{}, false, true, nil
	}
	cur, found, err := s.LoadLockout(ctx, key)
	return cur, found, false, err
}

// SaveLockoutDiagnostics moves last_failure_at of key's row to at when at
// is later; the version is untouched.
func (s *LockoutStore) SaveLockoutDiagnostics(ctx context.Context, key resilience.LockKey, at time.Time) error {
	ms := at.UnixMilli()
	err := s.db.WithContext(ctx).Model(&ModelLockoutRow{}).Where(lockKeyWhere, lockKeyArgs(key)...).
		Where("last_failure_at < ?", ms).UpdateColumn("last_failure_at", ms).Error
	return translate(err, "save last failure of lockout "+key.String())
}
