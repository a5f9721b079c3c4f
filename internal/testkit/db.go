package testkit

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"gorm.io/gorm"

	"switchyard/models"
	"switchyard/services"
)

// DialectEnv selects the store the database helpers open: unset or
// "sqlite" for the embedded SQLite file, "postgres" for a schema of its own
// on the server that SWITCHYARD_TEST_DATABASE_URL names. CI runs the store
// and service packages once more with "postgres", so every repository test
// also runs against PostgreSQL.
const DialectEnv = "SWITCHYARD_TEST_DIALECT"

// OpenDB opens a fresh database with every migration applied: a SQLite file
// in t.TempDir(), or a fresh PostgreSQL schema when DialectEnv says so.
func OpenDB(t testing.TB) *gorm.DB {
	t.Helper()
	return OpenDBAt(t, filepath.Join(t.TempDir(), "switchyard.db"), time.Now)
}

// pgSchemas maps the SQLite paths tests open to the PostgreSQL schemas that
// stand in for them, so reopening a path (a restart) finds the same data.
var pgSchemas sync.Map // path → dsn

// OpenDBAt opens the database at path with the given clock and closes it on
// cleanup. Under DialectEnv=postgres the path names a schema instead: the
// first open creates it, later opens of the same path reopen it.
func OpenDBAt(t testing.TB, path string, now func() time.Time) *gorm.DB {
	t.Helper()
	if os.Getenv(DialectEnv) == "postgres" {
		dsn, ok := pgSchemas.Load(path)
		if !ok {
			dsn, _ = pgSchemas.LoadOrStore(path, PostgresSchema(t))
		}
		db, err := models.OpenPostgres(context.Background(), dsn.(string), now, models.PostgresOptions{MaxOpenConns: 4})
		if err != nil {
			t.Fatalf("open postgres: %v", err)
		}
		t.Cleanup(func() { _ = models.Close(db) })
		return db
	}
	db, err := models.Open(context.Background(), path, now)
	if err != nil {
		t.Fatalf("open db: %v", err)
	}
	t.Cleanup(func() { _ = models.Close(db) })
	return db
}

// Keyring returns a keyring with a fixed test secret.
func Keyring(t testing.TB) *services.Keyring {
	t.Helper()
	k, err := services.NewKeyring([]byte("test-secret-key-0123456789abcdef0123456789"))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// CheapArgon2 makes password hashing fast in tests.
var CheapArgon2 = services.Argon2Params{MemoryKiB: 64, Time: 1, Threads: 1}
