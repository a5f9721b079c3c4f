package leases_test

import (
	"testing"
	"time"

	"switchyard/internal/testkit"
	"switchyard/services/events"
	"switchyard/services/leases"
)

// A lease that ends is a Recent events entry (50-dashboard §6.8): released
// by its owner, ended by the admin (cause "admin", naming the admin),
// invalidated, or run out of time; so is one its owner moved to another
// connection. Acquiring and renewing record nothing.
func TestLeaseEndsAreEvents(t *testing.T) {
	eachStore(t, func(t *testing.T, clock *testkit.FakeClock, store leases.Store) {
		s := leases.New(store, clock)
		ring := events.NewRing(clock)
		s.Events = ring
		key := managedKey("k1", "c1", "c2")
		want := func(n int, last events.Event) {
			t.Helper()
			got := ring.Snapshot()
			if len(got) != n {
				t.Fatalf("%d events, want %d: %+v", len(got), n, got)
			}
			if n == 0 {
				return
			}
			last.At = got[0].At
			if got[0] != last {
				t.Fatalf("newest event %+v, want %+v", got[0], last)
			}
		}

		l := must(t)(s.Acquire(ctx, key, owner(1), "openai", []string{"c1"}, 0))
		must(t)(s.Renew(ctx, key, owner(1), 1, time.Minute))
		want(0, events.Event{})
		must(t)(s.Release(ctx, key, owner(1), 1, ""))
		want(1, events.Event{Type: events.LeaseEnded, Provider: "openai", ConnectionID: "c1", LeaseID: l.ID, Cause: leases.ReasonOwnerExit})
		must(t)(s.Release(ctx, key, owner(1), 1, "")) // already ended: no second event
		want(1, events.Event{Type: events.LeaseEnded, Provider: "openai", ConnectionID: "c1", LeaseID: l.ID, Cause: leases.ReasonOwnerExit})

		l = must(t)(s.Acquire(ctx, key, owner(2), "openai", []string{"c1"}, 0))
		if n, err := s.Invalidate(ctx, "c1", leases.ReasonAdminEnded); err != nil || n != 1 {
			t.Fatalf("Invalidate = %d, %v", n, err)
		}
		want(2, events.Event{Type: events.LeaseEnded, Provider: "openai", ConnectionID: "c1", LeaseID: l.ID, Cause: events.CauseAdmin})
		if n, err := s.Invalidate(ctx, "c1", leases.ReasonAdminEnded); err != nil || n != 0 {
			t.Fatalf("second Invalidate = %d, %v", n, err)
		}
		want(2, events.Event{Type: events.LeaseEnded, Provider: "openai", ConnectionID: "c1", LeaseID: l.ID, Cause: events.CauseAdmin})

		l = must(t)(s.Acquire(ctx, key, owner(3), "openai", []string{"c2"}, time.Second))
		clock.Advance(2 * time.Second)
		if n, err := s.Expire(ctx); err != nil || n != 1 {
			t.Fatalf("Expire = %d, %v", n, err)
		}
		want(3, events.Event{Type: events.LeaseEnded, Provider: "openai", ConnectionID: "c2", LeaseID: l.ID, Cause: leases.ReasonTTLExpired})
		if _, err := s.Expire(ctx); err != nil {
			t.Fatal(err)
		}
		want(3, events.Event{Type: events.LeaseEnded, Provider: "openai", ConnectionID: "c2", LeaseID: l.ID, Cause: leases.ReasonTTLExpired})

		// Moved by its owner to another connection: one event, on the new one.
		must(t)(s.Acquire(ctx, key, owner(4), "openai", []string{"c1"}, 0))
		l = must(t)(s.Transition(ctx, key, owner(4), 1, "openai", []string{"c2"}, leases.ReasonHealthOrCooldown))
		want(4, events.Event{Type: events.LeaseMoved, Provider: "openai", ConnectionID: "c2", LeaseID: l.ID, Cause: leases.ReasonHealthOrCooldown})

		// Ended by an admin's request: the event names the admin.
		if n, err := s.Invalidate(events.WithActor(ctx, "admin session 0123456789ab"), "c2", leases.ReasonAdminEnded); err != nil || n != 1 {
			t.Fatalf("Invalidate = %d, %v", n, err)
		}
		want(5, events.Event{Type: events.LeaseEnded, Provider: "openai", ConnectionID: "c2", LeaseID: l.ID, Cause: events.CauseAdmin,
			Actor: "admin session 0123456789ab"})
	})
}
