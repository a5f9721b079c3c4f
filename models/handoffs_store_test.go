package models_test

import (
	"context"
	"reflect"
	"testing"
	"time"

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
