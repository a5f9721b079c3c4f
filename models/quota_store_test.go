package models_test

import (
	"context"
	"net/http"
	"reflect"
	"testing"
	"time"

	"gorm.io/gorm"

	"switchyard/internal/testkit"
	"switchyard/models"
	"switchyard/services/quota"
)

var quotaT0 = time.Date(2026, 3, 1, 9, 58, 36, 123_000_000, time.UTC)

func TestQuotaStoreRoundTrip(t *testing.T) {
	ctx := context.Background()
	s := models.NewQuotaStore(testkit.OpenDB(t))
	if recs, err := s.LoadQuotaWindows(ctx); err != nil || len(recs) != 0 {
		t.Fatalf("fresh store: %v, %v", recs, err)
	}
	minute := quota.Record{ConnectionID: "c_2", Window: quota.Minute, Used: 1, Limit: 500, Remaining: 0,
		ResetAt: quotaT0.Add(6 * time.Minute), Source: quota.SourceOpenAI, ObservedAt: quotaT0}
	five := quota.Record{ConnectionID: "c_1", Window: quota.FiveH, Used: 0.42, ResetAt: quotaT0.Add(2 * time.Hour),
		Source: quota.SourceAnthropicUnified, ObservedAt: quotaT0}
	weekly := quota.Record{ConnectionID: "c_1", Window: quota.Weekly, Used: 0.4, Source: quota.SourceCodex, ObservedAt: quotaT0}
	if err := s.SaveQuotaWindows(ctx, []quota.Record{minute, five, weekly}); err != nil {
		t.Fatalf("save: %v", err)
	}
	if err := s.SaveQuotaWindows(ctx, nil); err != nil {
		t.Fatalf("save nothing: %v", err)
	}
	got, err := s.LoadQuotaWindows(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := []quota.Record{five, weekly, minute}; !reflect.DeepEqual(got, want) {
		t.Fatalf("load\n got %+v\nwant %+v", got, want)
	}

	// A newer observation replaces the (connection, window) row.
	five2 := five
	five2.Used, five2.ResetAt, five2.ObservedAt = 1, time.Time{}, quotaT0.Add(time.Minute)
	if err := s.SaveQuotaWindows(ctx, []quota.Record{five2}); err != nil {
		t.Fatal(err)
	}
	got, _ = s.LoadQuotaWindows(ctx)
	if want := []quota.Record{five2, weekly, minute}; !reflect.DeepEqual(got, want) {
		t.Fatalf("after replace\n got %+v\nwant %+v", got, want)
	}

	if err := s.DeleteQuotaWindows(ctx, "c_1"); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteQuotaWindows(ctx, "c_missing"); err != nil {
		t.Fatal(err)
	}
	got, _ = s.LoadQuotaWindows(ctx)
	if want := []quota.Record{minute}; !reflect.DeepEqual(got, want) {
		t.Fatalf("after delete\n got %+v\nwant %+v", got, want)
	}
}

// TestQuotaStoreSurvivesRestart runs a tracker over the store: windows it
// learned come back in a new tracker after Close.
func TestQuotaStoreSurvivesRestart(t *testing.T) {
	ctx := context.Background()
	db := testkit.OpenDB(t)
	clock := testkit.NewFakeClock(quotaT0)
	tr := quota.New(quota.Options{Store: models.NewQuotaStore(db), Clock: clock})
	h := http.Header{}
	h.Set("x-codex-primary-used-percent", "100")
	h.Set("x-codex-primary-window-minutes", "300")
	h.Set("x-codex-primary-reset-after-seconds", "1200")
	tr.Observe("c_1", h, clock.Now())
	if err := tr.Close(ctx); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Minute)
	tr2 := quota.New(quota.Options{Store: models.NewQuotaStore(db), Clock: clock})
	defer tr2.Close(ctx)
	if err := tr2.Load(ctx); err != nil {
		t.Fatal(err)
	}
	blocked, until := tr2.Gate("c_1", 0, clock.Now())
	if !blocked || !until.Equal(quotaT0.Add(1200*time.Second)) {
		t.Fatalf("after restart: gate %v until %v", blocked, until)
	}
}

// Two replicas write one connection's windows: the row keeps the newest
// observation whatever order the writes arrive in (the upsert is guarded by
// observed_at), on both dialects.
func TestQuotaStoreOlderObservationNeverWins(t *testing.T) {
	testkit.Dialects(t, time.Now, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		s := models.NewQuotaStore(db)
		newer := quota.Record{ConnectionID: "c_1", Window: quota.Weekly, Used: 1, ResetAt: quotaT0.Add(time.Hour),
			Source: quota.SourceCodex, ObservedAt: quotaT0.Add(time.Minute)}
		older := quota.Record{ConnectionID: "c_1", Window: quota.Weekly, Used: 0.2, Source: quota.SourceCodex, ObservedAt: quotaT0}
		other := quota.Record{ConnectionID: "c_1", Window: quota.FiveH, Used: 0.3, Source: quota.SourceCodex, ObservedAt: quotaT0}
		if err := s.SaveQuotaWindows(ctx, []quota.Record{newer}); err != nil {
			t.Fatal(err)
		}
		// The late write of the older reading changes nothing for its window
		// and still inserts the window it is first to write.
		if err := s.SaveQuotaWindows(ctx, []quota.Record{older, other}); err != nil {
			t.Fatal(err)
		}
		got, err := s.LoadQuotaWindows(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if want := []quota.Record{other, newer}; !reflect.DeepEqual(got, want) {
			t.Fatalf("rows\n got %+v\nwant %+v", got, want)
		}
	})
}
