package models_test

import (
	"context"
	"testing"
	"time"

	"switchyard/internal/testkit"
	"switchyard/models"
)

// Of two replicas asking for one job's lock, one holds it and keeps it on
// every later call; once it lets go (shutdown) or its connection dies
// (killed), the other takes over. Locks of different jobs are independent.
func TestJobLocksOneHolderAndTakeOver(t *testing.T) {
	ctx := context.Background()
	dsn := testkit.PostgresSchema(t)
	open := func() *models.JobLocks {
		db, err := models.OpenPostgres(ctx, dsn, time.Now, models.PostgresOptions{MaxOpenConns: 3})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = models.Close(db) })
		return models.NewJobLocks(db)
	}
	a, b := open(), open()
	holds := func(j *models.JobLocks, job string) bool {
		t.Helper()
		ok, err := j.Holds(ctx, job)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	if !holds(a, "sweep") || holds(b, "sweep") {
		t.Fatal("not exactly one holder of sweep")
	}
	if !holds(a, "sweep") || holds(b, "sweep") {
		t.Fatal("the holder changed without a reason")
	}
	if !holds(b, "expire") || holds(a, "expire") {
		t.Fatal("another job's lock is not independent")
	}
	if err := a.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if !holds(b, "sweep") {
		t.Fatal("B did not take sweep over after A let go")
	}
	// B's lock connection dies (its replica killed): A takes over.
	var pid int
	db, err := models.OpenPostgres(ctx, dsn, time.Now, models.PostgresOptions{MaxOpenConns: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer models.Close(db)
	if err := db.Raw(`SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted AND objid = hashtext('switchyard_job:sweep')::oid LIMIT 1`).Scan(&pid).Error; err != nil || pid == 0 {
		t.Fatalf("holder pid %d, %v", pid, err)
	}
	if err := db.Exec(`SELECT pg_terminate_backend(?)`, pid).Error; err != nil {
		t.Fatal(err)
	}
	if !testkit.PollUntil(5*time.Second, func() bool { ok, _ := a.Holds(ctx, "sweep"); return ok }) {
		t.Fatal("A did not take sweep over after B's connection died")
	}
	// B notices on its next call that it lost the lock.
	if holds(b, "sweep") {
		t.Fatal("B still believes it holds sweep")
	}
}
