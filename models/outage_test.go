package models_test

import (
	"context"
	"errors"
	"net/url"
	"testing"
	"time"

	"gorm.io/gorm"

	"switchyard/internal/testkit"
	"switchyard/models"
	"switchyard/services"
)

// pgThroughProxy opens a migrated PostgreSQL schema whose pool connects
// through a proxy the test can cut.
func pgThroughProxy(t *testing.T) (*gorm.DB, *testkit.TCPProxy) {
	t.Helper()
	dsn := testkit.PostgresSchema(t)
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	proxy := testkit.StartTCPProxy(t, u.Host)
	db, err := models.OpenPostgres(context.Background(), proxy.URL(t, dsn), time.Now, models.PostgresOptions{MaxOpenConns: 3})
	if err != nil {
		t.Fatalf("open postgres: %v", err)
	}
	t.Cleanup(func() { _ = models.Close(db) })
	return db, proxy
}

// Every way a PostgreSQL server goes away under a running replica is
// "unavailable" (503 with Retry-After, scale-out §3.7), never an unknown
// error that would answer 500: a connection cut in the middle of a query, in
// the middle of a transaction, a pool whose connections died, and a server
// that refuses new connections.
func TestPostgresOutageErrorsAreUnavailable(t *testing.T) {
	db, proxy := pgThroughProxy(t)
	ctx := context.Background()
	keys := models.NewKeyStore(db)
	if _, err := keys.ListKeys(ctx); err != nil {
		t.Fatalf("before the outage: %v", err)
	}

	// Mid-query: the connection drops while the server works.
	midQuery := make(chan error, 1)
	go func() { midQuery <- db.WithContext(ctx).Exec(`SELECT pg_sleep(5)`).Error }()
	// Mid-transaction: a statement after the cut.
	tx := db.WithContext(ctx).Begin()
	if tx.Error != nil {
		t.Fatal(tx.Error)
	}
	if err := tx.Exec(`SELECT 1`).Error; err != nil {
		t.Fatal(err)
	}
	if !testkit.PollUntil(5*time.Second, func() bool {
		var n int64
		_ = db.Raw(`SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'SELECT pg_sleep%' AND state = 'active'`).Scan(&n).Error
		return n > 0
	}) {
		t.Fatal("the long query never started")
	}
	proxy.Cut()

	check := func(what string, err error) {
		t.Helper()
		if err == nil {
			t.Errorf("%s: no error with the database cut off", what)
			return
		}
		if !models.IsUnavailable(err) {
			t.Errorf("%s: %v (%T) is not recognised as unavailable", what, err, err)
		}
	}
	select {
	case err := <-midQuery:
		check("query cut in the middle", err)
	case <-time.After(10 * time.Second):
		t.Fatal("the cut query never returned")
	}
	check("statement in a cut transaction", tx.Exec(`SELECT 2`).Error)
	check("commit of a cut transaction", tx.Commit().Error)
	_, err := keys.ListKeys(ctx)
	check("repository read on a dead pool", err)
	var uerr *services.UnavailableError
	if !errors.As(err, &uerr) {
		t.Errorf("repository error %v is not a services.UnavailableError", err)
	}
	check("raw query on a refusing server", db.WithContext(ctx).Exec(`SELECT 1`).Error)

	proxy.Restore(t)
	if !testkit.PollUntil(10*time.Second, func() bool { _, err := keys.ListKeys(ctx); return err == nil }) {
		t.Fatal("the pool did not recover after the database came back")
	}
}

// A transaction PostgreSQL aborts as a serialization failure or a deadlock
// runs once more (scale-out §3.7); aborted again, it is a transient error
// (503 with Retry-After), never a 500.
func TestPostgresTransactionRetriedOnceOnSerializationFailure(t *testing.T) {
	db := testkit.OpenPostgresDB(t, time.Now)
	ctx := context.Background()
	abort := func(tx *gorm.DB, code string) error {
		return tx.Exec(`DO $$ BEGIN RAISE EXCEPTION 'forced by the test' USING ERRCODE = '` + code + `'; END $$`).Error
	}
	for _, code := range []string{"40001", "40P01"} {
		runs := 0
		err := models.RunTx(ctx, db, func(tx *gorm.DB) error {
			runs++
			if err := tx.Exec(`INSERT INTO admin_login_failures (client_ip, at) VALUES ('192.0.2.1', ?)`, runs).Error; err != nil {
				return err
			}
			if runs == 1 {
				return abort(tx, code)
			}
			return nil
		})
		if err != nil || runs != 2 {
			t.Fatalf("%s once: err %v after %d runs, want success on the second", code, err, runs)
		}
		var rows []int64
		if err := db.Raw(`SELECT at FROM admin_login_failures ORDER BY at`).Scan(&rows).Error; err != nil || len(rows) != 1 || rows[0] != 2 {
			t.Fatalf("%s once: rows %v (%v), want only the second run's", code, rows, err)
		}
		db.Exec(`DELETE FROM admin_login_failures`)

		runs = 0
		err = models.RunTx(ctx, db, func(tx *gorm.DB) error { runs++; return abort(tx, code) })
		if runs != 2 || !models.IsUnavailable(err) {
			t.Fatalf("%s twice: %d runs, err %v; want 2 runs and a transient error", code, runs, err)
		}
	}
	// Any other error is not retried.
	runs := 0
	err := models.RunTx(ctx, db, func(tx *gorm.DB) error { runs++; return abort(tx, "23505") })
	if runs != 1 || err == nil || models.IsUnavailable(err) {
		t.Fatalf("unique violation: %d runs, err %v", runs, err)
	}
}
