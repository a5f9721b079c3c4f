package models

import (
	"context"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"switchyard/services/quota"
)

// QuotaStore persists learned quota windows (quota_windows), one row per
// (connection, window). used_percent holds u × 100; instants are Unix ms.
type QuotaStore struct{ db *gorm.DB }

var _ quota.Store = (*QuotaStore)(nil)

// NewQuotaStore builds the repository.
func NewQuotaStore(db *gorm.DB) *QuotaStore { return &QuotaStore{db: db} }

// LoadQuotaWindows returns every row, by connection and window.
func (s *QuotaStore) LoadQuotaWindows(ctx context.Context) ([]quota.Record, error) {
	var rows []QuotaWindowRow
	if err := s.db.WithContext(ctx).Order(`connection_id, "window"`).Find(&rows).Error; err != nil {
		return nil, translate(err, "load quota windows")
	}
	out := make([]quota.Record, 0, len(rows))
	for _, r := range rows {
		rec := quota.Record{ConnectionID: r.ConnectionID, Window: r.Window, Source: r.Source,
			ObservedAt: time.UnixMilli(r.ObservedAt).UTC()}
		if r.UsedPercent != nil {
			rec.Used = *r.UsedPercent / 100
		}
		if r.LimitValue != nil {
			rec.Limit = *r.LimitValue
		}
		if r.Remaining != nil {
			rec.Remaining = *r.Remaining
		}
		if r.ResetAt != nil {
			rec.ResetAt = time.UnixMilli(*r.ResetAt).UTC()
		}
		out = append(out, rec)
	}
	return out, nil
}

// quotaNewer keeps a stored window that is at least as recent as the one
// written: replicas writing the same connection's windows never put an
// older reading over a newer one.
var quotaNewer = clause.Where{Exprs: []clause.Expression{clause.Expr{SQL: "quota_windows.observed_at < excluded.observed_at"}}}

// SaveQuotaWindows inserts or replaces the rows of recs in one statement; a
// stored row observed at or after the one written stays.
func (s *QuotaStore) SaveQuotaWindows(ctx context.Context, recs []quota.Record) error {
	if len(recs) == 0 {
		return nil
	}
	rows := make([]QuotaWindowRow, len(recs))
	for i, r := range recs {
		used := r.Used * 100
		row := QuotaWindowRow{ConnectionID: r.ConnectionID, Window: r.Window, UsedPercent: &used, Source: r.Source,
			ObservedAt: r.ObservedAt.UnixMilli()}
		if r.Limit > 0 {
			limit, remaining := r.Limit, r.Remaining
			row.LimitValue, row.Remaining = &limit, &remaining
		}
		if !r.ResetAt.IsZero() {
			reset := r.ResetAt.UnixMilli()
			row.ResetAt = &reset
		}
		rows[i] = row
	}
	return translate(s.db.WithContext(ctx).Clauses(clause.OnConflict{
		Columns:   []clause.Column{{Name: "connection_id"}, {Name: "window"}},
		DoUpdates: clause.AssignmentColumns([]string{"used_percent", "remaining", "limit_value", "reset_at", "source", "observed_at"}),
		Where:     quotaNewer,
	}).Create(&rows).Error, "save quota windows")
}

// DeleteQuotaWindows deletes the rows of a connection.
func (s *QuotaStore) DeleteQuotaWindows(ctx context.Context, connectionID string) error {
	return translate(s.db.WithContext(ctx).Where("connection_id = ?", connectionID).Delete(&QuotaWindowRow{}).Error,
		"delete quota windows")
}
