package app_test

import (
	"context"
	"io"
	"net/http"
	"testing"

	"switchyard/internal/fakeupstream"
	"switchyard/internal/testkit"
	"switchyard/services"
	"switchyard/services/traffic"
)

// feedKinds are the kinds admin writes publish.
var feedKinds = []services.ChangeKind{services.ChangeConnection, services.ChangeCombo, services.ChangeKey,
	services.ChangeCatalogue, services.ChangeSettings}

// bridge forwards every change a publishes to b's feed, as a shared feed
// (LISTEN/NOTIFY) will between replicas.
func bridge(a, b *testkit.App) {
	for _, kind := range feedKinds {
		a.Server.Feed().Subscribe(kind, func(ctx context.Context, c services.Change) error {
			return b.Server.Feed().Publish(ctx, c)
		})
	}
}

// Two processes on one database: every cache of B (key index, catalogue,
// routing snapshot, settings) follows the changes A writes once they reach
// B's feed, and only then. This is the path a shared feed will use.
func TestFeedCarriesAdminWritesToAnotherProcess(t *testing.T) {
	ctx := context.Background()
	fu := fakeupstream.Start(t)
	a := testkit.NewApp(t, testkit.WithEnv("SWITCHYARD_PRIVATE_UPSTREAMS", fu.Addr()))
	b := testkit.NewApp(t, testkit.WithEnv("SWITCHYARD_PRIVATE_UPSTREAMS", fu.Addr()), testkit.WithEnv("SWITCHYARD_DATA_DIR", a.DataDir))

	_, early := a.NewKey("before the bridge")
	if _, err := b.Server.Keys().Authenticate(early); err == nil {
		t.Fatal("B knew a key no change told it about: the test would prove nothing")
	}
	bridge(a, b)

	// Keys: created, then revoked, through A.
	k, secret := a.NewKey("client")
	if _, err := b.Server.Keys().Authenticate(secret); err != nil {
		t.Fatalf("B refuses a key created through A: %v", err)
	}
	if _, err := b.Server.Keys().Authenticate(early); err != nil {
		t.Fatalf("a key change reloads the whole index, yet B refuses the earlier key: %v", err)
	}

	// Connections and the catalogue: a custom provider created through A is
	// routable through B.
	conn := a.AddConnection(services.ConnectionInput{Provider: services.Some("fake"), Name: services.Some("c"), APIKey: services.Some("fk-a"),
		BaseURL: services.Some(fu.URL() + "/v1"), Custom: services.Some(services.CustomSpec{WireFormat: "openai", AuthClass: "apikey"})})
	if _, ok := b.Server.Connections().Catalogue().Get("fake"); !ok {
		t.Fatal("B's catalogue lacks the custom provider created through A")
	}
	if _, ok := b.Server.Gateway().Registry().Snapshot().Connection(conn.ID); !ok {
		t.Fatal("B's routing snapshot lacks the connection created through A")
	}
	resp, body := postKey(t, b.Serve()+"/v1/chat/completions", secret, chatBody)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("request through B: %d %s", resp.StatusCode, body)
	}

	// Combos: created and deleted through A.
	cb, _, err := a.Server.Combos().Create(ctx, services.ComboInput{Name: "pair", Targets: []services.Target{{Provider: "fake", Model: "m1"}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := b.Server.Gateway().Registry().Snapshot().ComboByID(cb.ID); !ok {
		t.Fatal("B's snapshot lacks the combo created through A")
	}
	if err := a.Server.Combos().Delete(ctx, cb.ID, false); err != nil {
		t.Fatal(err)
	}
	if _, ok := b.Server.Gateway().Registry().Snapshot().ComboByID(cb.ID); ok {
		t.Fatal("B still routes a combo deleted through A")
	}

	// Settings: a PATCH through A is in effect on B at A's revision.
	_, rev, err := a.Server.Settings().PatchResilience(ctx, []byte(`{"sessionAffinity":{"ttlMs":123000}}`), "")
	if err != nil {
		t.Fatal(err)
	}
	if snap := b.Server.Settings().ResilienceSnapshot(); snap.Revision != rev || snap.Doc.SessionAffinity.TTLMs != 123000 {
		t.Fatalf("B's resilience settings at r%d (ttl %d), want r%d with A's PATCH", snap.Revision, snap.Doc.SessionAffinity.TTLMs, rev)
	}

	// Revocation through A is refused by B.
	if _, err := a.Server.Keys().Revoke(ctx, k.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Server.Keys().Authenticate(secret); err == nil {
		t.Fatal("B still accepts a key revoked through A")
	}
}

// A resync (what a shared feed does after it reconnected) makes every
// cache of a kind reread its store, whatever it missed.
func TestFeedResyncRereadsEverything(t *testing.T) {
	a := testkit.NewApp(t)
	b := testkit.NewApp(t, testkit.WithEnv("SWITCHYARD_DATA_DIR", a.DataDir))
	_, secret := a.NewKey("missed")
	if _, err := b.Server.Keys().Authenticate(secret); err == nil {
		t.Fatal("B knew the key already")
	}
	if err := b.Server.Feed().Resync(context.Background(), services.ChangeKey); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Server.Keys().Authenticate(secret); err != nil {
		t.Fatalf("after a resync B refuses the key: %v", err)
	}
}

// A settings change reaches the request queues: a live limiter that uses
// the global requestQueue settings takes the new ones at once, not only at
// its next admission.
func TestFeedReconfiguresRequestQueues(t *testing.T) {
	ctx := context.Background()
	a := testkit.NewApp(t)
	q := a.Server.Queues()
	ticket, err := q.Admit(ctx, "fake:c_1", q.Effective(services.RateLimitOverrides{}))
	if err != nil {
		t.Fatal(err)
	}
	ticket.Done()
	patchResilience(t, a, `{"requestQueue":{"requestsPerMinute":30}}`)
	var st traffic.QueueStats
	for _, s := range q.Stats() {
		if s.Key == "fake:c_1" {
			st = s
		}
	}
	if st.Config.RequestsPerMinute != 30 {
		t.Fatalf("live limiter runs at %d rpm after the PATCH, want 30", st.Config.RequestsPerMinute)
	}
}

// Learned rate limits survive a restart of the app (20-resilience §15):
// learned from an upstream's headers, stored at shutdown, restored at start.
func TestLearnedRateLimitsSurviveAppRestart(t *testing.T) {
	f := newGW(t, "fk-a")
	on := true
	if _, err := f.app.Server.Connections().Update(t.Context(), f.conns["fk-a"].ID,
		services.ConnectionInput{RateLimitProtection: services.Some(on)}); err != nil {
		t.Fatal(err)
	}
	f.fu.Script("fk-a", fakeupstream.Step{Headers: map[string]string{"x-ratelimit-limit-requests": "600",
		"x-ratelimit-remaining-requests": "550", "x-ratelimit-reset-requests": "30s"}})
	resp := f.post(t, chatBody)
	if _, err := io.Copy(io.Discard, resp.Body); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d (%v)", resp.StatusCode, err)
	}
	key := "fake:" + f.conns["fk-a"].ID
	if got := f.app.Server.Queues().Learned(); len(got) != 1 || got[0].Key != key {
		t.Fatalf("learned %+v, want %s", got, key)
	}
	if err := f.app.Server.Close(); err != nil {
		t.Fatal(err)
	}

	restarted := testkit.NewApp(t, testkit.WithEnv("SWITCHYARD_PRIVATE_UPSTREAMS", f.fu.Addr()),
		testkit.WithEnv("SWITCHYARD_DATA_DIR", f.app.DataDir))
	got := restarted.Server.Queues().Learned()
	if len(got) != 1 || got[0].Key != key || got[0].LimitRequests != 600 || got[0].Remaining != 550 || got[0].MinTimeMs != 90 {
		t.Fatalf("after restart learned %+v, want %s with limit 600, remaining 550, minTime 90 ms", got, key)
	}
}

// A key deleted on another replica takes its per-key limiter state with it
// here: the limiter follows the feed's key deletions.
func TestFeedDropsKeyLimiterStateOfADeletedKey(t *testing.T) {
	fu := fakeupstream.Start(t)
	a := testkit.NewApp(t, testkit.WithEnv("SWITCHYARD_PRIVATE_UPSTREAMS", fu.Addr()))
	a.AddConnection(services.ConnectionInput{Provider: services.Some("fake"), Name: services.Some("c"), APIKey: services.Some("fk-a"),
		BaseURL: services.Some(fu.URL() + "/v1"), Custom: services.Some(services.CustomSpec{WireFormat: "openai", AuthClass: "apikey"})})
	k, secret, err := a.Server.Keys().Create(context.Background(), services.KeyInput{Name: services.Some("limited"),
		Scopes: services.Some([]string{services.ScopeInference}), RequestsPerMinute: services.Some(5)})
	if err != nil {
		t.Fatal(err)
	}
	if resp, body := postKey(t, a.Serve()+"/v1/chat/completions", secret, chatBody); resp.StatusCode != http.StatusOK {
		t.Fatalf("request: %d %s", resp.StatusCode, body)
	}
	if n := a.Server.KeyLimits().Len(); n != 1 {
		t.Fatalf("%d keys with limiter state, want 1", n)
	}
	if err := a.Server.Feed().Publish(context.Background(), services.Change{Kind: services.ChangeKey, Key: k.ID, Payload: services.ChangeDeleted}); err != nil {
		t.Fatal(err)
	}
	if n := a.Server.KeyLimits().Len(); n != 0 {
		t.Fatalf("%d keys with limiter state after the key's deletion, want 0", n)
	}
}
