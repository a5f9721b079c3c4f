package models

import (
	"context"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"switchyard/services/traffic"
)

// LearnedRateLimitStore persists the request queues' learned limits
// (learned_rate_limits). The table's updated_at holds the limit's
// ObservedAt, which Restore compares with the 24 h cut-off.
type LearnedRateLimitStore struct{ db *gorm.DB }

var _ traffic.LearnedStore = (*LearnedRateLimitStore)(nil)

// NewLearnedRateLimitStore builds the repository.
func NewLearnedRateLimitStore(db *gorm.DB) *LearnedRateLimitStore {
	return &LearnedRateLimitStore{db: db}
}

// LoadLearnedLimits returns every stored limit; unknown values (NULL) load
// as 0 and a zero time.
func (s *LearnedRateLimitStore) LoadLearnedLimits(ctx context.Context) ([]traffic.LearnedLimit, error) {
	var rows []LearnedRateLimitRow
	if err := s.db.WithContext(ctx).Find(&rows).Error; err != nil {
		return nil, translate(err, "load learned rate limits")
	}
	out := make([]traffic.LearnedLimit, len(rows))
	for i, r := range rows {
		l := traffic.LearnedLimit{Key: r.LimiterKey, ObservedAt: time.UnixMilli(r.UpdatedAt).UTC()}
		if r.LimitRequests != nil {
			l.LimitRequests = int(*r.LimitRequests)
		}
		if r.Remaining != nil {
			l.Remaining = int(*r.Remaining)
		}
		if t := fromMs(r.ResetAt); t != nil {
			l.ResetAt = *t
		}
		if r.MinTimeMs != nil {
			l.MinTimeMs = *r.MinTimeMs
		}
		out[i] = l
	}
	return out, nil
}

// SaveLearnedLimits upserts the limits in one statement.
func (s *LearnedRateLimitStore) SaveLearnedLimits(ctx context.Context, limits []traffic.LearnedLimit) error {
	if len(limits) == 0 {
		return nil
	}
	rows := make([]LearnedRateLimitRow, len(limits))
	for i, l := range limits {
		limit, remaining := int64(l.LimitRequests), int64(l.Remaining)
		minTime := l.MinTimeMs
		rows[i] = LearnedRateLimitRow{LimiterKey: l.Key, LimitRequests: &limit, Remaining: &remaining,
			MinTimeMs: &minTime, UpdatedAt: l.ObservedAt.UnixMilli()}
		if !l.ResetAt.IsZero() {
			rows[i].ResetAt = ms(&l.ResetAt)
		}
	}
	err := s.db.WithContext(ctx).Clauses(clause.OnConflict{UpdateAll: true}).Create(&rows).Error
	return translate(err, "save learned rate limits")
}

// DeleteLearnedLimits deletes the rows of keys.
func (s *LearnedRateLimitStore) DeleteLearnedLimits(ctx context.Context, keys []string) error {
	if len(keys) == 0 {
		return nil
	}
	err := s.db.WithContext(ctx).Where("limiter_key IN ?", keys).Delete(&LearnedRateLimitRow{}).Error
	return translate(err, "delete learned rate limits")
}
