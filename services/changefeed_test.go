package services_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"switchyard/internal/testkit"
	"switchyard/models"
	"switchyard/services"
)

// LocalFeed delivers to the subscribers of the change's kind only, in
// subscription order, before Publish returns; a handler error comes back
// to the publisher, is counted and reaches onError, and does not stop the
// other subscribers.
func TestLocalFeedDelivery(t *testing.T) {
	ctx := context.Background()
	var reported []string
	f := services.NewLocalFeed(func(c services.Change, err error) { reported = append(reported, c.String()+": "+err.Error()) })
	var got []string
	boom := errors.New("boom")
	f.Subscribe(services.ChangeConnection, func(_ context.Context, c services.Change) error {
		got = append(got, "first "+c.String())
		return nil
	})
	f.Subscribe(services.ChangeConnection, func(_ context.Context, c services.Change) error {
		got = append(got, "second "+c.String())
		if c.Payload == services.ChangeDeleted {
			return boom
		}
		return nil
	})
	f.Subscribe(services.ChangeCombo, func(_ context.Context, c services.Change) error {
		got = append(got, "combo "+c.String())
		return nil
	})

	if err := f.Publish(ctx, services.Change{Kind: services.ChangeConnection, Key: "c_1"}); err != nil {
		t.Fatal(err)
	}
	err := f.Publish(ctx, services.Change{Kind: services.ChangeConnection, Key: "c_2", Payload: services.ChangeDeleted})
	if !errors.Is(err, boom) {
		t.Fatalf("Publish returned %v, want the handler's error", err)
	}
	if err := f.Publish(ctx, services.Change{Kind: services.ChangeSettings, Key: "resilience", Version: 3}); err != nil {
		t.Fatal(err)
	}
	want := []string{"first connection:c_1", "second connection:c_1", "first connection:c_2 deleted", "second connection:c_2 deleted"}
	if !slices.Equal(got, want) {
		t.Fatalf("delivered %q, want %q", got, want)
	}
	if len(reported) != 1 || reported[0] != "connection:c_2 deleted: boom" {
		t.Fatalf("onError saw %q", reported)
	}
	st := f.Stats()
	if st.Published[services.ChangeConnection] != 2 || st.HandlerErrors[services.ChangeConnection] != 1 || st.Published[services.ChangeSettings] != 1 {
		t.Fatalf("stats %+v", st)
	}
	if err := f.Publish(ctx, services.Change{Key: "x"}); err == nil {
		t.Fatal("a change without a kind was accepted")
	}
}

// Resync tells every subscriber of the kind to reload everything (Key ""),
// and a handler may publish in turn without deadlocking.
func TestLocalFeedResyncAndNestedPublish(t *testing.T) {
	ctx := context.Background()
	f := services.NewLocalFeed(nil)
	var got []services.Change
	f.Subscribe(services.ChangeCatalogue, func(ctx context.Context, c services.Change) error {
		got = append(got, c)
		return f.Publish(ctx, services.Change{Kind: services.ChangeConnection, Key: c.Key})
	})
	f.Subscribe(services.ChangeConnection, func(_ context.Context, c services.Change) error {
		got = append(got, c)
		return nil
	})
	if err := f.Resync(ctx, services.ChangeCatalogue); err != nil {
		t.Fatal(err)
	}
	want := []services.Change{{Kind: services.ChangeCatalogue}, {Kind: services.ChangeConnection}}
	if !slices.Equal(got, want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
}

// touchLost is a key store whose last-used writes fail.
type touchLost struct{ services.KeyStore }

func (touchLost) TouchKey(context.Context, string, time.Time) error {
	return errors.New("database is locked")
}

// A key change rereads the index from the store, but a last-used time that
// Touch holds only in memory (its write failed, and was reported) survives
// the reload instead of going back to the stored one.
func TestKeyReloadKeepsUnstoredTouch(t *testing.T) {
	ctx := context.Background()
	db := testkit.OpenDB(t)
	clock := testkit.NewFakeClock(time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC))
	feed := services.NewLocalFeed(nil)
	keys, err := services.NewKeys(ctx, touchLost{models.NewKeyStore(db)}, models.NewConnectionStore(db, testkit.Keyring(t)), clock, feed)
	if err != nil {
		t.Fatal(err)
	}
	var reported []string
	keys.OnStoreError(func(store string, _ error) { reported = append(reported, store) })
	_, secret, err := keys.Create(ctx, services.KeyInput{Name: services.Some("k")})
	if err != nil {
		t.Fatal(err)
	}
	k, err := keys.Authenticate(secret)
	if err != nil {
		t.Fatal(err)
	}
	keys.Touch(ctx, k)
	keys.WaitTouches()
	if err := feed.Resync(ctx, services.ChangeKey); err != nil {
		t.Fatal(err)
	}
	k, err = keys.Authenticate(secret)
	if err != nil || k.LastUsedAt == nil || !k.LastUsedAt.Equal(clock.Now()) {
		t.Fatalf("after the reload last used = %v (%v), want the touch at %v", k.LastUsedAt, err, clock.Now())
	}
	if !slices.Equal(reported, []string{"api_key_last_used"}) {
		t.Fatalf("reported %v", reported)
	}
}
