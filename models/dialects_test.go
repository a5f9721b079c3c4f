package models_test

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"gorm.io/gorm"

	"switchyard/internal/testkit"
	"switchyard/migrations"
	"switchyard/models"
	"switchyard/services"
)

// Both dialects ship the same migration numbers.
func TestMigrationNumbersMatchAcrossDialects(t *testing.T) {
	sqlite, pg := migrations.NamesOf(migrations.SQLite), migrations.NamesOf(migrations.Postgres)
	if strings.Join(sqlite, ",") != strings.Join(pg, ",") {
		t.Fatalf("sqlite migrations %v, postgres %v", sqlite, pg)
	}
}

// columns lists table → sorted column names of db's current schema.
func columns(t *testing.T, db *gorm.DB) map[string][]string {
	t.Helper()
	var rows []struct{ Table, Column string }
	var err error
	if models.Dialect(db) == migrations.Postgres {
		err = db.Raw(`SELECT table_name AS "table", column_name AS "column" FROM information_schema.columns
			WHERE table_schema = current_schema()`).Scan(&rows).Error
	} else {
		err = db.Raw(`SELECT m.name AS "table", p.name AS "column" FROM sqlite_master m
			JOIN pragma_table_info(m.name) p WHERE m.type = 'table' AND m.name NOT LIKE 'sqlite_%'`).Scan(&rows).Error
	}
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, r := range rows {
		out[r.Table] = append(out[r.Table], r.Column)
	}
	for k := range out {
		sort.Strings(out[k])
	}
	return out
}

// The two dialects' migrations give the same tables and columns, except the
// lease insertion-order column that stands in for SQLite's implicit rowid.
func TestSchemasMatchAcrossDialects(t *testing.T) {
	testkit.PostgresURL(t)
	lite := columns(t, testkit.OpenSQLiteDB(t))
	pg := columns(t, testkit.OpenPostgresDB(t, time.Now))
	if i := indexOf(pg["exclusive_leases"], "seq"); i >= 0 {
		pg["exclusive_leases"] = append(pg["exclusive_leases"][:i], pg["exclusive_leases"][i+1:]...)
	}
	for table, cols := range lite {
		if strings.Join(cols, ",") != strings.Join(pg[table], ",") {
			t.Errorf("%s: sqlite %v, postgres %v", table, cols, pg[table])
		}
	}
	for table := range pg {
		if _, ok := lite[table]; !ok {
			t.Errorf("table %s only in postgres", table)
		}
	}
}

func indexOf(s []string, v string) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}

// A rolling upgrade: this binary's stores keep working on a schema that the
// next release has extended (an additive migration applied), and a release
// that contracted the schema past this binary is refused, naming both
// versions.
func TestSchemaOfNextReleaseCompatibility(t *testing.T) {
	next := fstest.MapFS{
		"9000_next_release.sql": {Data: []byte(`ALTER TABLE connections ADD COLUMN next_release_note TEXT NOT NULL DEFAULT '';
CREATE TABLE next_release_only (id TEXT PRIMARY KEY);`)},
	}
	contract := fstest.MapFS{
		"9001_contract.sql": {Data: []byte(`UPDATE schema_compat SET min_binary = '9001_contract.sql' WHERE id = 1;
INSERT INTO schema_compat (id, min_binary) SELECT 1, '9001_contract.sql' WHERE NOT EXISTS (SELECT 1 FROM schema_compat);`)},
	}
	testkit.Dialects(t, time.Now, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		sqlDB, err := db.DB()
		if err != nil {
			t.Fatal(err)
		}
		d := models.Dialect(db)
		if err := migrations.ApplyWith(ctx, sqlDB, d, next); err != nil {
			t.Fatalf("apply next release: %v", err)
		}
		// This binary's migrations run again on the newer schema (a restart).
		if err := migrations.ApplyDialect(ctx, sqlDB, d); err != nil {
			t.Fatalf("restart on the next release's schema: %v", err)
		}
		unknown, err := migrations.Unknown(ctx, sqlDB, d)
		if err != nil || len(unknown) != 1 || unknown[0] != "9000_next_release.sql" {
			t.Fatalf("unknown migrations %v, %v", unknown, err)
		}
		exerciseStores(t, db)

		if err := migrations.ApplyWith(ctx, sqlDB, d, contract); err != nil {
			t.Fatalf("apply contract: %v", err)
		}
		err = migrations.ApplyDialect(ctx, sqlDB, d)
		var newer *migrations.SchemaNewerError
		if !errors.As(err, &newer) || !errors.Is(err, migrations.ErrSchemaNewer) {
			t.Fatalf("contracted schema: err %v, want SchemaNewerError", err)
		}
		if newer.Database != "9001_contract.sql" || newer.Binary != migrations.Latest() {
			t.Fatalf("refusal names %q and %q", newer.Database, newer.Binary)
		}
		if !strings.Contains(err.Error(), "9001_contract.sql") || !strings.Contains(err.Error(), migrations.Latest()) {
			t.Fatalf("message %q does not name both versions", err)
		}
	})
}

