package models_test

import (
	"context"
	"log/slog"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"switchyard/internal/testkit"
	"switchyard/models"
	"switchyard/services"
)

// feedReplica is one replica's change feed on a shared schema, with a
// subscriber of ChangeKey that records what it was given.
type feedReplica struct {
	feed    *models.PGFeed
	mu      sync.Mutex
	got     []services.Change
	resyncs atomic.Int64
}

func (r *feedReplica) received(key string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range r.got {
		if c.Key == key {
			return true
		}
	}
	return false
}

// startFeedReplica opens dsn as replica name and runs its feed, the
// listener connecting through listenDSN, until cleanup.
func startFeedReplica(t *testing.T, name, dsn, listenDSN string) *feedReplica {
	t.Helper()
	db, err := models.OpenPostgres(context.Background(), dsn, time.Now, models.PostgresOptions{MaxOpenConns: 2})
	if err != nil {
		t.Fatalf("open postgres: %v", err)
	}
	t.Cleanup(func() { _ = models.Close(db) })
	r := &feedReplica{}
	r.feed = models.NewPGFeed(db, listenDSN, name, services.NewLocalFeed(nil), slog.New(slog.DiscardHandler))
	r.feed.IdleCheck = 200 * time.Millisecond
	r.feed.Subscribe(services.ChangeKey, func(_ context.Context, c services.Change) error {
		if c.Key == "" {
			r.resyncs.Add(1)
			return nil
		}
		r.mu.Lock()
		r.got = append(r.got, c)
		r.mu.Unlock()
		return nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { r.feed.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	if !testkit.PollUntil(10*time.Second, r.feed.Connected) {
		t.Fatalf("%s: listener never connected", name)
	}
	return r
}

// The change feed's listener survives the loss of its connection (scale-out
// §3.7): it reports the loss, reconnects with backoff when the database is
// back, resyncs every kind (a change published while it was away was lost
// with its NOTIFY, and the resync is what repairs that), and a change
// published after the reconnect reaches it.
func TestPGFeedListenerReconnectsAndResyncs(t *testing.T) {
	dsn := testkit.PostgresSchema(t)
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	proxy := testkit.StartTCPProxy(t, u.Host)
	a := startFeedReplica(t, "replica-a", dsn, dsn)
	b := startFeedReplica(t, "replica-b", dsn, proxy.URL(t, dsn))
	ctx := context.Background()

	if err := a.feed.Publish(ctx, services.Change{Kind: services.ChangeKey, Key: "k_before"}); err != nil {
		t.Fatal(err)
	}
	if !testkit.PollUntil(5*time.Second, func() bool { return b.received("k_before") }) {
		t.Fatal("a change published by A never reached B")
	}
	if a.received("k_before") != true {
		t.Fatal("A's own subscribers did not see its change")
	}
	resyncs := b.resyncs.Load()

	proxy.Cut()
	if !testkit.PollUntil(5*time.Second, func() bool { return !b.feed.Connected() }) {
		t.Fatal("B's listener did not notice that its connection was cut")
	}
	if err := a.feed.Publish(ctx, services.Change{Kind: services.ChangeKey, Key: "k_during"}); err != nil {
		t.Fatal(err)
	}
	proxy.Restore(t)
	if !testkit.PollUntil(10*time.Second, func() bool { return b.feed.Connected() && b.resyncs.Load() > resyncs }) {
		t.Fatalf("B did not reconnect and resync (connected %v, resyncs %d → %d)", b.feed.Connected(), resyncs, b.resyncs.Load())
	}
	if b.feed.Reconnects() < 1 || b.feed.LastResync().IsZero() {
		t.Errorf("reconnects %d, last resync %v", b.feed.Reconnects(), b.feed.LastResync())
	}
	if b.received("k_during") {
		t.Log("the change made during the cut was delivered as well (a NOTIFY queued before the cut)")
	}
	if err := a.feed.Publish(ctx, services.Change{Kind: services.ChangeKey, Key: "k_after"}); err != nil {
		t.Fatal(err)
	}
	if !testkit.PollUntil(5*time.Second, func() bool { return b.received("k_after") }) {
		t.Fatal("a change published after the reconnect never reached B")
	}
}

// A listener whose connection dies without a word (no FIN, no error: a
// vanished host) would wait for ever; the idle ping finds out and the
// listener reconnects. Here the proxy keeps the TCP connection open but
// stops forwarding, which is what a silent network failure looks like.
func TestPGFeedListenerPingsAnIdleConnection(t *testing.T) {
	dsn := testkit.PostgresSchema(t)
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	proxy := testkit.StartTCPProxy(t, u.Host)
	b := startFeedReplica(t, "replica-b", dsn, proxy.URL(t, dsn))
	proxy.Freeze()
	if !testkit.PollUntil(15*time.Second, func() bool { return !b.feed.Connected() }) {
		t.Fatal("a listener on a silent connection still reports itself connected")
	}
	proxy.Thaw()
	if !testkit.PollUntil(15*time.Second, func() bool { return b.feed.Connected() && b.feed.Reconnects() >= 1 }) {
		t.Fatal("the listener did not reconnect after the network came back")
	}
}
