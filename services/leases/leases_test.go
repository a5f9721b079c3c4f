package leases_test

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"switchyard/internal/testkit"
	"switchyard/internal/testkit/leasestore"
	"switchyard/models"
	"switchyard/services"
	"switchyard/services/leases"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

var ctx = context.Background()

// owner returns a well-formed owner token derived from n.
func owner(n int) string {
	b := make([]byte, 32)
	for i := range b {
		b[i] = byte(n + i)
	}
	return "vlo_" + base64.RawURLEncoding.EncodeToString(b)
}

func managedKey(id string, conns ...string) services.APIKey {
	return services.APIKey{ID: id, Enabled: true,
		Scopes:             []string{services.ScopeInference, services.ScopeLeaseExclusive},
		AllowedConnections: conns}
}

// eachStore runs a scenario on the memory store and on SQLite.
func eachStore(t *testing.T, f func(t *testing.T, clock *testkit.FakeClock, store leases.Store)) {
	t.Run("memory", func(t *testing.T) {
		f(t, testkit.NewFakeClock(t0), leasestore.New())
	})
	t.Run("sqlite", func(t *testing.T) {
		clock := testkit.NewFakeClock(t0)
		db := testkit.OpenDBAt(t, filepath.Join(t.TempDir(), "switchyard.db"), clock.Now)
		f(t, clock, models.NewLeaseStore(db))
	})
}

// wantErr asserts a lease error's code and status.
func wantErr(t *testing.T, err error, code string, status int) *leases.Error {
	t.Helper()
	var le *leases.Error
	if !errors.As(err, &le) {
		t.Fatalf("error = %v, want %s", err, code)
	}
	if le.Code != code || le.Status != status {
		t.Fatalf("error = %s %d (%s), want %s %d", le.Code, le.Status, le.Message, code, status)
	}
	return le
}