// exerciseStores writes and reads back a row through the main repositories.
func exerciseStores(t *testing.T, db *gorm.DB) {
	t.Helper()
	ctx := context.Background()
	conns := models.NewConnectionStore(db, testkit.Keyring(t))
	c := services.Connection{ID: "c_next", Provider: "openai", Name: "next", AuthClass: services.AuthAPIKey,
		Enabled: true, Credentials: services.Credentials{APIKey: "sk-next-0123456789"}}
	if err := conns.CreateConnection(ctx, c); err != nil {
		t.Fatalf("create connection: %v", err)
	}
	got, err := conns.FindConnectionByID(ctx, "c_next")
	if err != nil || got.Credentials.APIKey.Reveal() != "sk-next-0123456789" || !got.Enabled {
		t.Fatalf("read connection: %+v, %v", got, err)
	}
	combos := models.NewComboStore(db)
	if err := combos.CreateCombo(ctx, services.Combo{ID: "cb_next", Name: "Next", Strategy: "priority", Enabled: true}); err != nil {
		t.Fatalf("create combo: %v", err)
	}
	if err := combos.CreateCombo(ctx, services.Combo{ID: "cb_dup", Name: "NEXT", Strategy: "priority"}); !errors.Is(err, services.ErrConflict) {
		t.Fatalf("combo names are unique whatever their case: %v", err)
	}
	settings := models.NewSettingsStore(db)
	if _, err := settings.PutSetting(ctx, "general", []byte(`{"a":1}`), 0); err != nil {
		t.Fatalf("put setting: %v", err)
	}
}

// colInfo is one column of a schema as a rolling upgrade sees it.
type colInfo struct {
	Type     string
	Nullable bool
	Default  bool // has a default value
}

// rawSchema lists table → column → info of the database db.
func rawSchema(t *testing.T, db *sql.DB, d migrations.Dialect) map[string]map[string]colInfo {
	t.Helper()
	q := `SELECT m.name, p.name, p.type, p."notnull" = 0, p.dflt_value IS NOT NULL FROM sqlite_master m
		JOIN pragma_table_info(m.name) p WHERE m.type = 'table' AND m.name NOT LIKE 'sqlite_%'`
	if d == migrations.Postgres {
		q = `SELECT table_name, column_name, data_type, is_nullable = 'YES', column_default IS NOT NULL
			FROM information_schema.columns WHERE table_schema = current_schema()`
	}
	rows, err := db.Query(q)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]map[string]colInfo{}
	for rows.Next() {
		var table, col string
		var ci colInfo
		if err := rows.Scan(&table, &col, &ci.Type, &ci.Nullable, &ci.Default); err != nil {
			t.Fatal(err)
		}
		if out[table] == nil {
			out[table] = map[string]colInfo{}
		}
		out[table][col] = ci
	}
	return out
}

// A rolling upgrade with the shipped migrations, one release step at a
// time (issue 19 item 9): for every migration, the schema of version N (all
// migrations before it) with version N+1's migration applied keeps every
// table and column version N reads and writes, with the same type, and
// every column N+1 adds to an existing table is nullable or has a default,
// so version N's INSERTs (which do not name it) still succeed. A
// migration that contracts the schema must raise the compatibility floor
// (schema_compat) instead, which makes version N refuse to start rather
// than fail mid-request. Each step also inserts a row the way version N
// would, after N+1's migration.
func TestShippedMigrationsAreAdditive(t *testing.T) {
	for _, d := range []migrations.Dialect{migrations.SQLite, migrations.Postgres} {
		t.Run(string(d), func(t *testing.T) {
			var db *sql.DB
			var err error
			if d == migrations.Postgres {
				db, err = sql.Open("pgx", testkit.PostgresSchema(t))
			} else {
				db, err = sql.Open("sqlite", filepath.Join(t.TempDir(), "steps.db"))
			}
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			db.SetMaxOpenConns(1) // one session: the schema's search_path and SQLite's file
			names := migrations.NamesOf(d)
			for i, name := range names {
				before := rawSchema(t, db, d)
				body, err := migrations.Source(d, name)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := db.Exec(string(body)); err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				if i == 0 || strings.Contains(string(body), "schema_compat") {
					continue // the first schema, or a contraction that raises the floor
				}
				after := rawSchema(t, db, d)
				for table, cols := range before {
					if after[table] == nil {
						t.Errorf("%s drops table %s, which version %s uses", name, table, names[i-1])
						continue
					}
					for col, ci := range cols {
						got, ok := after[table][col]
						switch {
						case !ok:
							t.Errorf("%s drops or renames %s.%s, which version %s uses", name, table, col, names[i-1])
						case !strings.EqualFold(got.Type, ci.Type):
							t.Errorf("%s changes the type of %s.%s from %s to %s", name, table, col, ci.Type, got.Type)
						case ci.Nullable && !got.Nullable && !got.Default:
							t.Errorf("%s makes %s.%s NOT NULL without a default: version %s's writes that omit it fail", name, table, col, names[i-1])
						}
					}
					for col, ci := range after[table] {
						if _, old := cols[col]; !old && !ci.Nullable && !ci.Default {
							t.Errorf("%s adds %s.%s NOT NULL without a default: version %s's INSERTs into %s fail", name, table, col, names[i-1], table)
						}
					}
				}
			}
			// Version N's write of a connection (the columns of 0001) on the
			// newest schema.
			q := `INSERT INTO connections (id, provider, name, auth_class, created_at, updated_at) VALUES ('c_old', 'openai', 'old', 'apikey', '2026-01-01T00:00:00Z', '2026-01-01T00:00:00Z')`
			if d == migrations.Postgres {
				q = `INSERT INTO connections (id, provider, name, auth_class, created_at, updated_at) VALUES ('c_old', 'openai', 'old', 'apikey', now(), now())`
			}
			if _, err := db.Exec(q); err != nil {
				t.Errorf("an insert naming only the first release's connection columns fails on the newest schema: %v", err)
			}
		})
	}
}
