// Package models holds the GORM rows and the repositories that implement the
// store interfaces declared in services. Rows stay unexported; repositories
// take and return domain types.
package models

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	"github.com/glebarez/sqlite"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"switchyard/migrations"
	"switchyard/services"
)

// Open opens (creating if needed) the SQLite database at path with WAL,
// busy_timeout, foreign keys and immediate write transactions set in the DSN,
// and one connection, so there is exactly one writer and no SQLITE_BUSY
// between our own goroutines. It applies the migrations before returning.
func Open(ctx context.Context, path string, now func() time.Time) (*gorm.DB, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	q := url.Values{}
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "busy_timeout(5000)")
	q.Add("_pragma", "foreign_keys(1)")
	q.Add("_pragma", "synchronous(NORMAL)")
	q.Set("_txlock", "immediate")
	dsn := "file:" + abs + "?" + q.Encode()
	db, err := gorm.Open(sqlite.Open(dsn), &gorm.Config{
		NowFunc:                func() time.Time { return now().UTC() },
		TranslateError:         true,
		Logger:                 logger.Discard,
		SkipDefaultTransaction: true,
	})
	if err != nil {
		return nil, fmt.Errorf("models: open %s: %w", path, err)
	}
	sqlDB, err := db.DB()
	if err != nil {
		return nil, err
	}
	sqlDB.SetMaxOpenConns(1)
	sqlDB.SetMaxIdleConns(1)
	sqlDB.SetConnMaxLifetime(0)
	if err := migrations.Apply(ctx, sqlDB); err != nil {
		sqlDB.Close()
		return nil, err
	}
	return db, nil
}

// Close closes the underlying pool.
func Close(db *gorm.DB) error {
	sqlDB, err := db.DB()
	if err != nil {
		return err
	}
	return sqlDB.Close()
}

// translate maps driver and GORM errors onto the service sentinels.
// It relies on gorm.Config{TranslateError: true}. A database that cannot
// answer now becomes a services.UnavailableError (503 with Retry-After),
// never a 500 and never an empty answer.
func translate(err error, op string) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, gorm.ErrRecordNotFound):
		err = services.ErrNotFound
	case errors.Is(err, gorm.ErrDuplicatedKey):
		err = services.ErrConflict
	case IsUnavailable(err) && !errors.Is(err, services.ErrUnavailable):
		return &services.UnavailableError{Op: op, Err: fmt.Errorf("models: %s: %w", op, err)}
	}
	return fmt.Errorf("models: %s: %w", op, err)
}

// SQLite primary result codes of a database that is in use elsewhere.
const (
	sqliteBusy   = 5 // SQLITE_BUSY: another connection holds the lock past busy_timeout
	sqliteLocked = 6 // SQLITE_LOCKED: a conflicting lock on a table within this connection
)

// IsUnavailable reports whether err, from any store or a direct query, says
// the database cannot answer now rather than that the request is wrong: the
// pool was closed (shutdown), SQLite stayed busy or locked past
// busy_timeout, or PostgreSQL is unreachable, restarting or out of
// connections. Such failures are transient for the caller. It is already
// true for a translated services.UnavailableError.
func IsUnavailable(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, services.ErrUnavailable) || errors.Is(err, sql.ErrConnDone) || pgUnavailable(err) {
		return true
	}
	var coded interface{ Code() int }
	if errors.As(err, &coded) {
		switch coded.Code() & 0xff { // extended codes keep the primary code in the low byte
		case sqliteBusy, sqliteLocked:
			return true
		}
	}
	// database/sql does not export its "database is closed" error.
	msg := err.Error()
	return strings.Contains(msg, "sql: database is closed") ||
		strings.Contains(msg, "database is locked") || strings.Contains(msg, "database table is locked")
}

// Rows lists every row type, for the schema drift test.
func Rows() []any {
	return []any{&customProviderRow{}, &connectionRow{}, &comboRow{}, &apiKeyRow{}, &settingRow{},
		&adminCredentialRow{}, &adminSessionRow{}, &BreakerRow{}, &ModelLockoutRow{}, &AffinityPinRow{},
		&LeaseRow{}, &LearnedRateLimitRow{}, &LearnedToolLimitRow{}, &QuotaWindowRow{}, &RequestLogRow{},
		&ComboLKGPRow{}, &ContextHandoffRow{}, &auditRow{}}
}

func ms(t *time.Time) *int64 {
	if t == nil {
		return nil
	}
	v := t.UnixMilli()
	return &v
}

func fromMs(v *int64) *time.Time {
	if v == nil {
		return nil
	}
	t := time.UnixMilli(*v).UTC()
	return &t
}
