package resilience

import (
	"context"
	"sync"
	"time"
)

// BreakerSnapshot is the persisted form of one breaker
// (domain_circuit_breakers). Zero times mean "not set" (NULL).
type BreakerSnapshot struct {
	Name              string // canonical provider id
	Profile           Profile
	State             BreakerState
	FailureCount      int
	OpenCycleCount    int
	OpenedAt          time.Time
	LastFailureAt     time.Time
	LastFailureReason string
	Generation        uint64
	UpdatedAt         time.Time
	// HalfOpenInFlight counts the HALF_OPEN probes out across the fleet;
	// ProbeUntil is when the latest grant lapses, so a probe held by a
	// replica that died stops blocking the breaker then.
	HalfOpenInFlight int
	ProbeUntil       time.Time
}

// gone reports whether s is CLOSED with a zero count: such a breaker has
// no row.
func (s BreakerSnapshot) gone() bool { return s.State == BreakerClosed && s.FailureCount <= 0 }

// BreakerStore holds the breakers as the fleet's authority: counted
// failures are increments (exact however many replicas count), transitions
// compare-and-set the row on its generation and count, probes are granted
// against the fleet-wide in-flight count. A CLOSED breaker with a zero
// count has no row. Implementations: MemoryBreakerStore,
// models.BreakerStore on SQLite and PostgreSQL.
type BreakerStore interface {
	LoadBreakers(ctx context.Context) ([]BreakerSnapshot, error)
	// LoadBreaker returns name's row; found=false when it has none.
	LoadBreaker(ctx context.Context, name string) (row BreakerSnapshot, found bool, err error)
	// CountBreakerFailure adds one counted failure to the row of s.Name
	// when its generation is s.Generation (recording s's last failure,
	// profile and update time), or inserts s with a count of 1 when there is
	// no row. It returns the row after the call; counted=false (and the
	// stored row) when the stored generation differs.
	CountBreakerFailure(ctx context.Context, s BreakerSnapshot) (row BreakerSnapshot, counted bool, err error)
	// LeakBreaker takes n from the count of name's row (not below zero)
	// when its generation is gen and it is CLOSED or DEGRADED; a CLOSED row
	// that reaches zero is deleted. It returns the row after the call
	// (found=false: none).
	LeakBreaker(ctx context.Context, name string, gen uint64, n int, at time.Time) (row BreakerSnapshot, found bool, err error)
	// CompareAndSaveBreaker replaces name's row with s when its generation
	// is gen and its count n (s CLOSED with a zero count deletes it). When
	// not swapped it returns the stored row (found=false: none).
	CompareAndSaveBreaker(ctx context.Context, gen uint64, n int, s BreakerSnapshot) (cur BreakerSnapshot, found, swapped bool, err error)
	// AcquireBreakerProbe counts one more probe out when the row is
	// HALF_OPEN at generation gen with fewer than limit out, or its last
	// grant lapsed (probe_until ≤ now; the count restarts at one). A grant
	// lapses at until. It returns the row after the call.
	AcquireBreakerProbe(ctx context.Context, name string, gen uint64, limit int, now, until time.Time) (row BreakerSnapshot, found, granted bool, err error)
	// ReleaseBreakerProbe gives back one probe of generation gen.
	ReleaseBreakerProbe(ctx context.Context, name string, gen uint64) (row BreakerSnapshot, found bool, err error)
	// SaveBreaker inserts or replaces the row named s.Name.
	SaveBreaker(ctx context.Context, s BreakerSnapshot) error
	// DeleteBreaker removes one row; a missing row is not an error.
	DeleteBreaker(ctx context.Context, name string) error
	DeleteAllBreakers(ctx context.Context) error
}

// MemoryBreakerStore is a BreakerStore in memory (tests, and processes that
// need no persistence). It is safe for concurrent use; SetFailure makes it
// behave like an unreachable database.
type MemoryBreakerStore struct {
	mu   sync.Mutex
	rows map[string]BreakerSnapshot
	fail error
	ops  int
}

var _ BreakerStore = (*MemoryBreakerStore)(nil)

// NewMemoryBreakerStore returns an empty store.
func NewMemoryBreakerStore() *MemoryBreakerStore {
	return &MemoryBreakerStore{rows: map[string]BreakerSnapshot{}}
}

// SetFailure makes every call fail with err (nil: work again).
func (s *MemoryBreakerStore) SetFailure(err error) {
	s.mu.Lock()
	s.fail = err
	s.mu.Unlock()
}

// Ops counts the calls that wrote (or tried to write) a row.
func (s *MemoryBreakerStore) Ops() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ops
}

// Row returns name's row.
func (s *MemoryBreakerStore) Row(name string) (BreakerSnapshot, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.rows[name]
	return r, ok
}

func (s *MemoryBreakerStore) begin(write bool) error {
	s.mu.Lock()
	if write {
		s.ops++
	}
	return s.fail
}

// LoadBreakers returns every row.
func (s *MemoryBreakerStore) LoadBreakers(context.Context) ([]BreakerSnapshot, error) {
	defer s.mu.Unlock()
	if err := s.begin(false); err != nil {
		return nil, err
	}
	out := make([]BreakerSnapshot, 0, len(s.rows))
	for _, r := range s.rows {
		out = append(out, r)
	}
	return out, nil
}

