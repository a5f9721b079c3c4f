package testkit

import (
	"context"
	"database/sql"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx" for schema set-up
	"gorm.io/gorm"

	"switchyard/models"
	"switchyard/services"
)

// PostgresURLEnv names the variable that points the tests at a PostgreSQL
// server (CI starts one; see .ci/run). Without it the PostgreSQL variants of
// the store tests skip.
const PostgresURLEnv = "SWITCHYARD_TEST_DATABASE_URL"

// PostgresURL returns the test server's URL, or skips t with the reason.
func PostgresURL(t testing.TB) string {
	t.Helper()
	u := os.Getenv(PostgresURLEnv)
	if u == "" {
		t.Skipf("%s is unset: no PostgreSQL server to test against", PostgresURLEnv)
	}
	return u
}

// PostgresSchema creates a schema of its own for t on the test server and
// returns a URL whose connections use it (search_path), so tests and
// packages running in parallel share one database without seeing each
// other's tables. The schema is dropped on cleanup.
func PostgresSchema(t testing.TB) string {
	t.Helper()
	base := PostgresURL(t)
	name := "t_" + strings.ToLower(services.RandomToken(6))
	name = strings.Map(func(r rune) rune {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') || r == '_' {
			return r
		}
		return '_'
	}, name)
	admin, err := sql.Open("pgx", base)
	if err != nil {
		t.Fatalf("postgres: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := admin.ExecContext(ctx, "CREATE SCHEMA "+name); err != nil {
		admin.Close()
		t.Fatalf("postgres: create schema: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = admin.ExecContext(ctx, "DROP SCHEMA "+name+" CASCADE")
		admin.Close()
	})
	return WithSearchPath(t, base, name)
}

// WithSearchPath returns dsn with its connections' search_path set to schema.
func WithSearchPath(t testing.TB, dsn, schema string) string {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatalf("postgres URL: %v", err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

// OpenPostgresDB opens a fresh schema on the test server with every
// PostgreSQL migration applied, or skips t when no server is configured.
func OpenPostgresDB(t testing.TB, now func() time.Time) *gorm.DB {
	t.Helper()
	dsn := PostgresSchema(t)
	db, err := models.OpenPostgres(context.Background(), dsn, now, models.PostgresOptions{MaxOpenConns: 4})
	if err != nil {
		t.Fatalf("open postgres: %v", err)
	}
	t.Cleanup(func() { _ = models.Close(db) })
	return db
}

// Dialects runs fn once per store dialect: embedded SQLite always, and
// PostgreSQL when SWITCHYARD_TEST_DATABASE_URL is set (the subtest skips
// with the reason otherwise). Each run gets a fresh, migrated database.
func Dialects(t *testing.T, now func() time.Time, fn func(t *testing.T, db *gorm.DB)) {
	t.Helper()
	t.Run("sqlite", func(t *testing.T) {
		db, err := models.Open(context.Background(), filepath.Join(t.TempDir(), "switchyard.db"), now)
		if err != nil {
			t.Fatalf("open db: %v", err)
		}
		t.Cleanup(func() { _ = models.Close(db) })
		fn(t, db)
	})
	t.Run("postgres", func(t *testing.T) {
		fn(t, OpenPostgresDB(t, now))
	})
}

// SQLiteOnly skips t when the helpers open PostgreSQL: the test is about the
// embedded store's own mechanics (pragmas, files, its C-API insert path).
func SQLiteOnly(t testing.TB) {
	t.Helper()
	if UsingPostgres() {
		t.Skip("about the embedded SQLite store; this run uses PostgreSQL")
	}
}

// OpenSQLiteDB opens a fresh SQLite file whatever DialectEnv says, for tests
// that compare the two dialects.
func OpenSQLiteDB(t testing.TB) *gorm.DB {
	t.Helper()
	db, err := models.Open(context.Background(), filepath.Join(t.TempDir(), "switchyard.db"), time.Now)
	if err != nil {
		t.Fatalf("open db: %v", err)
	}
	t.Cleanup(func() { _ = models.Close(db) })
	return db
}

// UsingPostgres reports whether the database helpers open PostgreSQL in this
// run (DialectEnv=postgres).
func UsingPostgres() bool { return os.Getenv(DialectEnv) == "postgres" }
