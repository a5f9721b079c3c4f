package models

import (
	"context"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"switchyard/services/resilience"
)

// BreakerStore implements resilience.BreakerStore on domain_circuit_breakers,
// the authority a fleet shares (scale-out §3.4 row 2): counted failures are
// increments guarded by the generation, transitions compare-and-set the
// generation and count, probes are granted against half_open_in_flight and
// lapse at probe_until. Instants are epoch milliseconds; a zero time is
// NULL. Every statement is plain SQL both dialects run (upsert with a
// WHERE, RETURNING, CASE instead of GREATEST).
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
		HalfOpenInFlight:  r.HalfOpenInFlight,
		ProbeUntil:        breakerMsTime(r.ProbeUntil),
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
		HalfOpenInFlight:  s.HalfOpenInFlight,
		ProbeUntil:        breakerTimeMs(s.ProbeUntil),
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

// breakerCols is every column, in the order of the RETURNING lists.
const breakerCols = "name, profile, state, failure_count, open_cycle_count, opened_at, last_failure_at, " +
	"last_failure_reason, generation, updated_at, half_open_in_flight, probe_until"

// LoadBreaker returns the row of name; found=false when there is none.
func (s *BreakerStore) LoadBreaker(ctx context.Context, name string) (resilience.BreakerSnapshot, bool, error) {
	var rows []BreakerRow
	if err := s.db.WithContext(ctx).Where("name = ?", name).Limit(1).Find(&rows).Error; err != nil {
		return resilience.BreakerSnapshot{}, false, translate(err, "load breaker "+name)
	}
	if len(rows) == 0 {
		return resilience.BreakerSnapshot{}, false, nil
	}
	return rows[0].domain(), true, nil
}

// returning runs a statement that returns at most one row of the table.
func (s *BreakerStore) returning(ctx context.Context, op, q string, args ...any) (resilience.BreakerSnapshot, bool, error) {
	var rows []BreakerRow
	if err := s.db.WithContext(ctx).Raw(q+" RETURNING "+breakerCols, args...).Scan(&rows).Error; err != nil {
		return resilience.BreakerSnapshot{}, false, translate(err, op)
	}
	if len(rows) == 0 {
		return resilience.BreakerSnapshot{}, false, nil
	}
	return rows[0].domain(), true, nil
}

