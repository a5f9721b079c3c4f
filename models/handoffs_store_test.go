package models_test

import (
	"context"
	"reflect"
	"testing"
	"time"

	"gorm.io/gorm"

	"switchyard/internal/testkit"
	"switchyard/models"
	"switchyard/services/gateway"
)

// Context-relay handoffs persist with their TTL: live ones load back
// exactly, expired ones are neither loaded nor kept.
func TestHandoffStoreRoundTripAndExpiry(t *testing.T) {
	ctx := context.Background()
	store := models.NewHandoffStore(testkit.OpenDB(t))
	now := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	live := gateway.Handoff{ID: "h1", Source: "c_1", ExpiresAt: now.Add(time.Hour), Injected: []string{"c_2"},
		Summary: gateway.HandoffSummary{Summary: "s", KeyDecisions: []string{"a", "b"}, TaskProgress: "p", ActiveEntities: []string{"x"}}}
	old := gateway.Handoff{ID: "h0", Source: "c_1", ExpiresAt: now.Add(-time.Minute), Injected: []string{}, Summary: gateway.HandoffSummary{Summary: "old"}}
	for _, h := range []gateway.Handoff{live, old} {
		if err := store.SaveHandoff(ctx, h); err != nil {
			t.Fatal(err)
		}
	}
	got, err := store.LoadHandoffs(ctx, now)
	if err != nil || len(got) != 1 || !reflect.DeepEqual(got[0], live) {
		t.Fatalf("loaded %+v %v, want %+v", got, err, live)
	}
	if n, err := store.DeleteExpiredHandoffs(ctx, now); err != nil || n != 1 {
		t.Fatalf("deleted %d %v", n, err)
	}
}

// The fleet's handoff reads and summary claims, on both dialects: a record
// reads back by id, a claim is exclusive until it lapses or is released, and
// claims are never loaded as records.
func TestHandoffStoreReadThroughAndClaims(t *testing.T) {
	now := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	testkit.Dialects(t, func() time.Time { return now }, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		a, b := models.NewHandoffStore(db), models.NewHandoffStore(db) // two replicas
		h := gateway.Handoff{ID: "h1", Source: "c_1", ExpiresAt: now.Add(time.Hour), Injected: []string{},
			Summary: gateway.HandoffSummary{Summary: "s"}}
		if err := a.SaveHandoff(ctx, h); err != nil {
			t.Fatal(err)
		}
		if got, ok, err := b.LoadHandoff(ctx, "h1", now); err != nil || !ok || !reflect.DeepEqual(got, h) {
			t.Fatalf("LoadHandoff = %+v, %v, %v", got, ok, err)
		}
		if _, ok, err := b.LoadHandoff(ctx, "h1", now.Add(time.Hour)); err != nil || ok {
			t.Fatalf("an expired record read back: %v, %v", ok, err)
		}
		if ok, err := a.ClaimHandoff(ctx, "h2", now.Add(90*time.Second), now); err != nil || !ok {
			t.Fatalf("first claim = %v, %v", ok, err)
		}
		if ok, err := b.ClaimHandoff(ctx, "h2", now.Add(91*time.Second), now.Add(time.Second)); err != nil || ok {
			t.Fatalf("second claim while the first is live = %v, %v", ok, err)
		}
		if got, err := b.LoadHandoffs(ctx, now); err != nil || len(got) != 1 || got[0].ID != "h1" {
			t.Fatalf("LoadHandoffs = %+v, %v (a claim is not a record)", got, err)
		}
		if _, ok, _ := b.LoadHandoff(ctx, "claim:h2", now); ok {
			t.Fatal("a claim read back as a record")
		}
		// A lapsed claim (its replica died) can be taken over; a released one too.
		if ok, err := b.ClaimHandoff(ctx, "h2", now.Add(3*time.Minute), now.Add(90*time.Second)); err != nil || !ok {
			t.Fatalf("claim after the first lapsed = %v, %v", ok, err)
		}
		if err := b.ReleaseHandoffClaim(ctx, "h2"); err != nil {
			t.Fatal(err)
		}
		if ok, err := a.ClaimHandoff(ctx, "h2", now.Add(4*time.Minute), now.Add(2*time.Minute)); err != nil || !ok {
			t.Fatalf("claim after release = %v, %v", ok, err)
		}
	})
}

// Expired tool limits are swept, live ones stay, on both dialects.
func TestToolLimitStoreDeleteExpired(t *testing.T) {
	now := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	testkit.Dialects(t, func() time.Time { return now }, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		s := models.NewToolLimitStore(db)
		for i, exp := range []time.Duration{-time.Minute, 0, time.Hour} {
			l := gateway.ToolLimit{Provider: "openai", Model: string(rune('a' + i)), MaxTools: 8, Source: "parsed",
				LearnedAt: now.Add(-24 * time.Hour), ExpiresAt: now.Add(exp)}
			if err := s.SaveToolLimit(ctx, l); err != nil {
				t.Fatal(err)
			}
		}
		if n, err := s.DeleteExpiredToolLimits(ctx, now); err != nil || n != 2 {
			t.Fatalf("DeleteExpiredToolLimits = %d, %v; want 2", n, err)
		}
		if left, _ := s.LoadToolLimits(ctx); len(left) != 1 || left[0].Model != "c" {
			t.Fatalf("left %+v", left)
		}
	})
}
