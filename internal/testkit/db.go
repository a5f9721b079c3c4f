package testkit

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"gorm.io/gorm"

	"switchyard/models"
	"switchyard/services"
)

// OpenDB opens a fresh SQLite file in t.TempDir() with every migration applied.
func OpenDB(t testing.TB) *gorm.DB {
	t.Helper()
	return OpenDBAt(t, filepath.Join(t.TempDir(), "switchyard.db"), time.Now)
}

// OpenDBAt opens the database at path with the given clock and closes it on cleanup.
func OpenDBAt(t testing.TB, path string, now func() time.Time) *gorm.DB {
	t.Helper()
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
