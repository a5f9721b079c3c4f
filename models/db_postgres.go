package models

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgconn"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"switchyard/migrations"
)

// PostgresOptions sizes the pool of a shared PostgreSQL store. Every replica
// holds at most MaxOpenConns pooled connections plus one listener
// connection, so replicas × (MaxOpenConns + 1) must stay below the server's
// max_connections.
type PostgresOptions struct {
	// MaxOpenConns bounds the pool. Default 10.
	MaxOpenConns int
	// ConnectTimeout bounds one connection attempt. Default 5 s.
	ConnectTimeout time.Duration
}

func (o PostgresOptions) withDefaults() PostgresOptions {
	if o.MaxOpenConns <= 0 {
		o.MaxOpenConns = 10
	}
	if o.ConnectTimeout <= 0 {
		o.ConnectTimeout = 5 * time.Second
	}
	return o
}

// OpenPostgres opens the shared PostgreSQL database at dsn (a postgres:// URL
// or a key=value string) through pgx and applies the PostgreSQL migrations
// under an advisory lock, so replicas that start together apply each file
// once. Repositories are the same as on SQLite; where the dialects differ
// they ask Dialect(db).
func OpenPostgres(ctx context.Context, dsn string, now func() time.Time, opts PostgresOptions) (*gorm.DB, error) {
	opts = opts.withDefaults()
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("models: database URL: %w", err)
	}
	if cfg.ConnectTimeout == 0 || cfg.ConnectTimeout > opts.ConnectTimeout {
		cfg.ConnectTimeout = opts.ConnectTimeout
	}
	db, err := gorm.Open(postgres.New(postgres.Config{DSN: dsn}), &gorm.Config{
		NowFunc:                func() time.Time { return now().UTC() },
		TranslateError:         true,
		Logger:                 logger.Discard,
		SkipDefaultTransaction: true,
	})
	if err != nil {
		return nil, fmt.Errorf("models: open postgres: %w", err)
	}
	sqlDB, err := db.DB()
	if err != nil {
		return nil, err
	}
	sqlDB.SetMaxOpenConns(opts.MaxOpenConns)
	sqlDB.SetMaxIdleConns(opts.MaxOpenConns)
	sqlDB.SetConnMaxIdleTime(5 * time.Minute)
	pingCtx, cancel := context.WithTimeout(ctx, opts.ConnectTimeout)
	err = sqlDB.PingContext(pingCtx)
	cancel()
	if err != nil {
		sqlDB.Close()
		return nil, fmt.Errorf("models: connect to postgres %s:%d: %w", cfg.Host, cfg.Port, err)
	}
	if err := migrations.ApplyDialect(ctx, sqlDB, migrations.Postgres); err != nil {
		sqlDB.Close()
		return nil, err
	}
	return db, nil
}

// Dialect tells which SQL dialect db speaks, for the few queries that differ.
func Dialect(db *gorm.DB) migrations.Dialect {
	if db != nil && db.Dialector != nil && db.Dialector.Name() == "postgres" {
		return migrations.Postgres
	}
	return migrations.SQLite
}

// pgUnavailable reports PostgreSQL errors that say the server cannot answer
// now rather than that the statement is wrong: connection exceptions (class
// 08), the server shutting down or restarting (57P01–57P03), too many
// connections (53300), and a connection that timed out or was never made.
func pgUnavailable(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch {
		case len(pgErr.Code) == 5 && pgErr.Code[:2] == "08":
			return true
		case pgErr.Code == "57P01", pgErr.Code == "57P02", pgErr.Code == "57P03", pgErr.Code == "53300":
			return true
		}
		return false
	}
	if pgconn.Timeout(err) {
		return true
	}
	var connErr *pgconn.ConnectError
	return errors.As(err, &connErr)
}

// pgRetryable reports serialization failures and deadlocks (40001, 40P01),
// which a transaction may simply run again.
func pgRetryable(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == "40001" || pgErr.Code == "40P01")
}

// Nothing retries a PostgreSQL transaction yet; pgRetryable is the rule the
// retry will use, kept next to pgUnavailable so both stay in one place.
var _ = pgRetryable

// PostgresText is what a PostgreSQL TEXT column keeps of s. PostgreSQL
// refuses a NUL byte and invalid UTF-8 in text (SQLite stores any bytes), so
// text that comes from clients or upstreams — model names, request ids,
// error texts — has each NUL and each invalid byte replaced by U+FFFD before
// it is written, and before it is compared in a query, so one odd byte never
// costs a whole batch of log rows.
func PostgresText(s string) string {
	if utf8.ValidString(s) && strings.IndexByte(s, 0) < 0 {
		return s
	}
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
}