// must fails the test on an error and returns the lease:
// must(t)(s.Acquire(…)).
func must(t *testing.T) func(leases.Lease, error) leases.Lease {
	return func(l leases.Lease, err error) leases.Lease {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
}

// L2: acquire (gen 1) → renew gen 1 OK → renew gen 2 → 409 stale → release
// gen 1 → release gen 1 again → 200 → acquire → gen 2.
func TestLeaseLifecycle(t *testing.T) {
	eachStore(t, func(t *testing.T, clock *testkit.FakeClock, store leases.Store) {
		s := leases.New(store, clock)
		key, o := managedKey("k1", "c1", "c2"), owner(1)

		l := must(t)(s.Acquire(ctx, key, o, "openai", []string{"c1", "c2"}, 0))
		if l.Generation != 1 || l.Reused || l.State != leases.StateActive || l.ConnectionID != "c1" ||
			l.TTL != leases.DefaultTTL || !l.ExpiresAt.Equal(t0.Add(leases.DefaultTTL)) ||
			!l.AcquiredAt.Equal(t0) || !l.RenewedAt.Equal(t0) || l.KeyID != "k1" || l.Provider != "openai" {
			t.Fatalf("acquired %+v", l)
		}
		if l.OwnerHash != leases.HashOwner(o) || len(l.OwnerHash) != 64 {
			t.Fatalf("owner hash %q", l.OwnerHash)
		}

		clock.Advance(30 * time.Second)
		r := must(t)(s.Renew(ctx, key, o, 1, 60*time.Second))
		if r.Generation != 1 || !r.RenewedAt.Equal(t0.Add(30*time.Second)) ||
			!r.ExpiresAt.Equal(t0.Add(90*time.Second)) || r.TTL != time.Minute || !r.AcquiredAt.Equal(t0) {
			t.Fatalf("renewed %+v", r)
		}
		_, err := s.Renew(ctx, key, o, 2, 0)
		wantErr(t, err, leases.CodeFenceStale, 409)

		st := must(t)(s.Status(ctx, key, o, 1))
		if st.ConnectionID != "c1" || !st.ExpiresAt.Equal(r.ExpiresAt) {
			t.Fatalf("status %+v", st)
		}

		rel := must(t)(s.Release(ctx, key, o, 1, ""))
		if rel.State != leases.StateReleased || rel.EndReason != leases.ReasonOwnerExit ||
			!rel.EndedAt.Equal(t0.Add(30*time.Second)) || rel.Generation != 1 {
			t.Fatalf("released %+v", rel)
		}
		if s.HeldByOthers("c1", "other") {
			t.Fatal("released connection still held")
		}
		clock.Advance(time.Second)
		again := must(t)(s.Release(ctx, key, o, 1, leases.ReasonClientCancelled))
		if again.State != leases.StateReleased || again.EndReason != leases.ReasonOwnerExit || !again.EndedAt.Equal(rel.EndedAt) {
			t.Fatalf("second release changed the row: %+v", again)
		}
		_, err = s.Status(ctx, key, o, 1)
		wantErr(t, err, leases.CodeFenceStale, 409)

		l2 := must(t)(s.Acquire(ctx, key, o, "openai", []string{"c1", "c2"}, 0))
		if l2.Generation != 2 || l2.Reused || l2.ID == l.ID {
			t.Fatalf("re-acquired %+v", l2)
		}
	})
}

// Acquire by an owner that already holds a lease on a candidate renews it
// under the same generation; a binding that is no longer a candidate is
// replaced under the next generation.
func TestLeaseAcquireReuseAndReplace(t *testing.T) {
	eachStore(t, func(t *testing.T, clock *testkit.FakeClock, store leases.Store) {
		s := leases.New(store, clock)
		key, o := managedKey("k1", "c1", "c2", "c3"), owner(1)
		l := must(t)(s.Acquire(ctx, key, o, "openai", []string{"c2", "c1"}, 10*time.Second))
		clock.Advance(5 * time.Second)
		r := must(t)(s.Acquire(ctx, key, o, "openai", []string{"c1", "c2"}, 10*time.Second))
		if !r.Reused || r.ID != l.ID || r.Generation != 1 || r.ConnectionID != "c2" ||
			!r.ExpiresAt.Equal(t0.Add(15*time.Second)) {
			t.Fatalf("reused %+v", r)
		}
		n := must(t)(s.Acquire(ctx, key, o, "anthropic", []string{"c3"}, 0))
		if n.Reused || n.Generation != 2 || n.ConnectionID != "c3" || n.Provider != "anthropic" {
			t.Fatalf("replacement %+v", n)
		}
		old := must(t)(s.Release(ctx, key, o, 1, ""))
		if old.State != leases.StateInvalidated || old.EndReason != leases.ReasonModelIneligible {
			t.Fatalf("replaced row %+v", old)
		}
		if s.HeldByOthers("c2", "k9") || !s.HeldByOthers("c3", "k9") {
			t.Fatal("mirror does not follow the replacement")
		}
	})
}

func TestLeaseOwnerConflictAndForeignKey(t *testing.T) {
	eachStore(t, func(t *testing.T, clock *testkit.FakeClock, store leases.Store) {
		s := leases.New(store, clock)
		k1, k2, o := managedKey("k1", "c1", "c2"), managedKey("k2", "c1", "c2"), owner(1)
		must(t)(s.Acquire(ctx, k1, o, "openai", []string{"c1"}, 0))

		_, err := s.Acquire(ctx, k2, o, "openai", []string{"c2"}, 0)
		wantErr(t, err, leases.CodeOwnerConflict, 409)
		// Another key's lease is stale for every fenced operation.
		_, err = s.Renew(ctx, k2, o, 1, 0)
		wantErr(t, err, leases.CodeFenceStale, 409)
		_, err = s.Status(ctx, k2, o, 1)
		wantErr(t, err, leases.CodeFenceStale, 409)
		_, err = s.Release(ctx, k2, o, 1, "")
		wantErr(t, err, leases.CodeFenceStale, 409)
		_, err = s.Check(ctx, k2, o, 1)
		wantErr(t, err, leases.CodeFenceStale, 409)
		// The lease is untouched.
		must(t)(s.Check(ctx, k1, o, 1))
	})
}

func TestLeaseCheck(t *testing.T) {
	eachStore(t, func(t *testing.T, clock *testkit.FakeClock, store leases.Store) {
		s := leases.New(store, clock)
		key, o := managedKey("k1", "c1"), owner(1)
		_, err := s.Check(ctx, key, o, 1)
		wantErr(t, err, leases.CodeRequired, 409)
		must(t)(s.Acquire(ctx, key, o, "openai", []string{"c1"}, 0))

		l := must(t)(s.Check(ctx, key, o, 1))
		if l.ConnectionID != "c1" || l.Generation != 1 {
			t.Fatalf("checked %+v", l)
		}
		_, err = s.Check(ctx, key, o, 2)
		wantErr(t, err, leases.CodeFenceStale, 409)
		_, err = s.Check(ctx, key, "", 1)
		wantErr(t, err, leases.CodeContextRequired, 400)
		_, err = s.Check(ctx, key, o, 0)
		wantErr(t, err, leases.CodeContextRequired, 400)
		_, err = s.Check(ctx, key, "vlo_short", 1)
		wantErr(t, err, leases.CodeContextInvalid, 400)
		_, err = s.Check(ctx, key, o, leases.MaxGeneration+1)
		wantErr(t, err, leases.CodeContextInvalid, 400)
		_, err = s.Check(ctx, key, owner(2), 1)
		wantErr(t, err, leases.CodeRequired, 409)
	})
}

func TestLeaseKeyConfiguration(t *testing.T) {
	s := leases.New(leasestore.New(), testkit.NewFakeClock(t0))
	o := owner(1)
	plain := services.APIKey{ID: "k1", Scopes: []string{services.ScopeInference}, AllowedConnections: []string{"c1"}}
	_, err := s.Acquire(ctx, plain, o, "openai", []string{"c1"}, 0)
	wantErr(t, err, leases.CodeScopeRequired, 403)
	_, err = s.Check(ctx, plain, o, 1)
	wantErr(t, err, leases.CodeScopeRequired, 403)

	for _, conns := range [][]string{nil, {}} {
		bad := managedKey("k2", conns...)
		bad.AllowedConnections = conns
		_, err = s.Acquire(ctx, bad, o, "openai", []string{"c1"}, 0)
		wantErr(t, err, leases.CodeKeyConfigurationInvalid, 403)
		_, err = s.Renew(ctx, bad, o, 1, 0)
		wantErr(t, err, leases.CodeKeyConfigurationInvalid, 403)
	}

	key := managedKey("k3", "c1")
	if _, err := s.Acquire(ctx, key, o, "openai", []string{"c2", "c3"}, 0); !errors.Is(err, leases.ErrNoEligible) {
		t.Fatalf("candidates outside the allowlist: %v, want ErrNoEligible", err)
	}
	if _, err := s.Acquire(ctx, key, o, "openai", nil, 0); !errors.Is(err, leases.ErrNoEligible) {
		t.Fatalf("no candidates: %v, want ErrNoEligible", err)
	}
	_, err = s.Acquire(ctx, key, "not-a-token", "openai", []string{"c1"}, 0)
	wantErr(t, err, leases.CodeContextInvalid, 400)
	_, err = s.Acquire(ctx, key, "", "openai", []string{"c1"}, 0)
	wantErr(t, err, leases.CodeContextRequired, 400)
	_, err = s.Renew(ctx, key, o, 0, 0)
	wantErr(t, err, leases.CodeActionInvalid, 400)
	_, err = s.Release(ctx, key, o, 1, "ttl_expired")
	wantErr(t, err, leases.CodeActionInvalid, 400)
}

// L3: both allowed connections held by others until t+57 s and t+300 s →
// 429 waiting_for_capacity, Retry-After 57; a single foreign lease until
// t+900 s → 120.
func TestLeaseCapacity(t *testing.T) {
	eachStore(t, func(t *testing.T, clock *testkit.FakeClock, store leases.Store) {
		s := leases.New(store, clock)
		other := managedKey("k2", "c1", "c2", "c3")
		must(t)(s.Acquire(ctx, other, owner(2), "openai", []string{"c1"}, 57*time.Second))
		must(t)(s.Acquire(ctx, other, owner(3), "openai", []string{"c2"}, 300*time.Second))
		must(t)(s.Acquire(ctx, other, owner(4), "openai", []string{"c3"}, 900*time.Second))

		key := managedKey("k1", "c1", "c2", "c3")
		_, err := s.Acquire(ctx, key, owner(1), "openai", []string{"c2", "c1"}, 0)
		le := wantErr(t, err, leases.CodeCapacityUnavailable, 429)
		if le.RetryAfter != 57*time.Second || le.BodyStatus() != leases.WaitingForCapacity {
			t.Fatalf("RetryAfter %v, status %q; want 57 s, waiting_for_capacity", le.RetryAfter, le.BodyStatus())
		}
		ge := le.GatewayError()
		if ge.Status != 429 || ge.Code != leases.CodeCapacityUnavailable || ge.RetryAfter != 57 {
			t.Fatalf("gateway error %+v", ge)
		}

		_, err = s.Acquire(ctx, key, owner(1), "openai", []string{"c3"}, 0)
		if le := wantErr(t, err, leases.CodeCapacityUnavailable, 429); le.RetryAfter != 120*time.Second {
			t.Fatalf("RetryAfter %v, want 120 s", le.RetryAfter)
		}

		// Sub-second remainders round up; the bound below is 1 s.
		clock.Advance(56*time.Second + 500*time.Millisecond)
		_, err = s.Acquire(ctx, key, owner(1), "openai", []string{"c1"}, 0)
		if le := wantErr(t, err, leases.CodeCapacityUnavailable, 429); le.RetryAfter != time.Second {
			t.Fatalf("RetryAfter %v, want 1 s", le.RetryAfter)
		}
		// At the earliest expiry the connection is free again.
		clock.Advance(500 * time.Millisecond)
		l := must(t)(s.Acquire(ctx, key, owner(1), "openai", []string{"c2", "c1"}, 0))
		if l.ConnectionID != "c1" {
			t.Fatalf("acquired %s, want c1", l.ConnectionID)
		}
	})
}

// A lease is over at its expiry: fence checks fail, routing sees the
// connection free, and the row is ended as expired/ttl_expired.
func TestLeaseExpiresAtTTL(t *testing.T) {
	eachStore(t, func(t *testing.T, clock *testkit.FakeClock, store leases.Store) {
		s := leases.New(store, clock)
		key, o := managedKey("k1", "c1"), owner(1)
		if l := must(t)(s.Acquire(ctx, key, o, "openai", []string{"c1"}, 500*time.Millisecond)); l.TTL != leases.MinTTL {
			t.Fatalf("TTL %v, want clamped to 1 s", l.TTL)
		}
		must(t)(s.Renew(ctx, key, o, 1, 10*time.Second))
		clock.Advance(10*time.Second - time.Millisecond)
		must(t)(s.Check(ctx, key, o, 1))
		if !s.HeldByOthers("c1", "k2") {
			t.Fatal("live lease not seen by routing")
		}
		clock.Advance(time.Millisecond)
		_, err := s.Check(ctx, key, o, 1)
		wantErr(t, err, leases.CodeRequired, 409)
		if s.HeldByOthers("c1", "k2") || len(s.Active()) != 0 {
			t.Fatal("expired lease still held")
		}
		_, err = s.Renew(ctx, key, o, 1, 0)
		wantErr(t, err, leases.CodeFenceStale, 409)
		// The refused renew rolled back with its transaction; the sweep
		// expires the row for good.
		if n, err := s.Expire(ctx); err != nil || n != 1 {
			t.Fatalf("Expire = (%d, %v), want 1", n, err)
		}
		ended := must(t)(s.Release(ctx, key, o, 1, ""))
		if ended.State != leases.StateExpired || ended.EndReason != leases.ReasonTTLExpired ||
			!ended.EndedAt.Equal(t0.Add(10*time.Second)) {
			t.Fatalf("expired row %+v", ended)
		}
	})
}

func TestLeaseInvalidationReasons(t *testing.T) {
	eachStore(t, func(t *testing.T, clock *testkit.FakeClock, store leases.Store) {
		s := leases.New(store, clock)
		key := managedKey("k1", "c1", "c2", "c3")

		// Connection can never serve again.
		must(t)(s.Acquire(ctx, key, owner(1), "openai", []string{"c1"}, 0))
		if n, err := s.Invalidate(ctx, "c1", leases.ReasonConnectionIneligible); err != nil || n != 1 {
			t.Fatalf("Invalidate = (%d, %v)", n, err)
		}
		if n, err := s.Invalidate(ctx, "c1", leases.ReasonConnectionIneligible); err != nil || n != 0 {
			t.Fatalf("second Invalidate = (%d, %v), want 0", n, err)
		}
		_, err := s.Check(ctx, key, owner(1), 1)
		wantErr(t, err, leases.CodeRequired, 409)
		if l := must(t)(s.Release(ctx, key, owner(1), 1, "")); l.State != leases.StateInvalidated ||
			l.EndReason != leases.ReasonConnectionIneligible || !l.EndedAt.Equal(t0) {
			t.Fatalf("invalidated row %+v", l)
		}

		// Key revoked: every lease of the key ends.
		must(t)(s.Acquire(ctx, key, owner(2), "openai", []string{"c1"}, 0))
		must(t)(s.Acquire(ctx, key, owner(3), "openai", []string{"c1", "c2"}, 0))
		must(t)(s.Acquire(ctx, managedKey("k2", "c3"), owner(4), "openai", []string{"c3"}, 0))
		if n, err := s.InvalidateKey(ctx, "k1", leases.ReasonManagedKeyRevoked); err != nil || n != 2 {
			t.Fatalf("InvalidateKey = (%d, %v), want 2", n, err)
		}
		if l := must(t)(s.Release(ctx, key, owner(3), 1, "")); l.EndReason != leases.ReasonManagedKeyRevoked {
			t.Fatalf("revoked row %+v", l)
		}
		if s.HeldByOthers("c1", "x") || s.HeldByOthers("c2", "x") || !s.HeldByOthers("c3", "x") {
			t.Fatal("mirror does not follow InvalidateKey")
		}

		// Connection removed from the key's allowlist: the fence check ends it.
		must(t)(s.Acquire(ctx, key, owner(5), "openai", []string{"c2"}, 0))
		narrowed := managedKey("k1", "c1")
		_, err = s.Check(ctx, narrowed, owner(5), 1)
		wantErr(t, err, leases.CodeRequired, 409)
		if l := must(t)(s.Release(ctx, key, owner(5), 1, "")); l.EndReason != leases.ReasonAuthorizationChanged {
			t.Fatalf("unauthorised row %+v", l)
		}

		if _, err := s.Invalidate(ctx, "c3", leases.ReasonOwnerExit); err == nil {
			t.Fatal("owner_exit accepted as an invalidation reason")
		}
		if n, err := s.Invalidate(ctx, "c3", leases.ReasonAdminEnded); err != nil || n != 1 {
			t.Fatalf("admin end = (%d, %v)", n, err)
		}
	})
}

// L5: binding cooling, free eligible C → moved to C under the same
// generation, old row invalidated as health_or_cooldown; none free → 429 and
// the lease stays.
func TestLeaseTransition(t *testing.T) {
	eachStore(t, func(t *testing.T, clock *testkit.FakeClock, store leases.Store) {
		s := leases.New(store, clock)
		key, o := managedKey("k1", "a", "b", "c"), owner(1)
		must(t)(s.Acquire(ctx, key, o, "openai", []string{"a"}, 0))
		must(t)(s.Acquire(ctx, managedKey("k2", "b"), owner(2), "openai", []string{"b"}, 30*time.Second))
		clock.Advance(10 * time.Second)

		_, err := s.Transition(ctx, key, o, 1, "openai", []string{"b"}, leases.ReasonHealthOrCooldown)
		if le := wantErr(t, err, leases.CodeCapacityUnavailable, 429); le.RetryAfter != 20*time.Second {
			t.Fatalf("RetryAfter %v", le.RetryAfter)
		}
		must(t)(s.Check(ctx, key, o, 1)) // still bound to a
		if _, err := s.Transition(ctx, key, o, 1, "openai", nil, leases.ReasonHealthOrCooldown); !errors.Is(err, leases.ErrNoEligible) {
			t.Fatalf("no candidates: %v", err)
		}
		_, err = s.Transition(ctx, key, o, 2, "openai", []string{"c"}, leases.ReasonHealthOrCooldown)
		wantErr(t, err, leases.CodeFenceStale, 409)

		moved := must(t)(s.Transition(ctx, key, o, 1, "openai", []string{"b", "c"}, leases.ReasonHealthOrCooldown))
		if moved.ConnectionID != "c" || moved.Generation != 1 || !moved.ExpiresAt.Equal(t0.Add(leases.DefaultTTL)) {
			t.Fatalf("moved %+v", moved)
		}
		if l := must(t)(s.Check(ctx, key, o, 1)); l.ConnectionID != "c" {
			t.Fatalf("binding %s, want c", l.ConnectionID)
		}
		if s.HeldByOthers("a", "k9") || !s.HeldByOthers("c", "k9") {
			t.Fatal("mirror does not follow the transition")
		}
		// Releasing generation 1 ends the active row; the old one stays invalidated.
		if l := must(t)(s.Release(ctx, key, o, 1, "")); l.ID != moved.ID || l.State != leases.StateReleased {
			t.Fatalf("released %+v", l)
		}
		if l := must(t)(s.Release(ctx, key, o, 1, "")); l.ID != moved.ID {
			t.Fatalf("second release found %+v", l)
		}
	})
}

// L4 at the lease layer: routing skips connections leased by another key.
func TestLeaseHeldByOthers(t *testing.T) {
	s := leases.New(leasestore.New(), testkit.NewFakeClock(t0))
	must(t)(s.Acquire(ctx, managedKey("k1", "a", "b"), owner(1), "openai", []string{"a"}, 0))
	if !s.HeldByOthers("a", "k2") || !s.HeldByOthers("a", "") {
		t.Fatal("leased connection not held for others")
	}
	if s.HeldByOthers("a", "k1") || s.HeldByOthers("b", "k2") {
		t.Fatal("held for its own key, or a free connection held")
	}
	if got := s.Active(); len(got) != 1 || got[0].ConnectionID != "a" {
		t.Fatalf("Active = %+v", got)
	}
}

func TestParseOwnerAndGeneration(t *testing.T) {
	good := owner(7)
	for _, tc := range []struct {
		in   string
		code string
	}{
		{good, ""},
		{"vlo_" + strings.Repeat("A", 43), ""},
		{"vlo_" + strings.Repeat("_-", 21) + "z", ""},
		{"", leases.CodeContextRequired},
		{"vlo_" + strings.Repeat("A", 42), leases.CodeContextInvalid},
		{"vlo_" + strings.Repeat("A", 44), leases.CodeContextInvalid},
		{"VLO_" + strings.Repeat("A", 43), leases.CodeContextInvalid},
		{"vlo_" + strings.Repeat("A", 42) + "=", leases.CodeContextInvalid},
		{" " + good, leases.CodeContextInvalid},
	} {
		got, err := leases.ParseOwner(tc.in)
		if tc.code == "" {
			if err != nil || got != tc.in {
				t.Errorf("ParseOwner(%q) = (%q, %v)", tc.in, got, err)
			}
			continue
		}
		wantErr(t, err, tc.code, 400)
	}
	maxGen := strconv.FormatInt(leases.MaxGeneration, 10)
	for _, tc := range []struct {
		in   string
		want int64
		code string
	}{
		{"1", 1, ""},
		{"42", 42, ""},
		{maxGen, leases.MaxGeneration, ""},
		{"", 0, leases.CodeContextRequired},
		{"01", 0, leases.CodeContextInvalid}, // L7
		{"0", 0, leases.CodeContextInvalid},
		{"-1", 0, leases.CodeContextInvalid},
		{"+1", 0, leases.CodeContextInvalid},
		{"1.0", 0, leases.CodeContextInvalid},
		{" 1", 0, leases.CodeContextInvalid},
		{"9007199254740992", 0, leases.CodeContextInvalid},     // 2^53
		{"99999999999999999999", 0, leases.CodeContextInvalid}, // overflows int64
	} {
		got, err := leases.ParseGeneration(tc.in)
		if tc.code == "" {
			if err != nil || got != tc.want {
				t.Errorf("ParseGeneration(%q) = (%d, %v)", tc.in, got, err)
			}
			continue
		}
		wantErr(t, err, tc.code, 400)
	}
	if h := leases.HashOwner(good); h != services.SHA256Hex(good) {
		t.Fatalf("HashOwner = %s", h)
	}
}

func TestClampTTL(t *testing.T) {
	for in, want := range map[time.Duration]time.Duration{
		0:                      120 * time.Second,
		-time.Second:           time.Second,
		999 * time.Millisecond: time.Second,
		time.Second:            time.Second,
		45 * time.Second:       45 * time.Second,
		30 * time.Minute:       30 * time.Minute,
		31 * time.Minute:       30 * time.Minute,
	} {
		if got := leases.ClampTTL(in); got != want {
			t.Errorf("ClampTTL(%v) = %v, want %v", in, got, want)
		}
	}
}

// Leases survive a restart: a new process loads the mirror from SQLite.
func TestLeaseRestoreAfterRestart(t *testing.T) {
	clock := testkit.NewFakeClock(t0)
	path := filepath.Join(t.TempDir(), "switchyard.db")
	key, o := managedKey("k1", "c1", "c2"), owner(1)

	db1 := testkit.OpenDBAt(t, path, clock.Now)
	s1 := leases.New(models.NewLeaseStore(db1), clock)
	must(t)(s1.Acquire(ctx, key, o, "openai", []string{"c2"}, 10*time.Minute))
	must(t)(s1.Acquire(ctx, managedKey("k2", "c1"), owner(2), "openai", []string{"c1"}, time.Minute))
	if err := models.Close(db1); err != nil {
		t.Fatal(err)
	}

	clock.Advance(2 * time.Minute) // owner 2's lease ended during the downtime
	db2 := testkit.OpenDBAt(t, path, clock.Now)
	s2 := leases.New(models.NewLeaseStore(db2), clock)
	if s2.HeldByOthers("c2", "k9") {
		t.Fatal("mirror filled before Load")
	}
	if err := s2.Load(ctx); err != nil {
		t.Fatal(err)
	}
	if !s2.HeldByOthers("c2", "k9") || s2.HeldByOthers("c1", "k9") {
		t.Fatal("restored mirror wrong")
	}
	if l := must(t)(s2.Check(ctx, key, o, 1)); l.ConnectionID != "c2" {
		t.Fatalf("restored binding %+v", l)
	}
	l := must(t)(s2.Acquire(ctx, managedKey("k2", "c1"), owner(2), "openai", []string{"c1"}, 0))
	if l.Generation != 2 {
		t.Fatalf("generation after restart %d, want 2", l.Generation)
	}
}

// Concurrent acquires of one connection by 16 owners through two database
// handles (as two processes would) → exactly one wins, the rest get 429.
func TestLeaseConcurrentAcquireOneWinner(t *testing.T) {
	clock := testkit.NewFakeClock(t0)
	path := filepath.Join(t.TempDir(), "switchyard.db")
	stores := []leases.Store{
		models.NewLeaseStore(testkit.OpenDBAt(t, path, clock.Now)),
		models.NewLeaseStore(testkit.OpenDBAt(t, path, clock.Now)),
	}
	key := managedKey("k1", "c1")
	var wg sync.WaitGroup
	var mu sync.Mutex
	wins, full := 0, 0
	var other []error
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := leases.New(stores[i%2], clock)
			_, err := s.Acquire(ctx, key, owner(i), "openai", []string{"c1"}, 0)
			var le *leases.Error
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				wins++
			case errors.As(err, &le) && le.Code == leases.CodeCapacityUnavailable:
				full++
			default:
				other = append(other, err)
			}
		}()
	}
	wg.Wait()
	if wins != 1 || full != 15 || len(other) != 0 {
		t.Fatalf("wins %d, capacity %d, other %v; want 1, 15, none", wins, full, other)
	}
	active, err := stores[0].ListActive(ctx, clock.Now())
	if err != nil || len(active) != 1 {
		t.Fatalf("%d active rows (%v), want 1", len(active), err)
	}
}

