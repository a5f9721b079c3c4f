package models_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"gorm.io/gorm"

	"switchyard/internal/testkit"
	"switchyard/migrations"
	"switchyard/models"
	"switchyard/services"
)

// Every GORM row field has a column in the migrated schema, in both
// dialects (PostgreSQL when SWITCHYARD_TEST_DATABASE_URL is set).
func TestRowsMatchSchema(t *testing.T) {
	testkit.Dialects(t, time.Now, func(t *testing.T, db *gorm.DB) {
		for _, row := range models.Rows() {
			st := &gorm.Statement{DB: db}
			if err := st.Parse(row); err != nil {
				t.Fatal(err)
			}
			if !db.Migrator().HasTable(st.Schema.Table) {
				t.Errorf("table %q missing from migrations", st.Schema.Table)
				continue
			}
			for _, f := range st.Schema.Fields {
				if f.DBName != "" && !db.Migrator().HasColumn(row, f.DBName) {
					t.Errorf("%s: column %q missing from migrations", st.Schema.Table, f.DBName)
				}
			}
		}
	})
}

func TestMigrationsIdempotentOnRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "db.sqlite")
	for i := 0; i < 2; i++ {
		db, err := models.Open(context.Background(), path, time.Now)
		if err != nil {
			t.Fatalf("open %d: %v", i, err)
		}
		var n int64
		if err := db.Raw("SELECT COUNT(*) FROM schema_migrations").Scan(&n).Error; err != nil {
			t.Fatal(err)
		}
		if int(n) != len(migrations.Names()) {
			t.Fatalf("round %d: %d migrations recorded, want %d", i, n, len(migrations.Names()))
		}
		var mode string
		db.Raw("PRAGMA journal_mode").Scan(&mode)
		if mode != "wal" {
			t.Errorf("journal_mode = %q, want wal", mode)
		}
		var fk int
		db.Raw("PRAGMA foreign_keys").Scan(&fk)
		if fk != 1 {
			t.Errorf("foreign_keys = %d, want 1", fk)
		}
		var bt int
		db.Raw("PRAGMA busy_timeout").Scan(&bt)
		if bt != 5000 {
			t.Errorf("busy_timeout = %d, want 5000", bt)
		}
		models.Close(db)
	}
}

func TestConnectionSecretsSealedAtRest(t *testing.T) {
	path := filepath.Join(t.TempDir(), "db.sqlite")
	db := testkit.OpenDBAt(t, path, time.Now)
	keys := testkit.Keyring(t)
	store := models.NewConnectionStore(db, keys)
	ctx := context.Background()
	const canary = "sk-canary-PROVIDERKEY-7f3a9c2e1b"
	const proxyPass = "proxy-canary-PASSWORD-55aa"
	now := time.Now().UTC()
	c := services.Connection{ID: "c_1", Provider: "openai", AuthClass: services.AuthAPIKey, Name: "one", Enabled: true,
		Credentials: services.Credentials{APIKey: canary}, ProxyURL: services.Secret("http://ops:" + proxyPass + "@proxy.example:3128"),
		Tier: "standard", CreatedAt: now, UpdatedAt: now}
	if err := store.CreateConnection(ctx, c); err != nil {
		t.Fatal(err)
	}
	got, err := store.FindConnectionByID(ctx, "c_1")
	if err != nil {
		t.Fatal(err)
	}
	if got.Credentials.APIKey.Reveal() != canary || got.ProxyURL.Reveal() != c.ProxyURL.Reveal() {
		t.Fatalf("round trip lost secrets")
	}
	db.Exec("PRAGMA wal_checkpoint(TRUNCATE)")
	for _, f := range []string{path, path + "-wal"} {
		b, err := os.ReadFile(f)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
		for _, s := range []string{canary, proxyPass} {
			if bytes.Contains(b, []byte(s)) {
				t.Errorf("%s holds %q in plaintext", filepath.Base(f), s)
			}
		}
	}
	// A different key cannot open the row: fail closed.
	other, _ := services.NewKeyring([]byte("another-secret-key-0123456789abcdef012345"))
	if _, err := models.NewConnectionStore(db, other).FindConnectionByID(ctx, "c_1"); !errors.Is(err, services.ErrWrongSecretKey) {
		t.Fatalf("wrong key: err = %v, want ErrWrongSecretKey", err)
	}
}

func TestSettingsRevisions(t *testing.T) {
	s := models.NewSettingsStore(testkit.OpenDB(t))
	ctx := context.Background()
	if _, _, err := s.GetSetting(ctx, "general"); !errors.Is(err, services.ErrNotFound) {
		t.Fatalf("absent: %v", err)
	}
	rev, err := s.PutSetting(ctx, "general", []byte(`{"a":1}`), 0)
	if err != nil || rev != 1 {
		t.Fatalf("first put: rev %d err %v", rev, err)
	}
	if _, err := s.PutSetting(ctx, "general", []byte(`{"a":2}`), 0); !errors.Is(err, services.ErrConflict) {
		t.Fatalf("stale put: %v", err)
	}
	rev, err = s.PutSetting(ctx, "general", []byte(`{"a":2}`), 1)
	if err != nil || rev != 2 {
		t.Fatalf("second put: rev %d err %v", rev, err)
	}
	doc, rev, _ := s.GetSetting(ctx, "general")
	if string(doc) != `{"a":2}` || rev != 2 {
		t.Fatalf("got %s rev %d", doc, rev)
	}
}

func TestKeyStoreKeepsNullVersusEmpty(t *testing.T) {
	s := models.NewKeyStore(testkit.OpenDB(t))
	ctx := context.Background()
	k := services.APIKey{ID: "k_1", Name: "a", Prefix: "sk-sy-abcdef", KeyHash: "h", Enabled: true,
		Scopes: []string{"inference"}, AllowedModels: nil, AllowedCombos: []string{}, CreatedAt: time.Now().UTC()}
	if err := s.CreateKey(ctx, k); err != nil {
		t.Fatal(err)
	}
	got, err := s.FindKeyByID(ctx, "k_1")
	if err != nil {
		t.Fatal(err)
	}
	if got.AllowedModels != nil || got.AllowedCombos == nil || len(got.AllowedCombos) != 0 {
		t.Fatalf("null/empty lost: models=%#v combos=%#v", got.AllowedModels, got.AllowedCombos)
	}
	if err := s.CreateKey(ctx, services.APIKey{ID: "k_2", KeyHash: "h", CreatedAt: time.Now()}); !errors.Is(err, services.ErrConflict) {
		t.Fatalf("duplicate hash: %v", err)
	}
}

func TestAdminStoreSetupRace(t *testing.T) {
	s := models.NewAdminStore(testkit.OpenDB(t))
	ctx := context.Background()
	if err := s.SetPasswordHash(ctx, "h1", true); err != nil {
		t.Fatal(err)
	}
	if err := s.SetPasswordHash(ctx, "h2", true); !errors.Is(err, services.ErrConflict) {
		t.Fatalf("second setup: %v", err)
	}
	if h, _ := s.PasswordHash(ctx); h != "h1" {
		t.Fatalf("hash = %q", h)
	}
}
