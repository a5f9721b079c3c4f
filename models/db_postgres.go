package models

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"
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
// connections (53300), a connection that timed out, was never made or died
// under a statement, and a transaction aborted as a serialization failure
// or deadlock again after runTx's retry (40001, 40P01).
func pgUnavailable(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch {
		case len(pgErr.Code) == 5 && pgErr.Code[:2] == "08":
			return true
		case pgErr.Code == "57P01", pgErr.Code == "57P02", pgErr.Code == "57P03", pgErr.Code == "53300":
			return true
		case pgErr.Code == "40001", pgErr.Code == "40P01":
			return true
		}
		return false
	}
	if pgconn.Timeout(err) {
		return true
	}
	var connErr *pgconn.ConnectError
	if errors.As(err, &connErr) {
		return true
	}
	// The connection itself went away (server stopped or restarted, network
	// cut) under a statement or a transaction: database/sql retries a fresh
	// statement on another connection itself, but a transaction's next
	// statement and its commit see the dead one.
	var opErr *net.OpError
	return errors.Is(err, pgconn.ErrConnClosed) || errors.Is(err, driver.ErrBadConn) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EPIPE) || errors.As(err, &opErr)
}

// pgRetryable reports serialization failures and deadlocks (40001, 40P01),
// which a transaction may simply run again.
func pgRetryable(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == "40001" || pgErr.Code == "40P01")
}

// runTx runs fn in a transaction on db. When PostgreSQL aborts it as a
// serialization failure or a deadlock (two replicas writing the same rows in
// a different order), the server has rolled it back and it runs once more;
// a second abort is reported, and IsUnavailable calls it transient (503 with
// Retry-After). fn must be safe to run twice: it may not keep state from a
// rolled-back run.
func runTx(ctx context.Context, db *gorm.DB, fn func(tx *gorm.DB) error) error {
	err := db.WithContext(ctx).Transaction(fn)
	if err != nil && pgRetryable(err) {
		err = db.WithContext(ctx).Transaction(fn)
	}
	return err
}

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
