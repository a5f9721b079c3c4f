package models_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/glebarez/sqlite"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"switchyard/internal/testkit"
	"switchyard/models"
	"switchyard/services"
)

// writeBarrier holds every writer that carries it in its context just
// before its first write statement, until each of them has got there (or
// has finished without writing). Both writers have then done whatever they
// read before writing: a store whose compare-and-set is a read, a check and
// a write would let both pass the check.
type writeBarrier struct {
	arrived chan struct{}
	release chan struct{}
}

type barrierKey struct{}

// writerToken is one writer's pass through the barrier.
type writerToken struct {
	b    *writeBarrier
	once sync.Once
}

func (w *writerToken) arrive() { w.once.Do(func() { w.b.arrived <- struct{}{} }) }

func newWriteBarrier(writers int) *writeBarrier {
	b := &writeBarrier{arrived: make(chan struct{}, writers), release: make(chan struct{})}
	go func() {
		for range writers {
			<-b.arrived
		}
		close(b.release)
	}()
	return b
}

// holdWrites installs the barrier before every write statement of db.
func holdWrites(t *testing.T, db *gorm.DB) {
	t.Helper()
	hold := func(tx *gorm.DB) {
		if w, ok := tx.Statement.Context.Value(barrierKey{}).(*writerToken); ok {
			w.arrive()
			<-w.b.release
		}
	}
	cb := db.Callback()
	for _, err := range []error{
		cb.Create().Before("gorm:create").Register("test:hold-create", hold),
		cb.Update().Before("gorm:update").Register("test:hold-update", hold),
		cb.Raw().Before("gorm:raw").Register("test:hold-raw", hold),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
}

// openPool opens the migrated database at path as another process would:
// its own pool of conns connections, transactions beginning as txlock says.
func openPool(t *testing.T, path, txlock string, conns int) *gorm.DB {
	t.Helper()
	q := url.Values{}
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "busy_timeout(5000)")
	q.Set("_txlock", txlock)
	db, err := gorm.Open(sqlite.Open("file:"+path+"?"+q.Encode()), &gorm.Config{
		NowFunc: func() time.Time { return time.Now().UTC() }, TranslateError: true,
		Logger: logger.Discard, SkipDefaultTransaction: true})
	if err != nil {
		t.Fatal(err)
	}
	sqlDB, _ := db.DB()
	sqlDB.SetMaxOpenConns(conns)
	t.Cleanup(func() { _ = sqlDB.Close() })
	holdWrites(t, db)
	return db
}

// Two writers that read the same revision and write at once: exactly one
// stores its document, the other gets services.ErrConflict and the
// revision moves by one. The compare-and-set has to be the write statement
// itself: with a read, a check and a write, both writers pass the check —
// on SQLite the loser then fails with SQLITE_BUSY instead of a conflict, on
// PostgreSQL (READ COMMITTED) both writes land and one is lost.
func TestPutSettingTwoWritersOneConflict(t *testing.T) {
	for _, c := range []struct {
		name   string
		txlock string // how the pools begin transactions
		pools  int    // 1: one process with two connections; 2: two processes
	}{
		{"sqlite/two processes", "immediate", 2},
		{"sqlite/transactions that lock on first write", "deferred", 1},
	} {
		for _, base := range []int64{0, 1} {
			t.Run(fmt.Sprintf("%s/base r%d", c.name, base), func(t *testing.T) {
				path := filepath.Join(t.TempDir(), "db.sqlite")
				db, err := models.Open(context.Background(), path, time.Now)
				if err != nil {
					t.Fatal(err)
				}
				seedSetting(t, models.NewSettingsStore(db), base)
				_ = models.Close(db)
				first := openPool(t, path, c.txlock, 3-c.pools)
				second := first
				if c.pools == 2 {
					second = openPool(t, path, c.txlock, 1)
				}
				raceTwoWriters(t, base, models.NewSettingsStore(first), models.NewSettingsStore(second))
			})
		}
	}
	for _, base := range []int64{0, 1} {
		t.Run(fmt.Sprintf("postgres/two processes/base r%d", base), func(t *testing.T) {
			dsn := testkit.PostgresSchema(t)
			pools := make([]*gorm.DB, 2)
			for i := range pools {
				db, err := models.OpenPostgres(context.Background(), dsn, time.Now, models.PostgresOptions{MaxOpenConns: 2})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = models.Close(db) })
				holdWrites(t, db)
				pools[i] = db
			}
			seedSetting(t, models.NewSettingsStore(pools[0]), base)
			raceTwoWriters(t, base, models.NewSettingsStore(pools[0]), models.NewSettingsStore(pools[1]))
		})
	}
}