// L6, scaled down: 16 owners acquire and release over 3 connections
// concurrently; a connection is never held by two owners at once.
func TestLeaseChurnNeverTwoActive(t *testing.T) {
	clock := testkit.NewFakeClock(t0)
	db := testkit.OpenDBAt(t, filepath.Join(t.TempDir(), "switchyard.db"), clock.Now)
	s := leases.New(models.NewLeaseStore(db), clock)
	key := managedKey("k1", "c1", "c2", "c3")
	conns := []string{"c1", "c2", "c3"}
	rounds := 25
	if testing.Short() {
		rounds = 10
	}

	var mu sync.Mutex
	holder := map[string]int{}
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for o := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range rounds {
				l, err := s.Acquire(ctx, key, owner(o), "openai", conns, 0)
				var le *leases.Error
				if errors.As(err, &le) && le.Code == leases.CodeCapacityUnavailable {
					continue
				}
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				if h, taken := holder[l.ConnectionID]; taken {
					mu.Unlock()
					errs <- fmt.Errorf("%s held by owners %d and %d", l.ConnectionID, h, o)
					return
				}
				holder[l.ConnectionID] = o
				mu.Unlock()

				mu.Lock()
				delete(holder, l.ConnectionID)
				mu.Unlock()
				if _, err := s.Release(ctx, key, owner(o), l.Generation, ""); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if active := s.Active(); len(active) != 0 {
		t.Fatalf("%d leases left active", len(active))
	}
}

// The View follows every change of the mirror: each write that changes the
// active leases (grant, renew, transition, release, invalidation, expiry
// sweep, load) publishes a new View with a higher Version and the leases
// Active reports; reads and refused writes publish nothing. Readers load
// it concurrently with the writes (run with -race).
func TestLeaseViewFollowsEveryChange(t *testing.T) {
	eachStore(t, func(t *testing.T, clock *testkit.FakeClock, store leases.Store) {
		s := leases.New(store, clock)
		ka, kb := managedKey("ka", "c1", "c2", "c3"), managedKey("kb", "c1", "c2", "c3")
		done := make(chan struct{})
		var readers sync.WaitGroup
		readers.Add(1)
		go func() {
			defer readers.Done()
			for {
				select {
				case <-done:
					return
				default:
				}
				for id, h := range s.View().ByConn {
					_ = h.Live(s.Now()) && s.HeldByOthers(id, h.KeyID)
				}
			}
		}()
		defer func() { close(done); readers.Wait() }()

		prev := s.View()
		if prev == nil || prev.Version == 0 || len(prev.ByConn) != 0 {
			t.Fatalf("initial view %+v", prev)
		}
		check := func(what string, changed bool) {
			t.Helper()
			v := s.View()
			if changed != (v != prev) || changed && v.Version <= prev.Version || !changed && v.Version != prev.Version ||
				s.Version() != v.Version {
				t.Fatalf("%s: view %p v%d → %p v%d, want changed=%v", what, prev, prev.Version, v, v.Version, changed)
			}
			prev = v
			now := s.Now()
			live := 0
			for id, h := range v.ByConn {
				if h.Live(now) {
					live++
				} else if s.HeldByOthers(id, "k-none") {
					t.Fatalf("%s: %s held past its expiry", what, id)
				}
			}
			active := s.Active()
			if live != len(active) {
				t.Fatalf("%s: %d live in the view, Active %+v", what, live, active)
			}
			for _, l := range active {
				h, ok := v.ByConn[l.ConnectionID]
				if !ok || h.KeyID != l.KeyID || !h.ExpiresAt.Equal(l.ExpiresAt) || !h.Live(now) {
					t.Fatalf("%s: view has %s as %+v (%v), Active %+v", what, l.ConnectionID, h, ok, l)
				}
			}
		}

		a := must(t)(s.Acquire(ctx, ka, owner(1), "openai", []string{"c1"}, time.Minute))
		check("grant", true)
		must(t)(s.Status(ctx, ka, owner(1), a.Generation))
		must(t)(s.Check(ctx, ka, owner(1), a.Generation))
		check("status and check", false)
		must(t)(s.Acquire(ctx, kb, owner(2), "openai", []string{"c1", "c2"}, time.Minute))
		check("second grant", true)
		_, err := s.Acquire(ctx, kb, owner(3), "openai", []string{"c1", "c2"}, 0)
		wantErr(t, err, leases.CodeCapacityUnavailable, 429)
		_, err = s.Renew(ctx, ka, owner(1), a.Generation+1, 0)
		wantErr(t, err, leases.CodeFenceStale, 409)
		check("refused acquire and renew", false)
		must(t)(s.Renew(ctx, ka, owner(1), a.Generation, 10*time.Minute))
		check("renew", true)
		if l := must(t)(s.Transition(ctx, ka, owner(1), a.Generation, "openai", []string{"c3"}, leases.ReasonHealthOrCooldown)); l.ConnectionID != "c3" {
			t.Fatalf("transition to %s", l.ConnectionID)
		}
		check("transition", true)
		if _, ok := prev.ByConn["c1"]; ok {
			t.Fatal("transitioned lease still on c1")
		}
		must(t)(s.Release(ctx, kb, owner(2), 1, ""))
		check("release", true)
		must(t)(s.Release(ctx, kb, owner(2), 1, ""))
		check("release again", false)
		if n, err := s.Invalidate(ctx, "c3", leases.ReasonAdminEnded); err != nil || n != 1 {
			t.Fatalf("Invalidate = (%d, %v)", n, err)
		}
		check("invalidate", true)

		must(t)(s.Acquire(ctx, ka, owner(1), "openai", []string{"c1"}, 5*time.Second))
		check("grant for expiry", true)
		clock.Advance(5 * time.Second)
		check("expired, not swept", false) // the row stays, no longer live
		if n, err := s.Expire(ctx); err != nil || n != 1 {
			t.Fatalf("Expire = (%d, %v), want 1", n, err)
		}
		check("expiry sweep", true)
		if len(prev.ByConn) != 0 {
			t.Fatalf("swept view %+v", prev.ByConn)
		}

		must(t)(s.Acquire(ctx, kb, owner(2), "openai", []string{"c2"}, time.Minute))
		check("grant before key invalidation", true)
		if n, err := s.InvalidateKey(ctx, "kb", leases.ReasonManagedKeyRevoked); err != nil || n != 1 {
			t.Fatalf("InvalidateKey = (%d, %v)", n, err)
		}
		check("invalidate key", true)

		// Another writer on the same store: seen at the next Load.
		other := leases.New(store, clock)
		must(t)(other.Acquire(ctx, ka, owner(4), "openai", []string{"c1"}, time.Minute))
		check("foreign write", false)
		if err := s.Load(ctx); err != nil {
			t.Fatal(err)
		}
		check("load", true)
		if err := s.Load(ctx); err != nil {
			t.Fatal(err)
		}
		check("load again", false)
	})
}
