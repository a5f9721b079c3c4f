package models

import (
	"context"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"switchyard/services/gateway"
)

// ToolLimitStore persists learned tool limits (learned_tool_limits).
type ToolLimitStore struct{ db *gorm.DB }

var _ gateway.ToolLimitStore = (*ToolLimitStore)(nil)

// NewToolLimitStore builds the repository.
func NewToolLimitStore(db *gorm.DB) *ToolLimitStore { return &ToolLimitStore{db: db} }

func (s *ToolLimitStore) LoadToolLimits(ctx context.Context) ([]gateway.ToolLimit, error) {
	var rows []LearnedToolLimitRow
	if err := s.db.WithContext(ctx).Find(&rows).Error; err != nil {
		return nil, translate(err, "load tool limits")
	}
	out := make([]gateway.ToolLimit, len(rows))
	for i, r := range rows {
		out[i] = gateway.ToolLimit{Provider: r.Provider, Model: r.Model, MaxTools: r.MaxTools, Source: r.Source,
			LearnedAt: time.UnixMilli(r.LearnedAt).UTC(), ExpiresAt: time.UnixMilli(r.ExpiresAt).UTC()}
	}
	return out, nil
}

func (s *ToolLimitStore) SaveToolLimit(ctx context.Context, l gateway.ToolLimit) error {
	row := LearnedToolLimitRow{Provider: l.Provider, Model: l.Model, MaxTools: l.MaxTools, Source: l.Source,
		LearnedAt: l.LearnedAt.UnixMilli(), ExpiresAt: l.ExpiresAt.UnixMilli()}
	return translate(s.db.WithContext(ctx).Clauses(clause.OnConflict{UpdateAll: true}).Create(&row).Error, "save tool limit")
}

func (s *ToolLimitStore) DeleteToolLimits(ctx context.Context) (int, error) {
	res := s.db.WithContext(ctx).Where("1 = 1").Delete(&LearnedToolLimitRow{})
	return int(res.RowsAffected), translate(res.Error, "delete tool limits")
}

// DeleteExpiredToolLimits removes the limits expired at now and returns how
// many: the sweep of a fleet's singleton job (reads already ignore them).
func (s *ToolLimitStore) DeleteExpiredToolLimits(ctx context.Context, now time.Time) (int, error) {
	res := s.db.WithContext(ctx).Where("expires_at <= ?", now.UnixMilli()).Delete(&LearnedToolLimitRow{})
	return int(res.RowsAffected), translate(res.Error, "delete expired tool limits")
}
