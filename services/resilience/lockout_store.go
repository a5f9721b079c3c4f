package resilience

import (
	"context"
	"sync"
	"time"
)

// LockoutStore persists lockouts (model_lockouts) with their
// compare-and-set version. Implementations: the memory store below,
// models.LockoutStore on SQLite and PostgreSQL.
type LockoutStore interface {
	// LoadLockouts returns every stored record.
	LoadLockouts(ctx context.Context) ([]LockoutRecord, error)
	// LoadLockout returns the record of key; found=false when it has none.
	LoadLockout(ctx context.Context, key LockKey) (rec LockoutRecord, found bool, err error)
	// CompareAndSaveLockout writes rec (rec.Version becomes the row's
	// version) when the stored row's version is expect, or, with expect
	// < 0, when there is no row. It returns the row after the call: rec
	// when swapped, else what is stored (found=false: no row).
	CompareAndSaveLockout(ctx context.Context, expect int64, rec LockoutRecord) (cur LockoutRecord, found, swapped bool, err error)
	// CompareAndDeleteLockout deletes the row of key when its version is
	// expect; otherwise it returns what is stored (found=false: no row).
	CompareAndDeleteLockout(ctx context.Context, key LockKey, expect int64) (cur LockoutRecord, found, swapped bool, err error)
	// SaveLockoutDiagnostics moves last_failure_at of key's row to at when
	// at is later (monotone), leaving the version alone.
	SaveLockoutDiagnostics(ctx context.Context, key LockKey, at time.Time) error
	// DeleteLockout deletes the record of key; a missing record is no error.
	DeleteLockout(ctx context.Context, key LockKey) error
	// DeleteLockouts deletes every record the filter selects and returns how many.
	DeleteLockouts(ctx context.Context, filter LockFilter) (int, error)
}

// MemoryLockoutStore is a LockoutStore that keeps records in memory only
// (nothing survives a restart). It is safe for concurrent use.
type MemoryLockoutStore struct {
	mu   sync.Mutex
	recs map[LockKey]LockoutRecord
	fail error
}

var _ LockoutStore = (*MemoryLockoutStore)(nil)

// NewMemoryLockoutStore returns an empty memory store.
func NewMemoryLockoutStore() *MemoryLockoutStore {
	return &MemoryLockoutStore{recs: map[LockKey]LockoutRecord{}}
}

// SetFailure makes every call fail with err (nil: work again).
func (s *MemoryLockoutStore) SetFailure(err error) {
	s.mu.Lock()
	s.fail = err
	s.mu.Unlock()
}

// LoadLockouts returns every record.
func (s *MemoryLockoutStore) LoadLockouts(ctx context.Context) ([]LockoutRecord, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return nil, s.fail
	}
	out := make([]LockoutRecord, 0, len(s.recs))
	for _, r := range s.recs {
		out = append(out, r)
	}
	return out, nil
}

// LoadLockout returns the record of key.
func (s *MemoryLockoutStore) LoadLockout(_ context.Context, key LockKey) (LockoutRecord, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return LockoutRecord{}, false, s.fail
	}
	r, ok := s.recs[key]
	return r, ok, nil
}

// SaveLockout inserts or replaces rec.
func (s *MemoryLockoutStore) SaveLockout(ctx context.Context, rec LockoutRecord) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return s.fail
	}
	s.recs[rec.LockKey] = rec
	return nil
}

// CompareAndSaveLockout stores rec when the version matches.
func (s *MemoryLockoutStore) CompareAndSaveLockout(_ context.Context, expect int64, rec LockoutRecord) (LockoutRecord, bool, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return LockoutRecord{}, false, false, s.fail
	}
	cur, ok := s.recs[rec.LockKey]
	if ok != (expect >= 0) || ok && cur.Version != expect {
		return cur, ok, false, nil
	}
	s.recs[rec.LockKey] = rec
	return rec, true, true, nil
}

// CompareAndDeleteLockout deletes the record when the version matches.
func (s *MemoryLockoutStore) CompareAndDeleteLockout(_ context.Context, key LockKey, expect int64) (LockoutRecord, bool, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return LockoutRecord{}, false, false, s.fail
	}
	cur, ok := s.recs[key]
	if !ok || cur.Version != expect {
		return cur, ok, false, nil
	}
	delete(s.recs, key)
	return LockoutRecord{}, false, true, nil
}

// SaveLockoutDiagnostics moves the last failure of key forward.
func (s *MemoryLockoutStore) SaveLockoutDiagnostics(_ context.Context, key LockKey, at time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return s.fail
	}
	if r, ok := s.recs[key]; ok && at.After(r.LastFailureAt) {
		r.LastFailureAt = at
		s.recs[key] = r
	}
	return nil
}

// DeleteLockout deletes the record of key.
func (s *MemoryLockoutStore) DeleteLockout(ctx context.Context, key LockKey) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return s.fail
	}
	delete(s.recs, key)
	return nil
}

// DeleteLockouts deletes the records the filter selects.
func (s *MemoryLockoutStore) DeleteLockouts(ctx context.Context, filter LockFilter) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return 0, s.fail
	}
	n := 0
	for k := range s.recs {
		if filter.Matches(k) {
			delete(s.recs, k)
			n++
		}
	}
	return n, nil
}
