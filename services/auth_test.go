package services_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"switchyard/internal/testkit"
	"switchyard/models"
	"switchyard/services"
)

func newAuth(t *testing.T) (*services.Auth, *testkit.FakeClock) {
	t.Helper()
	clock := testkit.NewFakeClock(time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC))
	a, err := services.NewAuth(context.Background(), models.NewAdminStore(testkit.OpenDB(t)), clock, testkit.CheapArgon2)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.SetInitialPassword(context.Background(), "right password 123", "right password 123"); err != nil {
		t.Fatal(err)
	}
	return a, clock
}

func fail(t *testing.T, a *services.Auth, ip string, loopback bool) error {
	t.Helper()
	_, err := a.Login(context.Background(), ip, loopback, "ua", "wrong password")
	return err
}

func TestLoginThrottlePerIP(t *testing.T) {
	a, clock := newAuth(t)
	for i := 1; i <= 5; i++ {
		if err := fail(t, a, "203.0.113.9", false); !errors.Is(err, services.ErrUnauthorized) {
			t.Fatalf("failure %d: %v", i, err)
		}
	}
	// After the 5th failure: 30 s.
	var terr *services.ThrottledError
	if err := fail(t, a, "203.0.113.9", false); !errors.As(err, &terr) || terr.RetryAfter != 30*time.Second {
		t.Fatalf("6th try: %v", err)
	}
	// Another IP is not affected.
	if _, err := a.Login(context.Background(), "203.0.113.10", false, "ua", "right password 123"); err != nil {
		t.Fatalf("other ip: %v", err)
	}
	clock.Advance(30 * time.Second)
	if err := fail(t, a, "203.0.113.9", false); !errors.Is(err, services.ErrUnauthorized) {
		t.Fatalf("after wait: %v", err)
	}
	// 6th failure doubles to 60 s.
	if err := fail(t, a, "203.0.113.9", false); !errors.As(err, &terr) || terr.RetryAfter != 60*time.Second {
		t.Fatalf("doubling: %v", err)
	}
	// Cap at 15 min.
	for i := 0; i < 10; i++ {
		clock.Advance(terr.RetryAfter)
		_ = fail(t, a, "203.0.113.9", false)
		if err := fail(t, a, "203.0.113.9", false); errors.As(err, &terr) && terr.RetryAfter > 15*time.Minute {
			t.Fatalf("wait %v over the cap", terr.RetryAfter)
		}
	}
	// Success clears the IP's counter (after the window passes, failures age out too).
	clock.Advance(16 * time.Minute)
	if _, err := a.Login(context.Background(), "203.0.113.9", false, "ua", "right password 123"); err != nil {
		t.Fatalf("login after window: %v", err)
	}
}

func TestLoginThrottleAccountWideSparesLoopback(t *testing.T) {
	a, _ := newAuth(t)
	// 20 failures spread over 20 addresses (4 each would stay under the per-IP limit).
	for i := 0; i < 20; i++ {
		_ = fail(t, a, "198.51.100."+string(rune('a'+i)), false)
	}
	var terr *services.ThrottledError
	if _, err := a.Login(context.Background(), "198.51.100.200", false, "ua", "right password 123"); !errors.As(err, &terr) {
		t.Fatalf("non-loopback after 20 account failures: %v", err)
	}
	if _, err := a.Login(context.Background(), "127.0.0.1", true, "ua", "right password 123"); err != nil {
		t.Fatalf("loopback must keep only its per-IP limit: %v", err)
	}
}

func TestSessionLifetimesAndRevocation(t *testing.T) {
	a, clock := newAuth(t)
	ctx := context.Background()
	sid, err := a.Login(ctx, "127.0.0.1", true, "ua", "right password 123")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Session(ctx, sid); err != nil {
		t.Fatal(err)
	}
	clock.Advance(11 * time.Hour)
	if _, err := a.Session(ctx, sid); err != nil {
		t.Fatalf("within idle timeout: %v", err)
	}
	clock.Advance(12*time.Hour + time.Minute)
	if _, err := a.Session(ctx, sid); !errors.Is(err, services.ErrUnauthorized) {
		t.Fatalf("idle session must expire: %v", err)
	}
	sid, _ = a.Login(ctx, "127.0.0.1", true, "ua", "right password 123")
	if err := a.Logout(ctx, sid); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Session(ctx, sid); !errors.Is(err, services.ErrUnauthorized) {
		t.Fatalf("logged-out session must be refused: %v", err)
	}
}

