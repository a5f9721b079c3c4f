package models_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"gorm.io/gorm"

	"switchyard/internal/testkit"
	"switchyard/models"
	"switchyard/models/sqlitefast"
	"switchyard/services"
)

// slowLogStore is a store whose C-API path is broken, as after a driver
// upgrade; reasons collects what OnSlowPath was told.
func slowLogStore(t *testing.T) (*models.RequestLogStore, *gorm.DB, *[]error) {
	t.Helper()
	testkit.SQLiteOnly(t) // the fallback from SQLite's C-API path
	db := testkit.OpenDB(t)
	s := models.NewRequestLogStore(db)
	models.BreakRequestLogFastPath(s)
	var reasons []error
	s.OnSlowPath(func(err error) { reasons = append(reasons, err) })
	return s, db, &reasons
}

// rawRows reads every column of every row, as stored.
func rawRows(t *testing.T, db *gorm.DB) []map[string]any {
	t.Helper()
	var rows []map[string]any
	if err := db.Raw("SELECT * FROM request_logs ORDER BY id").Scan(&rows).Error; err != nil {
		t.Fatal(err)
	}
	return rows
}

// When the C-API path is unavailable every batch still lands, through the
// GORM batch insert, byte for byte as the fast path stores it; the store says
// so once and counts the slow batches.
func TestRequestLogFallbackStoresTheSameRows(t *testing.T) {
	fast := testkit.OpenDB(t)
	fs := models.NewRequestLogStore(fast)
	slow, slowDB, reasons := slowLogStore(t)

	odd := fullEntry()
	odd.ID = "req_odd"
	odd.AttemptLog[0].Detail = "<b>&amp;</b> \u2028 \"q\" \\ \x01"
	odd.Warnings = []string{"", "\xff invalid"}
	odd.TtftMs = nil
	odd.Bodies = &services.CapturedBodies{UpstreamRequest: &services.CapturedBody{Text: strings.Repeat("é", 1000)}}
	var all []services.RequestLogEntry
	for _, batch := range [][]services.RequestLogEntry{{fullEntry(), odd}, variedEntries(0, 65), variedEntries(65, 300), variedEntries(365, 1)} {
		writeLogs(t, fs, batch...)
		writeLogs(t, slow, batch...)
		all = append(all, batch...)
	}
	checkStored(t, slow, append(all[:1:1], all[2:]...)) // odd's invalid UTF-8 reads back as U+FFFD, on both paths
	if got, want := rawRows(t, slowDB), rawRows(t, fast); !reflect.DeepEqual(got, want) {
		for i := range min(len(got), len(want)) {
			if !reflect.DeepEqual(got[i], want[i]) {
				t.Fatalf("row %d differs between the paths:\nfallback %v\nC API    %v", i, got[i], want[i])
			}
		}
		t.Fatalf("fallback stored %d rows, the C API %d", len(got), len(want))
	}
	if len(*reasons) != 1 || !errors.Is((*reasons)[0], sqlitefast.ErrUnsupported) {
		t.Fatalf("OnSlowPath told %v, want one ErrUnsupported", *reasons)
	}
	if n := slow.FallbackBatches(); n != 4 {
		t.Fatalf("FallbackBatches = %d, want 4", n)
	}
	if n := fs.FallbackBatches(); n != 0 {
		t.Fatalf("the working fast path counted %d fallback batches", n)
	}
}

// The fallback keeps the write contract: re-delivered ids are skipped, a
// batch that fails part way stores nothing, a cancelled write stores
// nothing.
func TestRequestLogFallbackKeepsTheContract(t *testing.T) {
	ctx := context.Background()
	s, db, _ := slowLogStore(t)
	writeLogs(t, s, services.RequestLogEntry{ID: "r0042", CreatedAt: logT0, Endpoint: "/v1/responses", Status: 201})
	batch := make([]services.RequestLogEntry, 250)
	for i := range batch {
		batch[i] = services.RequestLogEntry{ID: fmt.Sprintf("r%04d", i), CreatedAt: logT0, Endpoint: "/v1/chat/completions", Status: 200}
	}
	writeLogs(t, s, batch...)
	if n := countLogs(t, db); n != 250 {
		t.Fatalf("%d rows, want 250", n)
	}
	if kept, err := s.FindRequestLog(ctx, "r0042"); err != nil || kept.Status != 201 {
		t.Fatalf("stored entry overwritten: %+v, %v", kept, err)
	}

	if err := db.Exec(`CREATE TRIGGER request_logs_boom BEFORE INSERT ON request_logs WHEN NEW.id = 'boom'
		BEGIN SELECT RAISE(ABORT, 'boom'); END`).Error; err != nil {
		t.Fatal(err)
	}
	second := variedEntries(1000, 100)
	second[80].ID = "boom" // in the second INSERT, after 64 rows went in
	if err := s.WriteRequestLogs(ctx, second); err == nil || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("write through the failing trigger = %v, want the trigger's error", err)
	}
	if n := countLogs(t, db); n != 250 {
		t.Fatalf("%d rows after the failed batch, want 250", n)
	}

	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := s.WriteRequestLogs(cctx, variedEntries(2000, 3)); err == nil {
		t.Fatal("write with a cancelled context succeeded")
	}
	if n := countLogs(t, db); n != 250 {
		t.Fatalf("%d rows after a cancelled write, want 250", n)
	}
}
