package models_test

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"switchyard/internal/testkit"
	"switchyard/models"
	"switchyard/services/routing"
)

// The LKGP record of 30-routing §10.15 survives a restart: a state built on
// the same database after a success of the lkgp strategy puts the recorded
// entry first and prefers the recorded connection (case 3).
func TestLKGPRecordSurvivesRestart(t *testing.T) {
	ctx := context.Background()
	db := testkit.OpenDB(t)
	now := func() time.Time { return time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC) }
	entries := []routing.Entry{
		{Index: 0, ID: "A", Provider: "p", Model: "a", Available: true},
		{Index: 1, ID: "B", Provider: "p", Model: "b", Available: true},
		{Index: 2, ID: "C", Provider: "p", Model: "c", Available: true},
	}
	open := func() (*routing.MemoryState, routing.Strategy) {
		st, err := routing.NewMemoryState(ctx, routing.StateOptions{Now: now, LKGP: models.NewLKGPStore(db)})
		if err != nil {
			t.Fatal(err)
		}
		return st, routing.NewRegistry(rand.New(rand.NewPCG(1, 2)), st)["lkgp"]
	}
	st, lkgp := open()
	lkgp.Order(routing.Request{ComboID: "cb"}, entries)
	st.OnSuccess("cb", "B", "c7")

	st2, lkgp2 := open()
	order := lkgp2.Order(routing.Request{ComboID: "cb"}, entries)
	if order[0].ID != "B" || order[1].ID != "A" || order[2].ID != "C" {
		t.Fatalf("order after restart = %v %v %v, want B A C", order[0].ID, order[1].ID, order[2].ID)
	}
	if id, ok := lkgp2.(routing.ConnectionPreferrer).PreferredConnection("cb", "B"); !ok || id != "c7" {
		t.Fatalf("preferred connection = %q %v, want c7", id, ok)
	}
	st2.Forget("cb")
	recs, err := models.NewLKGPStore(db).Load(ctx)
	if err != nil || len(recs) != 0 {
		t.Fatalf("after Forget: %v %v", recs, err)
	}
	_ = st
}
