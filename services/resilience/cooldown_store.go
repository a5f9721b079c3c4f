package resilience

import (
	"context"
	"sync"

	"switchyard/services"
)

// ConnectionStateStore persists the resilience columns of connections
// (rate_limited_until … last_reject_at) with their compare-and-set version
// (state_version). models.ConnectionStateStore implements it on SQLite and
// PostgreSQL, MemoryConnectionStateStore in memory. Only decisions move the
// version; diagnostics never do.
type ConnectionStateStore interface {
	// LoadStates returns the state of every connection, by id.
	LoadStates(ctx context.Context) (map[string]VersionedState, error)
	// LoadState returns one connection's state; services.ErrNotFound for
	// an unknown id.
	LoadState(ctx context.Context, id string) (VersionedState, error)
	// CompareAndSaveState writes the state columns of connection id (never
	// its credentials or configuration) and bumps its version, when the
	// stored version is expect (expect < 0: whatever it is). It returns the
	// row after the call: the new version when swapped, else the stored
	// state that differs. services.ErrNotFound for an unknown id.
	CompareAndSaveState(ctx context.Context, id string, expect int64, st services.ConnectionState) (cur VersionedState, swapped bool, err error)
	// SaveDiagnostics writes last_error, last_error_reason,
	// last_error_status, error_code and last_error_at of st unless the
	// stored last_error_at is later (monotone), leaving the version alone.
	// A missing row is not an error.
	SaveDiagnostics(ctx context.Context, id string, st services.ConnectionState) error
	// SetEnabled switches a connection on or off (autoDisableBannedAccounts).
	SetEnabled(ctx context.Context, id string, enabled bool) error
}

// VersionedState is a connection's state with its compare-and-set version.
type VersionedState struct {
	State   services.ConnectionState
	Version int64
}

// MemoryConnectionStateStore is a ConnectionStateStore in memory (tests,
// and deployments that need no persistence). An unknown id is an empty row
// at version 0, so a mirror seeded with Replace writes without a row.
type MemoryConnectionStateStore struct {
	mu       sync.Mutex
	states   map[string]services.ConnectionState
	versions map[string]int64
	disabled map[string]bool
	writes   int
	fail     error
}

var _ ConnectionStateStore = (*MemoryConnectionStateStore)(nil)

// NewMemoryConnectionStateStore returns an empty store.
func NewMemoryConnectionStateStore() *MemoryConnectionStateStore {
	return &MemoryConnectionStateStore{states: map[string]services.ConnectionState{}, versions: map[string]int64{},
		disabled: map[string]bool{}}
}

// SetFailure makes every call fail with err (nil: work again), as an
// unreachable database does.
func (m *MemoryConnectionStateStore) SetFailure(err error) {
	m.mu.Lock()
	m.fail = err
	m.mu.Unlock()
}

// LoadConnectionStates returns a copy of every stored state.
func (m *MemoryConnectionStateStore) LoadConnectionStates(context.Context) (map[string]services.ConnectionState, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string]services.ConnectionState, len(m.states))
	for id, st := range m.states {
		out[id] = cloneConnectionState(st)
	}
	return out, nil
}

// LoadStates returns a copy of every stored state with its version.
func (m *MemoryConnectionStateStore) LoadStates(context.Context) (map[string]VersionedState, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fail != nil {
		return nil, m.fail
	}
	out := make(map[string]VersionedState, len(m.states))
	for id, st := range m.states {
		out[id] = VersionedState{State: cloneConnectionState(st), Version: m.versions[id]}
	}
	return out, nil
}

// LoadState returns one row (the empty row at version 0 when unknown).
func (m *MemoryConnectionStateStore) LoadState(_ context.Context, id string) (VersionedState, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fail != nil {
		return VersionedState{}, m.fail
	}
	return VersionedState{State: cloneConnectionState(m.states[id]), Version: m.versions[id]}, nil
}

// SaveConnectionState stores st (creating the entry when needed) and bumps
// the version, whatever it was.
func (m *MemoryConnectionStateStore) SaveConnectionState(ctx context.Context, id string, st services.ConnectionState) error {
	_, _, err := m.CompareAndSaveState(ctx, id, -1, st)
	return err
}

// CompareAndSaveState stores st when the version is expect (or expect < 0).
func (m *MemoryConnectionStateStore) CompareAndSaveState(_ context.Context, id string, expect int64, st services.ConnectionState) (VersionedState, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fail != nil {
		return VersionedState{}, false, m.fail
	}
	v := m.versions[id]
	if expect >= 0 && expect != v {
		return VersionedState{State: cloneConnectionState(m.states[id]), Version: v}, false, nil
	}
	st.TestStatus = m.states[id].TestStatus // not a resilience column
	m.states[id] = cloneConnectionState(st)
	m.versions[id] = v + 1
	m.writes++
	return VersionedState{State: cloneConnectionState(st), Version: v + 1}, true, nil
}

// SaveDiagnostics stores the diagnostics of st when they are newer.
func (m *MemoryConnectionStateStore) SaveDiagnostics(_ context.Context, id string, st services.ConnectionState) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fail != nil {
		return m.fail
	}
	cur := m.states[id]
	if st.LastErrorAt != nil && (cur.LastErrorAt == nil || !cur.LastErrorAt.After(*st.LastErrorAt)) {
		copyDiagnostics(&cur, st)
		m.states[id] = cloneConnectionState(cur)
	}
	m.writes++
	return nil
}

// SetEnabled records the switch.
func (m *MemoryConnectionStateStore) SetEnabled(_ context.Context, id string, enabled bool) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fail != nil {
		return m.fail
	}
	m.disabled[id] = !enabled
	return nil
}

// Disabled reports whether SetEnabled(id, false) was the last switch.
func (m *MemoryConnectionStateStore) Disabled(id string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.disabled[id]
}

// Writes counts the writes (decisions and diagnostics).
func (m *MemoryConnectionStateStore) Writes() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.writes
}

// Version is the stored version of id.
func (m *MemoryConnectionStateStore) Version(id string) int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.versions[id]
}
