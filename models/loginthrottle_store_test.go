package models_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"switchyard/models"
	"switchyard/services"
)

// TestLoginThrottleStoreRacingReplicasCountOnce (issue 19 item 5): 30
// reservations for one address racing through two replicas' pools on one
// database are granted 5 times in all — the count one replica's in-memory
// throttle allows — and the other 25 wait 30 s. Two in-memory throttles
// (the per-replica counting this replaces) would grant 10.
func TestLoginThrottleStoreRacingReplicasCountOnce(t *testing.T) {
	for _, dialect := range []string{"sqlite", "postgres"} {
		t.Run(dialect, func(t *testing.T) {
			dbA, dbB := twoPools(t, dialect, time.Now)
			stores := []*models.LoginThrottleStore{models.NewLoginThrottleStore(dbA), models.NewLoginThrottleStore(dbB)}
			ctx := context.Background()
			var wg sync.WaitGroup
			var mu sync.Mutex
			granted, refused := 0, 0
			var grants []services.LoginReservation
			for i := range 30 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					r, err := stores[i%2].Reserve(ctx, services.LoginAttempt{IP: "203.0.113.9", At: pinT0})
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					defer mu.Unlock()
					if r.Wait > 0 {
						refused++
						if r.Wait != 30*time.Second {
							t.Errorf("wait %v, want 30s", r.Wait)
						}
					} else {
						granted++
						grants = append(grants, r)
					}
				}()
			}
			wg.Wait()
			if granted != 5 || refused != 25 {
				t.Fatalf("granted %d, refused %d across two replicas; want 5 and 25", granted, refused)
			}
			// Five equal rows (one address, one millisecond): withdrawing two
			// checks that never ran frees exactly two.
			for _, r := range grants[:2] {
				if err := stores[1].Settle(ctx, r, services.LoginNotChecked); err != nil {
					t.Fatal(err)
				}
			}
			for i, want := range []time.Duration{0, 0, 30 * time.Second} {
				r, err := stores[i%2].Reserve(ctx, services.LoginAttempt{IP: "203.0.113.9", At: pinT0})
				if err != nil || r.Wait != want {
					t.Fatalf("reservation %d after two withdrawals: wait %v, err %v; want %v", i, r.Wait, err, want)
				}
			}
		})
	}
}

// TestLoginThrottleStoreMatchesMemoryThrottle: a seeded sequence of sign-in
// checks (eight addresses, one of them loopback; wrong, right and unchecked
// passwords; time moving on by 1 s to 2 min) gives the same wait at every
// step from the store, alternating between two replicas' pools, as from the
// in-memory throttle — per-address backoff, the account-wide limit, a
// success clearing only its address, withdrawn checks, the window rolling.
func TestLoginThrottleStoreMatchesMemoryThrottle(t *testing.T) {
	for _, dialect := range []string{"sqlite", "postgres"} {
		t.Run(dialect, func(t *testing.T) {
			dbA, dbB := twoPools(t, dialect, time.Now)
			stores := []*models.LoginThrottleStore{models.NewLoginThrottleStore(dbA), models.NewLoginThrottleStore(dbB)}
			mem := services.NewMemoryLoginThrottle()
			ctx := context.Background()
			rng := rand.New(rand.NewPCG(19, 5))
			ips := []string{"127.0.0.1", "203.0.113.1", "203.0.113.2", "203.0.113.3", "198.51.100.4", "198.51.100.5", "2001:db8::6", "2001:db8::7"}
			now := pinT0.Truncate(time.Millisecond)
			var waits, successes int
			for step := range 400 {
				now = now.Add(time.Duration(1+rng.IntN(40)) * time.Second)
				if rng.IntN(10) == 0 {
					now = now.Add(time.Duration(rng.IntN(120)) * time.Second)
				}
				ip := ips[rng.IntN(len(ips))]
				a := services.LoginAttempt{IP: ip, Loopback: ip == "127.0.0.1", At: now}
				want, err := mem.Reserve(ctx, a)
				if err != nil {
					t.Fatal(err)
				}
				store := stores[step%2]
				got, err := store.Reserve(ctx, a)
				if err != nil {
					t.Fatalf("step %d: %v", step, err)
				}
				if got.Wait != want.Wait {
					t.Fatalf("step %d (%s at +%v): store wait %v, in-memory %v", step, ip, now.Sub(pinT0), got.Wait, want.Wait)
				}
				if want.Wait > 0 {
					waits++
					continue
				}
				o := services.LoginFailed
				switch rng.IntN(12) {
				case 0:
					o = services.LoginSucceeded
					successes++
				case 1:
					o = services.LoginNotChecked
				}
				if err := mem.Settle(ctx, want, o); err != nil {
					t.Fatal(err)
				}
				if err := stores[(step+1)%2].Settle(ctx, got, o); err != nil {
					t.Fatalf("step %d settle: %v", step, err)
				}
			}
			t.Logf("400 checks: %d refused, %d successes", waits, successes)
			if waits == 0 || successes == 0 {
				t.Fatalf("the sequence exercised too little: %d waits, %d successes", waits, successes)
			}
		})
	}
}

// TestLoginThrottleStoreAccountWide: 20 wrong passwords from 20 addresses
// through two replicas make every further non-loopback address wait 30 s
// (the account-wide limit counted for the fleet) while a loopback address
// is still checked; a right password then withdraws only its own check.
func TestLoginThrottleStoreAccountWide(t *testing.T) {
	for _, dialect := range []string{"sqlite", "postgres"} {
		t.Run(dialect, func(t *testing.T) {
			dbA, dbB := twoPools(t, dialect, time.Now)
			stores := []*models.LoginThrottleStore{models.NewLoginThrottleStore(dbA), models.NewLoginThrottleStore(dbB)}
			ctx := context.Background()
			at := pinT0
			for i := range 20 {
				r, err := stores[i%2].Reserve(ctx, services.LoginAttempt{IP: fmt.Sprintf("203.0.113.%d", i+1), At: at})
				if err != nil || r.Wait > 0 {
					t.Fatalf("check %d: %+v %v", i, r, err)
				}
			}
			at = at.Add(time.Second)
			r, err := stores[0].Reserve(ctx, services.LoginAttempt{IP: "198.51.100.77", At: at})
			if err != nil || r.Wait != 29*time.Second {
				t.Fatalf("a 21st address after 20 fleet-wide failures: wait %v, err %v; want 29s", r.Wait, err)
			}
			lo, err := stores[1].Reserve(ctx, services.LoginAttempt{IP: "127.0.0.1", Loopback: true, At: at})
			if err != nil || lo.Wait != 0 {
				t.Fatalf("loopback after 20 failures: wait %v, err %v; want a check", lo.Wait, err)
			}
			// The loopback check was right: its reservation stops counting, so the
			// account is back at 20 failures, not 21 (still waiting 29 s).
			if err := stores[0].Settle(ctx, lo, services.LoginSucceeded); err != nil {
				t.Fatal(err)
			}
			if r, _ := stores[1].Reserve(ctx, services.LoginAttempt{IP: "198.51.100.78", At: at}); r.Wait != 29*time.Second {
				t.Fatalf("after a success: wait %v, want 29s (20 failures, the latest 1 s ago)", r.Wait)
			}
		})
	}
}
