package settings_test

import (
	"context"
	"testing"

	"switchyard/services"
	"switchyard/services/settings"
)

// Two processes on one store and one change feed: a PATCH through one is
// published at its revision and read again by the other (not by the
// writer itself), a resync reloads, and a derived value follows each
// version once.
func TestDocumentsFollowTheChangeFeed(t *testing.T) {
	ctx := context.Background()
	store := &gsMemStore{docs: map[string][]byte{}, revs: map[string]int64{}}
	feed := services.NewLocalFeed(nil)
	var seen []services.Change
	open := func() *settings.Document[settings.General] {
		d, err := settings.OpenGeneral(ctx, store, settings.GeneralOptions{})
		if err != nil {
			t.Fatal(err)
		}
		d.Follow(feed)
		return d
	}
	here, elsewhere := open(), open()
	feed.Subscribe(services.ChangeSettings, func(_ context.Context, c services.Change) error {
		seen = append(seen, c)
		return nil
	})
	computed := 0
	attempts := settings.NewDerived(elsewhere, func(g *settings.General) int { computed++; return g.Routing.MaxAttemptsPerRequest })
	first, again := *attempts.Get(), *attempts.Get()
	if first != 30 || again != 30 || computed != 1 {
		t.Fatalf("derived %d then %d, computed %d times", first, again, computed)
	}

	before := here.Current()
	if _, err := here.Patch(ctx, []byte(`{"routing": {"maxAttemptsPerRequest": 5}}`), ""); err != nil {
		t.Fatal(err)
	}
	if len(seen) != 1 || seen[0] != (services.Change{Kind: services.ChangeSettings, Key: services.SettingsGeneral, Version: 1}) {
		t.Fatalf("published %v", seen)
	}
	if *attempts.Get() != 5 || computed != 2 || elsewhere.Current().Revision != 1 {
		t.Fatalf("the other process: derived %d (computed %d times) at r%d", *attempts.Get(), computed, elsewhere.Current().Revision)
	}
	if here.Current() == before || here.Current().Revision != 1 {
		t.Fatal("the writer did not publish its own PATCH")
	}
	// The writer's own change does not reload it; a resync does.
	mine := here.Current()
	if err := feed.Publish(ctx, services.Change{Kind: services.ChangeSettings, Key: services.SettingsGeneral, Version: 1}); err != nil {
		t.Fatal(err)
	}
	if here.Current() != mine {
		t.Fatal("a change at the published revision reloaded the document")
	}
	if err := feed.Resync(ctx, services.ChangeSettings); err != nil {
		t.Fatal(err)
	}
	if here.Current() == mine || here.Current().Revision != 1 {
		t.Fatal("a resync did not reload the document")
	}
	// A refused PATCH publishes nothing.
	if _, err := here.Patch(ctx, []byte(`{"routing": {"maxAttemptsPerRequest": 0}}`), ""); err == nil {
		t.Fatal("out-of-range PATCH accepted")
	}
	if len(seen) != 3 { // the PATCH, the repeat and the resync
		t.Fatalf("published %v", seen)
	}
}
