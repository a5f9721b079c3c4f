package models_test

import (
	"context"
	"reflect"
	"testing"
	"time"

	"switchyard/internal/testkit"
	"switchyard/models"
	"switchyard/services/resilience"
)

var lockStoreT0 = time.Date(2026, 3, 1, 9, 58, 36, 123_000_000, time.UTC)

func lockRec(provider, conn string, shape resilience.LockShape, key, model string) resilience.LockoutRecord {
	return resilience.LockoutRecord{
		LockKey:        resilience.LockKey{Provider: provider, ConnectionID: conn, Shape: shape, Key: key},
		Model:          model,
		Reason:         "rate_limit",
		LastStatus:     429,
		FailureCount:   2,
		LockedAt:       lockStoreT0,
		Until:          lockStoreT0.Add(168 * time.Second),
		LastFailureAt:  lockStoreT0.Add(time.Second),
		LastCooldownMs: 168_000,
	}
}

func loadLocks(t *testing.T, s *models.LockoutStore) []resilience.LockoutRecord {
	t.Helper()
	recs, err := s.LoadLockouts(context.Background())
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	return recs
}

func TestLockoutStoreRoundTrip(t *testing.T) {
	ctx := context.Background()
	s := models.NewLockoutStore(testkit.OpenDB(t))
	if recs := loadLocks(t, s); len(recs) != 0 {
		t.Fatalf("fresh store: %v", recs)
	}
	a := lockRec("gemini", "c_3", resilience.ShapeFamily, "gemini-2.5-flash", "gemini-2.5-flash")
	b := lockRec("anthropic", "c_1", resilience.ShapeBase, "claude-x", "claude-x[1m]")
	for _, r := range []resilience.LockoutRecord{a, b} {
		if err := s.SaveLockout(ctx, r); err != nil {
			t.Fatalf("save: %v", err)
		}
	}
	got := loadLocks(t, s)
	if want := []resilience.LockoutRecord{b, a}; !reflect.DeepEqual(got, want) {
		t.Fatalf("load\n got %+v\nwant %+v", got, want)
	}

	// Saving the same key replaces every column.
	a2 := a
	a2.Model, a2.Reason, a2.LastStatus, a2.FailureCount = "gemini-2.5-flash-lite", "model_capacity", 503, 3
	a2.LockedAt, a2.Until, a2.LastFailureAt, a2.LastCooldownMs = a.Until, a.Until.Add(time.Hour), a.Until, 3_600_000
	if err := s.SaveLockout(ctx, a2); err != nil {
		t.Fatalf("upsert: %v", err)
	}
	if got := loadLocks(t, s); len(got) != 2 || !reflect.DeepEqual(got[1], a2) {
		t.Fatalf("after upsert: %+v", got)
	}

	if err := s.DeleteLockout(ctx, b.LockKey); err != nil {
		t.Fatalf("delete: %v", err)
	}
	if err := s.DeleteLockout(ctx, b.LockKey); err != nil {
		t.Fatalf("delete of a missing row: %v", err)
	}
	if got := loadLocks(t, s); len(got) != 1 || got[0].LockKey != a.LockKey {
		t.Fatalf("after delete: %+v", got)
	}
}

func TestLockoutStoreDeleteByFilter(t *testing.T) {
	ctx := context.Background()
	s := models.NewLockoutStore(testkit.OpenDB(t))
	seed := []resilience.LockoutRecord{
		lockRec("codex", "c1", resilience.ShapeFamily, "gpt-5", "gpt-5-codex"),
		lockRec("codex", "c1", resilience.ShapeExact, "gpt-5-codex", "gpt-5-codex"),
		lockRec("codex", "c1", resilience.ShapeExact, "gpt-5", "gpt-5"),
		lockRec("codex", "c2", resilience.ShapeFamily, "gpt-5", "gpt-5"),
		lockRec("codex", "c2", resilience.ShapeBase, "o4-mini", "o4-mini"),
		lockRec("openai", "c3", resilience.ShapeFamily, "gpt-5", "gpt-5"),
		lockRec("openai", "c3", resilience.ShapeFamily, "gpt-5-mini", "gpt-5-mini"),
	}
	reseed := func() {
		t.Helper()
		if _, err := s.DeleteLockouts(ctx, resilience.LockFilter{}); err != nil {
			t.Fatal(err)
		}
		for _, r := range seed {
			if err := s.SaveLockout(ctx, r); err != nil {
				t.Fatal(err)
			}
		}
	}
	cases := []struct {
		name   string
		filter resilience.LockFilter
		want   int
		left   int
	}{
		{"all", resilience.LockFilter{}, 7, 0},
		{"provider", resilience.LockFilter{Provider: "codex"}, 5, 2},
		{"connection", resilience.LockFilter{ConnectionID: "c1"}, 3, 4},
		{"provider and connection", resilience.LockFilter{Provider: "codex", ConnectionID: "c2"}, 2, 5},
		// gpt-5-codex on codex: family gpt-5 (both connections) and exact gpt-5-codex; not exact gpt-5.
		{"codex model everywhere", resilience.LockFilter{Provider: "codex", Model: "GPT-5-Codex"}, 3, 4},
		{"codex model on one connection", resilience.LockFilter{Provider: "codex", ConnectionID: "c1", Model: "gpt-5-codex"}, 2, 5},
		// gpt-5-mini is its own family on openai.
		{"openai model", resilience.LockFilter{Provider: "openai", Model: "gpt-5-mini"}, 1, 6},
		{"model on every provider", resilience.LockFilter{Model: "gpt-5"}, 4, 3},
		{"nothing", resilience.LockFilter{Provider: "groq"}, 0, 7},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			reseed()
			n, err := s.DeleteLockouts(ctx, tc.filter)
			if err != nil {
				t.Fatal(err)
			}
			if n != tc.want {
				t.Errorf("deleted %d, want %d", n, tc.want)
			}
			left := loadLocks(t, s)
			if len(left) != tc.left {
				t.Errorf("left %d, want %d", len(left), tc.left)
			}
			for _, r := range left {
				if tc.filter.Matches(r.LockKey) {
					t.Errorf("row %v matches the filter but survived", r.LockKey)
				}
			}
		})
	}
}
