package services_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"switchyard/services"
)

// TestLoginThrottleReserveIsAtomic (issue 17 item 5, the rule): however
// many reservations race for one address, at most 5 are granted per
// window; a success clears the address and frees the account-wide count;
// a check that never ran is withdrawn.
func TestLoginThrottleReserveIsAtomic(t *testing.T) {
	th := services.NewMemoryLoginThrottle()
	ctx := context.Background()
	t0 := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	var wg sync.WaitGroup
	var mu sync.Mutex
	granted, refused := 0, 0
	for range 30 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := th.Reserve(ctx, services.LoginAttempt{IP: "203.0.113.9", At: t0})
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if r.Wait > 0 {
				refused++
				if r.Wait != 30*time.Second {
					t.Errorf("wait %v", r.Wait)
				}
			} else {
				granted++
			}
		}()
	}
	wg.Wait()
	if granted != 5 || refused != 25 {
		t.Fatalf("granted %d, refused %d; want 5 and 25", granted, refused)
	}
	// Withdrawn checks do not count.
	r, _ := th.Reserve(ctx, services.LoginAttempt{IP: "198.51.100.1", At: t0})
	for range 10 {
		_ = th.Settle(ctx, r, services.LoginNotChecked)
		if r, _ = th.Reserve(ctx, services.LoginAttempt{IP: "198.51.100.1", At: t0}); r.Wait > 0 {
			t.Fatal("withdrawn checks counted")
		}
	}
	// A success clears the address at once.
	_ = th.Settle(ctx, r, services.LoginSucceeded)
	for i := range 5 {
		if r, _ := th.Reserve(ctx, services.LoginAttempt{IP: "198.51.100.1", At: t0}); r.Wait > 0 {
			t.Fatalf("reservation %d after a success refused", i)
		}
	}
}

// TestLoginParallelWrongPasswordsCheckedFiveTimes (issue 17 item 5, Auth):
// 30 parallel wrong passwords from one address run exactly 5 argon2id
// verifications; the other 25 answer 429 without hashing. Before, all 30
// were checked.
func TestLoginParallelWrongPasswordsCheckedFiveTimes(t *testing.T) {
	a, _ := newAuth(t)
	before := a.Verifications()
	var wg sync.WaitGroup
	var mu sync.Mutex
	wrong, throttled := 0, 0
	for range 30 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := a.Login(context.Background(), "203.0.113.9", false, "ua", "wrong password")
			var terr *services.ThrottledError
			mu.Lock()
			defer mu.Unlock()
			switch {
			case errors.As(err, &terr):
				throttled++
			case errors.Is(err, services.ErrUnauthorized):
				wrong++
			default:
				t.Errorf("unexpected %v", err)
			}
		}()
	}
	wg.Wait()
	checks := a.Verifications() - before
	t.Logf("30 parallel wrong passwords: %d checked, %d throttled, %d argon2id verifications", wrong, throttled, checks)
	if wrong != 5 || throttled != 25 || checks != 5 {
		t.Fatalf("checked %d, throttled %d, verifications %d; want 5, 25, 5", wrong, throttled, checks)
	}
	// The password change form is throttled the same way (a stolen session
	// is no way around the limit).
	if _, err := a.ChangePassword(context.Background(), "203.0.113.9", "ua", "right password 123", "new password 4567", "new password 4567"); !errors.As(err, new(*services.ThrottledError)) {
		t.Errorf("password change from a throttled address: %v", err)
	}
}

// TestOversizedPasswordsRefusedBeforeHashing (issue 17 item 6): sign-in,
// setup and password change refuse a password over 1,024 bytes without an
// argon2id run; before, a 9 MB password was hashed.
func TestOversizedPasswordsRefusedBeforeHashing(t *testing.T) {
	a, _ := newAuth(t)
	ctx := context.Background()
	huge := strings.Repeat("p", 2048)
	before := a.Verifications()
	if _, err := a.Login(ctx, "203.0.113.7", false, "ua", huge); fieldsOf(t, err)["password"] != services.MsgPasswordBytes {
		t.Errorf("login: %v", err)
	}
	if _, err := a.ChangePassword(ctx, "127.0.0.1", "ua", huge, "new password 4567", "new password 4567"); fieldsOf(t, err)["current"] != services.MsgPasswordBytes {
		t.Errorf("change, current: %v", err)
	}
	// 256 four-byte characters are 1,024 bytes: still a valid new password.
	if err := services.ValidateNewPassword("new", strings.Repeat("😀", 256), strings.Repeat("😀", 256)); err != nil {
		t.Errorf("256 emoji: %v", err)
	}
	if err := services.ValidateNewPassword("new", huge, huge); err == nil {
		t.Error("2 KiB new password accepted")
	}
	if n := a.Verifications() - before; n != 0 {
		t.Errorf("%d verifications for oversized passwords", n)
	}
}

// TestSignInRevokesThePresentedSession (issue 17 item 15): signing in
// again issues a new session id and the session the browser presented no
// longer authenticates.
func TestSignInRevokesThePresentedSession(t *testing.T) {
	a, _ := newAuth(t)
	ctx := context.Background()
	first, err := a.SignIn(ctx, "127.0.0.1", true, "ua", "right password 123", "")
	if err != nil {
		t.Fatal(err)
	}
	second, err := a.SignIn(ctx, "127.0.0.1", true, "ua", "right password 123", first)
	if err != nil {
		t.Fatal(err)
	}
	if second == first {
		t.Fatal("same session id issued twice")
	}
	if _, err := a.Session(ctx, first); !errors.Is(err, services.ErrUnauthorized) {
		t.Errorf("presented session still valid: %v", err)
	}
	if _, err := a.Session(ctx, second); err != nil {
		t.Errorf("new session: %v", err)
	}
	// A failed sign-in revokes nothing.
	if _, err := a.SignIn(ctx, "127.0.0.1", true, "ua", "wrong password", second); err == nil {
		t.Fatal("wrong password accepted")
	}
	if _, err := a.Session(ctx, second); err != nil {
		t.Errorf("failed sign-in ended the session: %v", err)
	}
}
