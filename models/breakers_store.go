package models

import (
	"context"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"switchyard/services/resilience"
)

// BreakerStore implements resilience.BreakerStore on domain_circuit_breakers.
// Instants are epoch milliseconds; a zero time is NULL.
type BreakerStore struct{ db *gorm.DB }

var _ resilience.BreakerStore = (*BreakerStore)(nil)

// NewBreakerStore builds the repository.
func NewBreakerStore(db *gorm.DB) *BreakerStore { return &BreakerStore{db: db} }

// LoadBreakers returns every stored breaker, ordered by name.
func (s *BreakerStore) LoadBreakers(ctx context.Context) ([]resilience.BreakerSnapshot, error) {
	var rows []BreakerRow
	if err := s.db.WithContext(ctx).Order("name").Find(&rows).Error; err != nil {
		return nil, translate(err, "load breakers")
	}
	out := make([]resilience.BreakerSnapshot, len(rows))
	for i, r := range rows {
		out[i] = r.domain()
	}
	return out, nil
}

// SaveBreaker inserts or replaces the row of snap.Name. A zero UpdatedAt is
// stamped with the database clock.
func (s *BreakerStore) SaveBreaker(ctx context.Context, snap resilience.BreakerSnapshot) error {
	if snap.UpdatedAt.IsZero() {
		snap.UpdatedAt = s.db.NowFunc()
	}
	row := breakerToRow(snap)
	err := s.db.WithContext(ctx).Clauses(clause.OnConflict{
		Columns:   []clause.Column{{Name: "name"}},
		UpdateAll: true,
	}).Create(&row).Error
	return translate(err, "save breaker "+snap.Name)
}

// DeleteBreaker removes the row of name; a missing row is not an error.
func (s *BreakerStore) DeleteBreaker(ctx context.Context, name string) error {
	err := s.db.WithContext(ctx).Where("name = ?", name).Delete(&BreakerRow{}).Error
	return translate(err, "delete breaker "+name)
}

// DeleteAllBreakers removes every row.
func (s *BreakerStore) DeleteAllBreakers(ctx context.Context) error {
	err := s.db.WithContext(ctx).Where("1 = 1").Delete(&BreakerRow{}).Error
	return translate(err, "delete all breakers")
}

func (r BreakerRow) domain() resilience.BreakerSnapshot {
	return resilience.BreakerSnapshot{
		Name:              r.Name,
		Profile:           resilience.Profile(r.Profile),
		State:             resilience.BreakerState(r.State),
		FailureCount:      r.FailureCount,
		OpenCycleCount:    r.OpenCycleCount,
		OpenedAt:          breakerMsTime(r.OpenedAt),
		LastFailureAt:     breakerMsTime(r.LastFailureAt),
		LastFailureReason: r.LastFailureReason,
		Generation:        uint64(max(r.Generation, 0)),
		UpdatedAt:         time.UnixMilli(r.UpdatedAt).UTC(),
	}
}

func breakerToRow(s resilience.BreakerSnapshot) BreakerRow {
	return BreakerRow{
		Name:              s.Name,
		Profile:           string(s.Profile),
		State:             string(s.State),
		FailureCount:      s.FailureCount,
		OpenCycleCount:    s.OpenCycleCount,
		OpenedAt:          breakerTimeMs(s.OpenedAt),
		LastFailureAt:     breakerTimeMs(s.LastFailureAt),
		LastFailureReason: s.LastFailureReason,
		Generation:        int64(s.Generation & (1<<63 - 1)),
		UpdatedAt:         s.UpdatedAt.UnixMilli(),
	}
}

// breakerTimeMs maps a zero time to NULL, anything else to epoch ms.
func breakerTimeMs(t time.Time) *int64 {
	if t.IsZero() {
		return nil
	}
	return ms(&t)
}

// breakerMsTime maps NULL to the zero time.
func breakerMsTime(v *int64) time.Time {
	if t := fromMs(v); t != nil {
		return *t
	}
	return time.Time{}
}
