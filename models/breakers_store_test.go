package models_test

import (
	"context"
	"reflect"
	"testing"
	"time"

	"switchyard/internal/testkit"
	"switchyard/models"
	"switchyard/services"
	"switchyard/services/resilience"
)

func TestBreakerStoreRoundTrip(t *testing.T) {
	ctx := context.Background()
	db := testkit.OpenDB(t)
	store := models.NewBreakerStore(db)
	t0 := time.Date(2026, 3, 1, 9, 59, 47, 123_000_000, time.UTC)

	open := resilience.BreakerSnapshot{
		Name: "anthropic", Profile: services.AuthAPIKey, State: resilience.BreakerOpen,
		FailureCount: 12, OpenCycleCount: 2, OpenedAt: t0, LastFailureAt: t0.Add(-time.Second),
		LastFailureReason: "server_error", Generation: 7, UpdatedAt: t0,
	}
	counting := resilience.BreakerSnapshot{
		Name: "openai", Profile: services.AuthOAuth, State: resilience.BreakerClosed,
		FailureCount: 3, LastFailureAt: t0, LastFailureReason: "transient", UpdatedAt: t0,
	}
	for _, s := range []resilience.BreakerSnapshot{open, counting} {
		if err := store.SaveBreaker(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	got, err := store.LoadBreakers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := []resilience.BreakerSnapshot{open, counting}; !reflect.DeepEqual(got, want) {
		t.Fatalf("loaded\n%+v\nwant\n%+v", got, want)
	}

	// Instants are epoch ms; a zero time is NULL.
	var openedAt *int64
	if err := db.Table("domain_circuit_breakers").Select("opened_at").Where("name = ?", "openai").Scan(&openedAt).Error; err != nil {
		t.Fatal(err)
	}
	if openedAt != nil {
		t.Fatalf("opened_at = %d, want NULL", *openedAt)
	}
	var ms int64
	if err := db.Table("domain_circuit_breakers").Select("opened_at").Where("name = ?", "anthropic").Scan(&ms).Error; err != nil {
		t.Fatal(err)
	}
	if ms != t0.UnixMilli() {
		t.Fatalf("opened_at = %d, want %d", ms, t0.UnixMilli())
	}

	// Save replaces the row.
	half := open
	half.State, half.Generation, half.UpdatedAt = resilience.BreakerHalfOpen, 8, t0.Add(30*time.Second)
	if err := store.SaveBreaker(ctx, half); err != nil {
		t.Fatal(err)
	}
	got, _ = store.LoadBreakers(ctx)
	if len(got) != 2 || !reflect.DeepEqual(got[0], half) {
		t.Fatalf("after upsert: %+v", got)
	}

	if err := store.DeleteBreaker(ctx, "anthropic"); err != nil {
		t.Fatal(err)
	}
	if err := store.DeleteBreaker(ctx, "anthropic"); err != nil {
		t.Fatalf("deleting a missing row: %v", err)
	}
	got, _ = store.LoadBreakers(ctx)
	if len(got) != 1 || got[0].Name != "openai" {
		t.Fatalf("after delete: %+v", got)
	}

	if err := store.SaveBreaker(ctx, open); err != nil {
		t.Fatal(err)
	}
	if err := store.DeleteAllBreakers(ctx); err != nil {
		t.Fatal(err)
	}
	if got, _ = store.LoadBreakers(ctx); len(got) != 0 {
		t.Fatalf("after delete all: %+v", got)
	}
}

func TestBreakerStoreStampsUpdatedAt(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	db := testkit.OpenDBAt(t, t.TempDir()+"/b.db", func() time.Time { return now })
	store := models.NewBreakerStore(db)
	if err := store.SaveBreaker(ctx, resilience.BreakerSnapshot{Name: "x", Profile: services.AuthLocal,
		State: resilience.BreakerDegraded, FailureCount: 1}); err != nil {
		t.Fatal(err)
	}
	got, err := store.LoadBreakers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || !got[0].UpdatedAt.Equal(now) || !got[0].OpenedAt.IsZero() || !got[0].LastFailureAt.IsZero() {
		t.Fatalf("loaded %+v", got)
	}
}

func TestBreakerStoreBacksBreakers(t *testing.T) {
	ctx := context.Background()
	clock := testkit.NewFakeClock(time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC))
	db := testkit.OpenDB(t)
	store := models.NewBreakerStore(db)
	cfg := func() resilience.BreakerConfig { return nil } // spec defaults
	br := resilience.NewBreakers(clock, cfg, store, nil)
	for range 2 {
		_, _, gen, _ := br.Allow("ollama", services.AuthLocal)
		br.Failure("ollama", services.AuthLocal, gen, false, true, true, "transient")
	}
	rows, err := store.LoadBreakers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || rows[0].State != resilience.BreakerOpen || rows[0].FailureCount != 2 ||
		!rows[0].OpenedAt.Equal(clock.Now()) || rows[0].Generation != 1 {
		t.Fatalf("rows = %+v", rows)
	}
	if n, err := br.ResetAll(ctx); err != nil || n != 1 {
		t.Fatalf("ResetAll = %d, %v", n, err)
	}
	if rows, _ = store.LoadBreakers(ctx); len(rows) != 0 {
		t.Fatalf("rows after ResetAll = %+v", rows)
	}
}