// seedSetting stores revision 1 of "general" when base is 1.
func seedSetting(t *testing.T, st *models.SettingsStore, base int64) {
	t.Helper()
	if base == 1 {
		if _, err := st.PutSetting(context.Background(), "general", []byte(`{"seed":true}`), 0); err != nil {
			t.Fatal(err)
		}
	}
}

// raceTwoWriters has both stores write "general" with expected revision
// base, held at the barrier until both are about to write.
func raceTwoWriters(t *testing.T, base int64, stores ...*models.SettingsStore) {
	t.Helper()
	b := newWriteBarrier(len(stores))
	var wg sync.WaitGroup
	revs, errs := make([]int64, len(stores)), make([]error, len(stores))
	for i, st := range stores {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := &writerToken{b: b}
			defer w.arrive() // a writer that fails before writing still lets the other one go
			ctx := context.WithValue(context.Background(), barrierKey{}, w)
			revs[i], errs[i] = st.PutSetting(ctx, "general", fmt.Appendf(nil, `{"writer":%d}`, i), base)
		}()
	}
	wg.Wait()
	won := -1
	for i, err := range errs {
		switch {
		case err == nil && won < 0:
			won = i
		case err == nil:
			t.Fatalf("both writers stored a document with base revision %d", base)
		case !errors.Is(err, services.ErrConflict):
			t.Fatalf("writer %d: %v, want services.ErrConflict", i, err)
		}
	}
	if won < 0 {
		t.Fatalf("no writer won: %v", errs)
	}
	if revs[won] != base+1 {
		t.Fatalf("winner's revision %d, want %d", revs[won], base+1)
	}
	doc, rev, err := stores[0].GetSetting(context.Background(), "general")
	if err != nil || rev != base+1 || string(doc) != fmt.Sprintf(`{"writer":%d}`, won) {
		t.Fatalf("stored %s at r%d (%v), want writer %d's document at r%d", doc, rev, err, won, base+1)
	}
}

// A stale expected revision, or 0 for a key that exists, is a conflict and
// changes nothing; the right one moves the revision by one.
func TestPutSettingCompareAndSet(t *testing.T) {
	testkit.Dialects(t, time.Now, testPutSettingCompareAndSet)
}

func testPutSettingCompareAndSet(t *testing.T, db *gorm.DB) {
	ctx := context.Background()
	st := models.NewSettingsStore(db)
	if _, _, err := st.GetSetting(ctx, "k"); !errors.Is(err, services.ErrNotFound) {
		t.Fatalf("absent key: %v", err)
	}
	if _, err := st.PutSetting(ctx, "k", []byte(`{"a":1}`), 3); !errors.Is(err, services.ErrConflict) {
		t.Fatalf("absent key with expected 3: %v", err)
	}
	if rev, err := st.PutSetting(ctx, "k", []byte(`{"a":1}`), 0); err != nil || rev != 1 {
		t.Fatalf("create: r%d %v", rev, err)
	}
	for _, stale := range []int64{0, 2} {
		if _, err := st.PutSetting(ctx, "k", []byte(`{"a":2}`), stale); !errors.Is(err, services.ErrConflict) {
			t.Fatalf("expected %d at r1: %v", stale, err)
		}
	}
	if rev, err := st.PutSetting(ctx, "k", []byte(`{"a":3}`), 1); err != nil || rev != 2 {
		t.Fatalf("update: r%d %v", rev, err)
	}
	if doc, rev, _ := st.GetSetting(ctx, "k"); string(doc) != `{"a":3}` || rev != 2 {
		t.Fatalf("stored %s r%d", doc, rev)
	}
}
