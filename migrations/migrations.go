// Package migrations holds the numbered SQL files that define the schema and
// applies them at start-up. A shipped file is never edited; a change is a new
// file. GORM's AutoMigrate never runs, so the schema is exactly what these
// files say, and a drift test checks the GORM rows against it.
//
// There are two dialects with the same numbers: the embedded SQLite files in
// this folder and their PostgreSQL counterparts in postgres/. A number means
// the same change in both. Migrations are additive (expand first, contract in
// a later release), so replicas of two consecutive versions can share one
// database during a rolling upgrade.
package migrations

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"
	"time"
)

//go:embed *.sql postgres/*.sql
var files embed.FS

// Dialect names an SQL dialect the schema exists in.
type Dialect string

// The dialects Switchyard stores its data in.
const (
	SQLite   Dialect = "sqlite"
	Postgres Dialect = "postgres"
)

func (d Dialect) dir() string {
	if d == Postgres {
		return "postgres"
	}
	return "."
}

// Names lists the SQLite migration files in the order they apply.
func Names() []string { return NamesOf(SQLite) }

// NamesOf lists a dialect's migration files in the order they apply.
func NamesOf(d Dialect) []string {
	entries, _ := fs.ReadDir(files, d.dir())
	var names []string
	for _, e := range entries {
		if !e.IsDir() && strings.HasSuffix(e.Name(), ".sql") {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	return names
}

// ErrSchemaNewer reports a database that a newer release has migrated in a
// way this binary cannot work with.
var ErrSchemaNewer = errors.New("migrations: the database schema is newer than this binary")

// SchemaNewerError names both versions of a refused database.
type SchemaNewerError struct {
	Database string // the migration that requires a newer binary
	Binary   string // the newest migration this binary knows
}

func (e *SchemaNewerError) Error() string {
	return fmt.Sprintf("migrations: the database schema is at %s, which needs a newer binary than this one (its schema version is %s); run a release that knows %s", e.Database, e.Binary, e.Database)
}

func (e *SchemaNewerError) Unwrap() error { return ErrSchemaNewer }

// Compatibility across a rolling upgrade. Migrations are additive by rule, so
// a binary keeps working on a schema that a newer release has extended (it
// ignores columns and tables it does not know). Only a migration that
// contracts the schema (drops or renames what older code writes) raises the
// floor: it runs `UPDATE schema_compat SET min_binary = '<its own name>'`,
// and every binary whose newest migration sorts before that floor refuses to
// start, naming both versions. The floor lives in the database because an
// older binary does not have the newer file.
const compatDDL = `CREATE TABLE IF NOT EXISTS schema_compat (
	id INTEGER PRIMARY KEY CHECK (id = 1), min_binary TEXT NOT NULL)`

// migrationLock is the PostgreSQL advisory lock key under which replicas that
// start together apply the migrations one at a time (each file exactly once).
const migrationLock = "switchyard_migrations"

// Apply runs every unapplied SQLite file in name order. See ApplyDialect.
func Apply(ctx context.Context, db *sql.DB) error { return ApplyDialect(ctx, db, SQLite) }

// ApplyDialect runs every unapplied file of the dialect in name order, each in
// its own transaction, and records it in schema_migrations. It is
// idempotent. On PostgreSQL the whole run holds a session advisory lock, so
// replicas starting at once wait for each other and each file applies once.
// A database whose compatibility floor a newer release raised above this
// binary is refused with a *SchemaNewerError before anything is applied.
func ApplyDialect(ctx context.Context, db *sql.DB, d Dialect) error {
	return ApplyWith(ctx, db, d, nil)
}

// ApplyWith is ApplyDialect with extra migration files beside the shipped
// ones: tests use it to stand in for a newer release's migrations.
func ApplyWith(ctx context.Context, db *sql.DB, d Dialect, extra fs.FS) error {
	conn, err := db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("migrations: connect: %w", err)
	}
	defer conn.Close()
	if d == Postgres {
		if _, err := conn.ExecContext(ctx, `SELECT pg_advisory_lock(hashtext($1))`, migrationLock); err != nil {
			return fmt.Errorf("migrations: lock: %w", err)
		}
		defer conn.ExecContext(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock(hashtext($1))`, migrationLock)
	}
	return apply(ctx, conn, d, extra)
}

func apply(ctx context.Context, conn *sql.Conn, d Dialect, extra fs.FS) error {
	if _, err := conn.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)`); err != nil {
		return fmt.Errorf("migrations: create schema_migrations: %w", err)
	}
	if _, err := conn.ExecContext(ctx, compatDDL); err != nil {
		return fmt.Errorf("migrations: create schema_compat: %w", err)
	}
	applied, err := appliedNames(ctx, conn)
	if err != nil {
		return err
	}
	names := NamesOf(d)
	if extra != nil {
		names = append(names, extraNames(extra)...)
		sort.Strings(names)
	}
	if err := checkCompatible(ctx, conn, names); err != nil {
		return err
	}
	insert := `INSERT INTO schema_migrations(name, applied_at) VALUES (?, ?)`
	if d == Postgres {
		insert = `INSERT INTO schema_migrations(name, applied_at) VALUES ($1, $2)`
	}
	for _, name := range names {
		if applied[name] {
			continue
		}
		body, err := readFile(d, extra, name)
		if err != nil {
			return err
		}
		tx, err := conn.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, string(body)); err != nil {
			tx.Rollback()
			return fmt.Errorf("migrations: %s: %w", name, err)
		}
		if _, err := tx.ExecContext(ctx, insert, name, time.Now().UTC().Format(time.RFC3339Nano)); err != nil {
			tx.Rollback()
			return fmt.Errorf("migrations: record %s: %w", name, err)
		}
		if err := tx.Commit(); err != nil {
			return fmt.Errorf("migrations: commit %s: %w", name, err)
		}
	}
	return nil
}

func appliedNames(ctx context.Context, conn *sql.Conn) (map[string]bool, error) {
	applied := map[string]bool{}
	rows, err := conn.QueryContext(ctx, `SELECT name FROM schema_migrations`)
	if err != nil {
		return nil, fmt.Errorf("migrations: read schema_migrations: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			return nil, err
		}
		applied[n] = true
	}
	return applied, rows.Err()
}

// checkCompatible refuses a database whose compatibility floor is above the
// newest migration this binary knows.
func checkCompatible(ctx context.Context, conn *sql.Conn, known []string) error {
	var floor sql.NullString
	err := conn.QueryRowContext(ctx, `SELECT min_binary FROM schema_compat WHERE id = 1`).Scan(&floor)
	if errors.Is(err, sql.ErrNoRows) || !floor.Valid {
		return nil
	}
	if err != nil {
		return fmt.Errorf("migrations: read schema_compat: %w", err)
	}
	latest := ""
	if len(known) > 0 {
		latest = known[len(known)-1]
	}
	if floor.String > latest {
		return &SchemaNewerError{Database: floor.String, Binary: latest}
	}
	return nil
}

// Unknown lists the migrations recorded in the database that this binary
// does not ship: a newer release's additive changes, which this binary runs
// beside during a rolling upgrade.
func Unknown(ctx context.Context, db *sql.DB, d Dialect) ([]string, error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	applied, err := appliedNames(ctx, conn)
	if err != nil {
		return nil, err
	}
	known := map[string]bool{}
	for _, n := range NamesOf(d) {
		known[n] = true
	}
	var out []string
	for n := range applied {
		if !known[n] {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out, nil
}

func extraNames(extra fs.FS) []string {
	entries, _ := fs.ReadDir(extra, ".")
	var names []string
	for _, e := range entries {
		if !e.IsDir() && strings.HasSuffix(e.Name(), ".sql") {
			names = append(names, e.Name())
		}
	}
	return names
}

func readFile(d Dialect, extra fs.FS, name string) ([]byte, error) {
	body, err := files.ReadFile(path.Join(d.dir(), name))
	if err == nil || extra == nil {
		return body, err
	}
	return fs.ReadFile(extra, name)
}

// Source is the text of one shipped migration of dialect d (the
// rolling-upgrade test replays them one release at a time).
func Source(d Dialect, name string) ([]byte, error) {
	return files.ReadFile(path.Join(d.dir(), name))
}

// Latest is the name of the newest migration (the schema version).
func Latest() string {
	n := Names()
	if len(n) == 0 {
		return ""
	}
	return n[len(n)-1]
}
