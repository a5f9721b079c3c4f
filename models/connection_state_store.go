package models

import (
	"context"
	"database/sql"

	"gorm.io/gorm"

	"switchyard/services"
)

// ConnectionStateStore persists the resilience state of connections
// (20-resilience §4, §15) in the state columns of connections. It
// implements resilience.ConnectionStateStore (checked in that package's
// tests, so models does not import services/resilience). It never reads or
// writes credentials, the proxy or any other configuration column, except
// enabled for autoDisableBannedAccounts.
type ConnectionStateStore struct {
	db *gorm.DB
}

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
