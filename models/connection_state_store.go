package models

import (
	"context"
	"database/sql"
	"strings"

	"gorm.io/gorm"

	"switchyard/services"
	"switchyard/services/resilience"
)

// ConnectionStateStore persists the resilience state of connections
// (20-resilience §4, §15) in the state columns of connections, with the
// compare-and-set version state_version every decision checks and bumps
// (scale-out §3.5). It implements resilience.ConnectionStateStore on both
// dialects. It never reads or writes credentials, the proxy or any other
// configuration column, except enabled for autoDisableBannedAccounts.
type ConnectionStateStore struct {
	db *gorm.DB
}

var _ resilience.ConnectionStateStore = (*ConnectionStateStore)(nil)

// NewConnectionStateStore builds the repository.
func NewConnectionStateStore(db *gorm.DB) *ConnectionStateStore {
	return &ConnectionStateStore{db: db}
}

// connectionStateColumns are the columns SaveConnectionState writes and
// LoadConnectionStates reads (plus id and test_status on read).
var connectionStateColumns = []string{
	"rate_limited_until", "backoff_level", "terminal_status", "terminal_at", "last_error",
	"last_error_reason", "last_error_status", "error_code", "last_error_at", "auth_fail_count",
	"last_auth_fail_at", "reject_streak", "last_reject_at", "cooldown_reason",
}

// LoadConnectionStates returns the state of every connection, by id.
func (s *ConnectionStateStore) LoadConnectionStates(ctx context.Context) (map[string]services.ConnectionState, error) {
	var rows []connectionRow
	cols := append([]string{"id", "test_status"}, connectionStateColumns...)
	if err := s.db.WithContext(ctx).Model(&connectionRow{}).Select(cols).Find(&rows).Error; err != nil {
		return nil, translate(err, "load connection states")
	}
	out := make(map[string]services.ConnectionState, len(rows))
	for _, r := range rows {
		out[r.ID] = services.ConnectionState{
			RateLimitedUntil: fromMs(r.RateLimitedUntil), BackoffLevel: r.BackoffLevel,
			TerminalStatus: r.TerminalStatus.String, TerminalAt: fromMs(r.TerminalAt),
			LastError: r.LastError, LastErrorReason: r.LastErrorReason, LastErrorStatus: r.LastErrorStatus,
			ErrorCode: r.ErrorCode, LastErrorAt: fromMs(r.LastErrorAt), AuthFailCount: r.AuthFailCount,
			LastAuthFailAt: fromMs(r.LastAuthFailAt), RejectStreak: r.RejectStreak, LastRejectAt: fromMs(r.LastRejectAt),
			CooldownReason: r.CooldownReason, TestStatus: r.TestStatus,
		}
	}
	return out, nil
}

// SaveConnectionState writes the state columns of connection id in one
// UPDATE; updated_at (the configuration's edit time) is left alone.
// services.ErrNotFound for an unknown id.
func (s *ConnectionStateStore) SaveConnectionState(ctx context.Context, id string, st services.ConnectionState) error {
	cols := map[string]any{
		"rate_limited_until": ms(st.RateLimitedUntil),
		"backoff_level":      st.BackoffLevel,
		"terminal_status":    sql.NullString{String: st.TerminalStatus, Valid: st.TerminalStatus != ""},
		"terminal_at":        ms(st.TerminalAt),
		"last_error":         st.LastError,
		"last_error_reason":  st.LastErrorReason,
		"last_error_status":  st.LastErrorStatus,
		"error_code":         st.ErrorCode,
		"last_error_at":      ms(st.LastErrorAt),
		"auth_fail_count":    st.AuthFailCount,
		"last_auth_fail_at":  ms(st.LastAuthFailAt),
		"reject_streak":      st.RejectStreak,
		"last_reject_at":     ms(st.LastRejectAt),
		"cooldown_reason":    st.CooldownReason,
	}
	res := s.db.WithContext(ctx).Model(&connectionRow{}).Where("id = ?", id).UpdateColumns(cols)
	if res.Error != nil {
		return translate(res.Error, "save state of connection "+id)
	}
	if res.RowsAffected == 0 {
		return translate(gorm.ErrRecordNotFound, "save state of connection "+id)
	}
	return nil
}

// SetEnabled switches connection id on or off (and stamps updated_at, as
// enabled is configuration). services.ErrNotFound for an unknown id.
func (s *ConnectionStateStore) SetEnabled(ctx context.Context, id string, enabled bool) error {
	res := s.db.WithContext(ctx).Model(&connectionRow{}).Where("id = ?", id).Update("enabled", enabled)
	if res.Error != nil {
		return translate(res.Error, "set enabled of connection "+id)
	}
	if res.RowsAffected == 0 {
		return translate(gorm.ErrRecordNotFound, "set enabled of connection "+id)
	}
	return nil
}

