package sqlitefast

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"

	_ "github.com/glebarez/go-sqlite" // registers "sqlite"
)

// goModVersions reads the required versions of paths from the module's
// go.mod (a test binary's build info lists no dependencies).
func goModVersions(t *testing.T, paths map[string]string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(strings.TrimPrefix(strings.TrimSpace(line), "require "))
		if len(f) >= 2 {
			if _, ok := paths[f[0]]; ok {
				got[f[0]] = f[1]
			}
		}
		if len(f) >= 1 && f[0] == "replace" {
			for p := range paths {
				if strings.Contains(line, p) {
					t.Errorf("go.mod replaces %s: the fast path was not verified against a replacement (%s)", p, strings.TrimSpace(line))
				}
			}
		}
	}
	return got
}

// The C-API path reads unexported fields of github.com/glebarez/go-sqlite and
// calls modernc.org/sqlite and modernc.org/libc directly. It was verified
// against the versions in Verified; this fails when go.mod requires other
// ones, until handles and the bindings are checked against them and Verified
// is updated. (A binary built with other versions turns the fast path off by
// itself: Supported.)
func TestDriverVersions(t *testing.T) {
	got := goModVersions(t, Verified)
	for path, want := range Verified {
		t.Logf("%s: go.mod %s, verified %s", path, got[path], want)
		if got[path] != want {
			t.Errorf("go.mod requires %s %q; sqlitefast was verified against %s. Re-check handles (conn fields db, tls) "+
				"and the SQLITE_STATIC binding against the new sources, then update Verified.", path, got[path], want)
		}
	}
}

// A binary linked with other driver versions, or with a replaced module,
// refuses the C API; unrelated modules and matching versions do not.
func TestCheckModules(t *testing.T) {
	mods := func(v string, replace *debug.Module) []*debug.Module {
		return []*debug.Module{
			{Path: "github.com/glebarez/go-sqlite", Version: Verified["github.com/glebarez/go-sqlite"]},
			{Path: "modernc.org/sqlite", Version: v, Replace: replace},
			{Path: "modernc.org/libc", Version: Verified["modernc.org/libc"]},
			{Path: "golang.org/x/text", Version: "v0.99.0"},
		}
	}
	if err := checkModules(mods(Verified["modernc.org/sqlite"], nil)); err != nil {
		t.Fatalf("verified versions refused: %v", err)
	}
	err := checkModules(mods("v1.29.0", nil))
	if !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "modernc.org/sqlite v1.29.0") {
		t.Fatalf("upgraded sqlite: %v", err)
	}
	if err := checkModules(mods(Verified["modernc.org/sqlite"], &debug.Module{Path: "../sqlite"})); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("replaced sqlite: %v", err)
	}
	if err := checkModules(nil); err != nil {
		t.Fatalf("no module list: %v", err)
	}
}

// otherDriver is a database/sql driver that is not SQLite's.
type otherDriver struct{}
type otherConn struct{ db uintptr }

func (otherDriver) Open(string) (driver.Conn, error)   { return &otherConn{db: 1}, nil }
func (*otherConn) Prepare(string) (driver.Stmt, error) { return nil, errors.New("not supported") }
func (*otherConn) Close() error                        { return nil }
func (*otherConn) Begin() (driver.Tx, error)           { return nil, errors.New("must not begin") }
func (*otherConn) BeginTx(context.Context, driver.TxOptions) (driver.Tx, error) {
	return nil, errors.New("must not begin")
}

func init() { sql.Register("sqlitefast-other", otherDriver{}) }

var testInsert = &Insert{Prefix: "INSERT INTO t (id, n, s) VALUES ", Columns: 3, Suffix: " ON CONFLICT (id) DO NOTHING"}

func conn(t *testing.T, driverName, dsn string) (*sql.DB, *sql.Conn) {
	t.Helper()
	db, err := sql.Open(driverName, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	c, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return db, c
}

// Any other connection shape is ErrUnsupported before anything is done, so
// the caller can write the batch its own way.
func TestExecRefusesOtherConnections(t *testing.T) {
	_, c := conn(t, "sqlitefast-other", "")
	var b Batch
	b.Reset(3)
	b.Str("a")
	b.Int(1)
	b.Null()
	if err := Exec(context.Background(), c, testInsert, &b); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("Exec on another driver = %v, want ErrUnsupported", err)
	}
	for _, dc := range []any{nil, otherConn{}, &otherConn{}, new(int), &struct{ db, tls uintptr }{1, 2}} {
		if _, _, ok := handles(dc); ok {
			t.Fatalf("handles accepted %T", dc)
		}
	}
}

// On the driver's own connection Exec writes every row of batches of any
// length in one transaction, skipping stored ids.
func TestExecWritesBatches(t *testing.T) {
	ctx := context.Background()
	db, c := conn(t, "sqlite", "file:"+filepath.Join(t.TempDir(), "t.db"))
	if _, err := c.ExecContext(ctx, "CREATE TABLE t (id TEXT PRIMARY KEY, n INTEGER, s TEXT)"); err != nil {
		t.Fatal(err)
	}
	var b Batch
	total := 0
	for _, rows := range []int{1, 3, 64, 100, 1} {
		b.Reset(rows * 3)
		for i := range rows {
			b.Str(strings.Repeat("k", total+i+1))
			b.Int(int64(total + i))
			if i%2 == 0 {
				b.Null()
			} else {
				off := len(b.Text)
				b.Text = append(b.Text, "text"...)
				b.Span(off)
			}
		}
		if err := Exec(ctx, c, testInsert, &b); err != nil {
			t.Fatal(err)
		}
		total += rows
	}
	var n, texts int
	if err := db.QueryRowContext(ctx, "SELECT count(*), count(s) FROM t").Scan(&n, &texts); err != nil {
		t.Fatal(err)
	}
	if n != total || texts != 83 {
		t.Fatalf("%d rows, %d texts; want %d, 83", n, texts, total)
	}
	var bad Batch
	bad.Reset(2)
	bad.Int(1)
	bad.Int(2)
	if err := Exec(ctx, c, testInsert, &bad); err == nil || errors.Is(err, ErrUnsupported) {
		t.Fatalf("a batch of 2 values for 3 columns: %v", err)
	}
}