// LoadBreaker returns name's row.
func (s *MemoryBreakerStore) LoadBreaker(_ context.Context, name string) (BreakerSnapshot, bool, error) {
	defer s.mu.Unlock()
	if err := s.begin(false); err != nil {
		return BreakerSnapshot{}, false, err
	}
	r, ok := s.rows[name]
	return r, ok, nil
}

// CountBreakerFailure adds one failure at generation snap.Generation.
func (s *MemoryBreakerStore) CountBreakerFailure(_ context.Context, snap BreakerSnapshot) (BreakerSnapshot, bool, error) {
	defer s.mu.Unlock()
	if err := s.begin(true); err != nil {
		return BreakerSnapshot{}, false, err
	}
	r, ok := s.rows[snap.Name]
	if !ok {
		snap.FailureCount = 1
		s.rows[snap.Name] = snap
		return snap, true, nil
	}
	if r.Generation != snap.Generation {
		return r, false, nil
	}
	r.FailureCount++
	r.LastFailureAt, r.LastFailureReason, r.UpdatedAt = snap.LastFailureAt, snap.LastFailureReason, snap.UpdatedAt
	if snap.Profile != "" {
		r.Profile = snap.Profile
	}
	s.rows[snap.Name] = r
	return r, true, nil
}

// LeakBreaker takes n off the count of a CLOSED or DEGRADED row.
func (s *MemoryBreakerStore) LeakBreaker(_ context.Context, name string, gen uint64, n int, at time.Time) (BreakerSnapshot, bool, error) {
	defer s.mu.Unlock()
	if err := s.begin(true); err != nil {
		return BreakerSnapshot{}, false, err
	}
	r, ok := s.rows[name]
	if !ok || r.Generation != gen || r.State != BreakerClosed && r.State != BreakerDegraded {
		return r, ok, nil
	}
	r.FailureCount = max(r.FailureCount-n, 0)
	r.UpdatedAt = at
	if r.gone() {
		delete(s.rows, name)
		return BreakerSnapshot{}, false, nil
	}
	s.rows[name] = r
	return r, true, nil
}

// CompareAndSaveBreaker replaces the row when generation and count match.
func (s *MemoryBreakerStore) CompareAndSaveBreaker(_ context.Context, gen uint64, n int, next BreakerSnapshot) (BreakerSnapshot, bool, bool, error) {
	defer s.mu.Unlock()
	if err := s.begin(true); err != nil {
		return BreakerSnapshot{}, false, false, err
	}
	r, ok := s.rows[next.Name]
	if !ok || r.Generation != gen || r.FailureCount != n {
		return r, ok, false, nil
	}
	if next.gone() {
		delete(s.rows, next.Name)
	} else {
		s.rows[next.Name] = next
	}
	return next, !next.gone(), true, nil
}

// AcquireBreakerProbe grants a probe of a HALF_OPEN row.
func (s *MemoryBreakerStore) AcquireBreakerProbe(_ context.Context, name string, gen uint64, limit int, now, until time.Time) (BreakerSnapshot, bool, bool, error) {
	defer s.mu.Unlock()
	if err := s.begin(true); err != nil {
		return BreakerSnapshot{}, false, false, err
	}
	r, ok := s.rows[name]
	if !ok || r.Generation != gen || r.State != BreakerHalfOpen {
		return r, ok, false, nil
	}
	lapsed := !r.ProbeUntil.IsZero() && !r.ProbeUntil.After(now)
	if r.HalfOpenInFlight >= limit && !lapsed {
		return r, true, false, nil
	}
	if lapsed {
		r.HalfOpenInFlight = 0
	}
	r.HalfOpenInFlight++
	r.ProbeUntil = until
	s.rows[name] = r
	return r, true, true, nil
}

// ReleaseBreakerProbe gives one probe back.
func (s *MemoryBreakerStore) ReleaseBreakerProbe(_ context.Context, name string, gen uint64) (BreakerSnapshot, bool, error) {
	defer s.mu.Unlock()
	if err := s.begin(true); err != nil {
		return BreakerSnapshot{}, false, err
	}
	r, ok := s.rows[name]
	if ok && r.Generation == gen && r.State == BreakerHalfOpen && r.HalfOpenInFlight > 0 {
		r.HalfOpenInFlight--
		s.rows[name] = r
	}
	return r, ok, nil
}

// SaveBreaker inserts or replaces the row of snap.Name.
func (s *MemoryBreakerStore) SaveBreaker(_ context.Context, snap BreakerSnapshot) error {
	defer s.mu.Unlock()
	if err := s.begin(true); err != nil {
		return err
	}
	s.rows[snap.Name] = snap
	return nil
}

// DeleteBreaker removes one row.
func (s *MemoryBreakerStore) DeleteBreaker(_ context.Context, name string) error {
	defer s.mu.Unlock()
	if err := s.begin(true); err != nil {
		return err
	}
	delete(s.rows, name)
	return nil
}

// DeleteAllBreakers removes every row.
func (s *MemoryBreakerStore) DeleteAllBreakers(context.Context) error {
	defer s.mu.Unlock()
	if err := s.begin(true); err != nil {
		return err
	}
	clear(s.rows)
	return nil
}