// CountBreakerFailure adds one counted failure at generation snap.Generation
// (inserting the row with a count of 1 when there is none).
func (s *BreakerStore) CountBreakerFailure(ctx context.Context, snap resilience.BreakerSnapshot) (resilience.BreakerSnapshot, bool, error) {
	if snap.UpdatedAt.IsZero() {
		snap.UpdatedAt = s.db.NowFunc()
	}
	snap.FailureCount = 1
	r := breakerToRow(snap)
	row, ok, err := s.returning(ctx, "count failure of breaker "+snap.Name,
		`INSERT INTO domain_circuit_breakers (`+breakerCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (name) DO UPDATE SET failure_count = domain_circuit_breakers.failure_count + 1,
			last_failure_at = excluded.last_failure_at, last_failure_reason = excluded.last_failure_reason,
			profile = excluded.profile, updated_at = excluded.updated_at
		WHERE domain_circuit_breakers.generation = excluded.generation`,
		r.Name, r.Profile, r.State, r.FailureCount, r.OpenCycleCount, r.OpenedAt, r.LastFailureAt,
		PostgresText(r.LastFailureReason), r.Generation, r.UpdatedAt, r.HalfOpenInFlight, r.ProbeUntil)
	if err != nil || ok {
		return row, ok, err
	}
	cur, _, err := s.LoadBreaker(ctx, snap.Name)
	return cur, false, err
}

// LeakBreaker takes n off the count of a CLOSED or DEGRADED row of
// generation gen; a CLOSED row that reaches zero is deleted.
func (s *BreakerStore) LeakBreaker(ctx context.Context, name string, gen uint64, n int, at time.Time) (resilience.BreakerSnapshot, bool, error) {
	var (
		row resilience.BreakerSnapshot
		ok  bool
	)
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		inner := &BreakerStore{db: tx}
		var err error
		row, ok, err = inner.returning(ctx, "leak breaker "+name,
			`UPDATE domain_circuit_breakers SET failure_count = CASE WHEN failure_count > ? THEN failure_count - ? ELSE 0 END,
				updated_at = ? WHERE name = ? AND generation = ? AND state IN ('CLOSED', 'DEGRADED')`,
			n, n, at.UnixMilli(), name, int64(gen&(1<<63-1)))
		if err != nil {
			return err
		}
		if !ok {
			row, ok, err = inner.LoadBreaker(ctx, name)
			return err
		}
		if row.State == resilience.BreakerClosed && row.FailureCount == 0 {
			ok = false
			return tx.Where("name = ? AND generation = ? AND state = 'CLOSED' AND failure_count = 0", name, int64(gen&(1<<63-1))).
				Delete(&BreakerRow{}).Error
		}
		return nil
	})
	if err != nil {
		return resilience.BreakerSnapshot{}, false, translate(err, "leak breaker "+name)
	}
	return row, ok, nil
}

// CompareAndSaveBreaker replaces the row of next.Name with next (deletes it
// when next is CLOSED with a zero count) when its generation is gen and its
// count n.
func (s *BreakerStore) CompareAndSaveBreaker(ctx context.Context, gen uint64, n int, next resilience.BreakerSnapshot) (resilience.BreakerSnapshot, bool, bool, error) {
	g := int64(gen & (1<<63 - 1))
	db := s.db.WithContext(ctx)
	var res *gorm.DB
	if next.State == resilience.BreakerClosed && next.FailureCount <= 0 {
		res = db.Where("name = ? AND generation = ? AND failure_count = ?", next.Name, g, n).Delete(&BreakerRow{})
	} else {
		if next.UpdatedAt.IsZero() {
			next.UpdatedAt = s.db.NowFunc()
		}
		r := breakerToRow(next)
		res = db.Model(&BreakerRow{}).Where("name = ? AND generation = ? AND failure_count = ?", next.Name, g, n).
			UpdateColumns(map[string]any{"profile": r.Profile, "state": r.State, "failure_count": r.FailureCount,
				"open_cycle_count": r.OpenCycleCount, "opened_at": r.OpenedAt, "last_failure_at": r.LastFailureAt,
				"last_failure_reason": PostgresText(r.LastFailureReason), "generation": r.Generation, "updated_at": r.UpdatedAt,
				"half_open_in_flight": r.HalfOpenInFlight, "probe_until": r.ProbeUntil})
	}
	if res.Error != nil {
		return resilience.BreakerSnapshot{}, false, false, translate(res.Error, "save breaker "+next.Name)
	}
	if res.RowsAffected == 1 {
		return next, !(next.State == resilience.BreakerClosed && next.FailureCount <= 0), true, nil
	}
	cur, found, err := s.LoadBreaker(ctx, next.Name)
	return cur, found, false, err
}

// AcquireBreakerProbe grants one HALF_OPEN probe of generation gen while
// fewer than limit are out or the last grant lapsed.
func (s *BreakerStore) AcquireBreakerProbe(ctx context.Context, name string, gen uint64, limit int, now, until time.Time) (resilience.BreakerSnapshot, bool, bool, error) {
	nowMs := now.UnixMilli()
	row, ok, err := s.returning(ctx, "acquire probe of breaker "+name,
		`UPDATE domain_circuit_breakers SET
			half_open_in_flight = CASE WHEN probe_until IS NOT NULL AND probe_until <= ? THEN 1 ELSE half_open_in_flight + 1 END,
			probe_until = ?
		WHERE name = ? AND generation = ? AND state = 'HALF_OPEN'
			AND (half_open_in_flight < ? OR (probe_until IS NOT NULL AND probe_until <= ?))`,
		nowMs, until.UnixMilli(), name, int64(gen&(1<<63-1)), limit, nowMs)
	if err != nil || ok {
		return row, ok, ok, err
	}
	cur, found, err := s.LoadBreaker(ctx, name)
	return cur, found, false, err
}

// ReleaseBreakerProbe gives back one probe of generation gen.
func (s *BreakerStore) ReleaseBreakerProbe(ctx context.Context, name string, gen uint64) (resilience.BreakerSnapshot, bool, error) {
	row, ok, err := s.returning(ctx, "release probe of breaker "+name,
		`UPDATE domain_circuit_breakers SET half_open_in_flight = half_open_in_flight - 1
		WHERE name = ? AND generation = ? AND state = 'HALF_OPEN' AND half_open_in_flight > 0`,
		name, int64(gen&(1<<63-1)))
	if err != nil || ok {
		return row, ok, err
	}
	return s.LoadBreaker(ctx, name)
}