func TestChangePasswordEndsOtherSessions(t *testing.T) {
	a, _ := newAuth(t)
	ctx := context.Background()
	s1, _ := a.Login(ctx, "127.0.0.1", true, "ua", "right password 123")
	s2, _ := a.Login(ctx, "127.0.0.1", true, "ua", "right password 123")
	if _, err := a.ChangePassword(ctx, "127.0.0.1", "ua", "nope", "new password 4567", "new password 4567"); err == nil {
		t.Fatal("wrong current password accepted")
	}
	s3, err := a.ChangePassword(ctx, "127.0.0.1", "ua", "right password 123", "new password 4567", "new password 4567")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{s1, s2} {
		if _, err := a.Session(ctx, s); err == nil {
			t.Fatal("old session survived a password change")
		}
	}
	if _, err := a.Session(ctx, s3); err != nil {
		t.Fatalf("new session: %v", err)
	}
	if _, err := a.Login(ctx, "127.0.0.2", true, "ua", "new password 4567"); err != nil {
		t.Fatalf("login with new password: %v", err)
	}
}

func TestSetupRules(t *testing.T) {
	clock := testkit.NewFakeClock(time.Now())
	a, _ := services.NewAuth(context.Background(), models.NewAdminStore(testkit.OpenDB(t)), clock, testkit.CheapArgon2)
	ctx := context.Background()
	var verr *services.ValidationError
	if err := a.SetInitialPassword(ctx, "short", "short"); !errors.As(err, &verr) || verr.Fields["password"] != services.MsgPasswordShort {
		t.Fatalf("short: %v", err)
	}
	if err := a.SetInitialPassword(ctx, "long enough pw 1", "long enough pw 2"); !errors.As(err, &verr) || verr.Fields["confirm"] != services.MsgPasswordMismatch {
		t.Fatalf("mismatch: %v", err)
	}
	if !a.NeedsSetup() {
		t.Fatal("nothing stored yet")
	}
	if err := a.SetInitialPassword(ctx, "long enough pw 1", "long enough pw 1"); err != nil {
		t.Fatal(err)
	}
	if err := a.SetInitialPassword(ctx, "another password", "another password"); !errors.Is(err, services.ErrSetupDone) {
		t.Fatalf("second setup: %v", err)
	}
}

// Setup completed through another replica of the fleet (another Auth on the
// same store) is seen at this replica's next check: a cached "no password"
// is re-read, so this replica stops offering first-run setup.
func TestNeedsSetupRereadsAPasswordStoredElsewhere(t *testing.T) {
	clock := testkit.NewFakeClock(time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC))
	store := models.NewAdminStore(testkit.OpenDB(t))
	ctx := context.Background()
	here, err := services.NewAuth(ctx, store, clock, testkit.CheapArgon2)
	if err != nil {
		t.Fatal(err)
	}
	elsewhere, err := services.NewAuth(ctx, store, clock, testkit.CheapArgon2)
	if err != nil {
		t.Fatal(err)
	}
	if !here.NeedsSetup() {
		t.Fatal("a fresh store needs setup")
	}
	if err := elsewhere.SetInitialPassword(ctx, "right password 123", "right password 123"); err != nil {
		t.Fatal(err)
	}
	if here.NeedsSetup() {
		t.Fatal("setup completed on another replica is not seen here")
	}
	if err := here.SetInitialPassword(ctx, "second password 123", "second password 123"); !errors.Is(err, services.ErrSetupDone) {
		t.Fatalf("a second setup: %v, want ErrSetupDone", err)
	}
}