// connStateRow is the state columns of a connection with their version.
type connStateRow struct {
	ID               string
	RateLimitedUntil *int64
	BackoffLevel     int
	TerminalStatus   sql.NullString
	TerminalAt       *int64
	LastError        string
	LastErrorReason  string
	LastErrorStatus  int
	ErrorCode        string
	LastErrorAt      *int64
	AuthFailCount    int
	LastAuthFailAt   *int64
	RejectStreak     int
	LastRejectAt     *int64
	CooldownReason   string
	TestStatus       string
	StateVersion     int64
}

func (r connStateRow) versioned() resilience.VersionedState {
	return resilience.VersionedState{Version: r.StateVersion, State: services.ConnectionState{
		RateLimitedUntil: fromMs(r.RateLimitedUntil), BackoffLevel: r.BackoffLevel,
		TerminalStatus: r.TerminalStatus.String, TerminalAt: fromMs(r.TerminalAt),
		LastError: r.LastError, LastErrorReason: r.LastErrorReason, LastErrorStatus: r.LastErrorStatus,
		ErrorCode: r.ErrorCode, LastErrorAt: fromMs(r.LastErrorAt), AuthFailCount: r.AuthFailCount,
		LastAuthFailAt: fromMs(r.LastAuthFailAt), RejectStreak: r.RejectStreak, LastRejectAt: fromMs(r.LastRejectAt),
		CooldownReason: r.CooldownReason, TestStatus: r.TestStatus,
	}}
}

var connStateSelect = append([]string{"id", "test_status", "state_version"}, connectionStateColumns...)

// LoadStates returns the state and version of every connection, by id.
func (s *ConnectionStateStore) LoadStates(ctx context.Context) (map[string]resilience.VersionedState, error) {
	var rows []connStateRow
	if err := s.db.WithContext(ctx).Table("connections").Select(connStateSelect).Find(&rows).Error; err != nil {
		return nil, translate(err, "load connection states")
	}
	out := make(map[string]resilience.VersionedState, len(rows))
	for _, r := range rows {
		out[r.ID] = r.versioned()
	}
	return out, nil
}

// LoadState returns the state and version of connection id;
// services.ErrNotFound for an unknown id.
func (s *ConnectionStateStore) LoadState(ctx context.Context, id string) (resilience.VersionedState, error) {
	var rows []connStateRow
	if err := s.db.WithContext(ctx).Table("connections").Select(connStateSelect).Where("id = ?", id).Limit(1).Find(&rows).Error; err != nil {
		return resilience.VersionedState{}, translate(err, "load state of connection "+id)
	}
	if len(rows) == 0 {
		return resilience.VersionedState{}, translate(gorm.ErrRecordNotFound, "load state of connection "+id)
	}
	return rows[0].versioned(), nil
}

// casStateSQL writes every state column and bumps state_version in one
// statement; both dialects return the new version.
var casStateSQL = "UPDATE connections SET " + strings.Join(connectionStateColumns, " = ?, ") +
	" = ?, state_version = state_version + 1 WHERE id = ?"

// CompareAndSaveState writes the state columns of connection id and bumps
// its version when the stored version is expect (expect < 0: always). Not
// swapped: the stored row is returned. services.ErrNotFound for an unknown
// id.
func (s *ConnectionStateStore) CompareAndSaveState(ctx context.Context, id string, expect int64, st services.ConnectionState) (resilience.VersionedState, bool, error) {
	args := []any{ms(st.RateLimitedUntil), st.BackoffLevel,
		sql.NullString{String: st.TerminalStatus, Valid: st.TerminalStatus != ""}, ms(st.TerminalAt),
		PostgresText(st.LastError), st.LastErrorReason, st.LastErrorStatus, PostgresText(st.ErrorCode), ms(st.LastErrorAt),
		st.AuthFailCount, ms(st.LastAuthFailAt), st.RejectStreak, ms(st.LastRejectAt), st.CooldownReason, id}
	q := casStateSQL
	if expect >= 0 {
		q += " AND state_version = ?"
		args = append(args, expect)
	}
	var versions []int64
	if err := s.db.WithContext(ctx).Raw(q+" RETURNING state_version", args...).Scan(&versions).Error; err != nil {
		return resilience.VersionedState{}, false, translate(err, "save state of connection "+id)
	}
	if len(versions) == 1 {
		return resilience.VersionedState{State: st, Version: versions[0]}, true, nil
	}
	cur, err := s.LoadState(ctx, id)
	return cur, false, err
}

// SaveDiagnostics writes the last_error* columns of connection id unless
// the stored last_error_at is later; the version is untouched.
func (s *ConnectionStateStore) SaveDiagnostics(ctx context.Context, id string, st services.ConnectionState) error {
	if st.LastErrorAt == nil {
		return nil
	}
	at := st.LastErrorAt.UnixMilli()
	err := s.db.WithContext(ctx).Exec(`UPDATE connections SET last_error = ?, last_error_reason = ?, last_error_status = ?,
		error_code = ?, last_error_at = ? WHERE id = ? AND (last_error_at IS NULL OR last_error_at <= ?)`,
		PostgresText(st.LastError), st.LastErrorReason, st.LastErrorStatus, PostgresText(st.ErrorCode), at, id, at).Error
	return translate(err, "save diagnostics of connection "+id)
}
