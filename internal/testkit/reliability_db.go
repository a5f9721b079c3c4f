package testkit

import (
	"database/sql"
	"net/url"
	"path/filepath"
	"strings"
	"testing"

	_ "github.com/glebarez/go-sqlite" // driver "sqlite"
)

// InspectDB opens a Switchyard database file directly (no migrations, no
// app code), after its process has ended, and returns PRAGMA
// integrity_check joined into one string ("ok" when sound), the rows of
// PRAGMA foreign_key_check, and a query function for counts. Opening
// replays a leftover WAL, exactly as a restart would. The handle is closed
// on cleanup.
func InspectDB(t testing.TB, path string) (integrity string, fkViolations int, db *sql.DB) {
	t.Helper()
	abs, err := filepath.Abs(path)
	if err != nil {
		t.Fatal(err)
	}
	q := url.Values{}
	q.Add("_pragma", "busy_timeout(5000)")
	db, err = sql.Open("sqlite", "file:"+abs+"?"+q.Encode())
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { db.Close() })
	rows, err := db.Query("PRAGMA integrity_check")
	if err != nil {
		t.Fatalf("integrity_check: %v", err)
	}
	var lines []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		lines = append(lines, s)
	}
	rows.Close()
	fk, err := db.Query("PRAGMA foreign_key_check")
	if err != nil {
		t.Fatalf("foreign_key_check: %v", err)
	}
	for fk.Next() {
		fkViolations++
	}
	fk.Close()
	return strings.Join(lines, "; "), fkViolations, db
}

// CountRows returns SELECT count(*) FROM table (WHERE where, when given).
func CountRows(t testing.TB, db *sql.DB, table, where string, args ...any) int {
	t.Helper()
	q := "SELECT count(*) FROM " + table
	if where != "" {
		q += " WHERE " + where
	}
	var n int
	if err := db.QueryRow(q, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}
