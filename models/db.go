// Package models holds the GORM rows and the repositories that implement the
// store interfaces declared in services. Rows stay unexported; repositories
// take and return domain types.
package models

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
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
// It relies on gorm.Config{TranslateError: true}.
func translate(err error, op string) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, gorm.ErrRecordNotFound):
		err = services.ErrNotFound
	case errors.Is(err, gorm.ErrDuplicatedKey):
		err = services.ErrConflict
	}
	return fmt.Errorf("models: %s: %w", op, err)
}

// Rows lists every row type, for the schema drift test.
func Rows() []any {
	return []any{&customProviderRow{}, &connectionRow{}, &comboRow{}, &apiKeyRow{}, &settingRow{},
		&adminCredentialRow{}, &adminSessionRow{}, &BreakerRow{}, &ModelLockoutRow{}, &AffinityPinRow{},
		&LeaseRow{}, &LearnedRateLimitRow{}, &LearnedToolLimitRow{}, &QuotaWindowRow{}, &RequestLogRow{}}
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
