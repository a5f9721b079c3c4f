package services

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"golang.org/x/crypto/argon2"
)

// Session lifetimes (50-dashboard §5).
const (
	SessionIdleTimeout = 12 * time.Hour
	SessionMaxLifetime = 7 * 24 * time.Hour
)

// Password rules shared by setup and password change. PasswordMaxBytes
// bounds every password the server reads (sign-in included) before any
// hashing: 256 characters of 4-byte UTF-8 fit, a 9 MB paste does not.
const (
	PasswordMinLen   = 12
	PasswordMaxLen   = 256
	PasswordMaxBytes = 1024
)

// Messages of the setup, sign-in and account forms.
const (
	MsgPasswordShort    = "Use at least 12 characters."
	MsgPasswordLong     = "Use at most 256 characters."
	MsgPasswordBytes    = "Use at most 1,024 bytes."
	MsgPasswordMismatch = "The two passwords do not match."
	MsgPasswordEmpty    = "Enter the password."
	MsgWrongPassword    = "Wrong password."
	MsgCurrentWrong     = "The current password is wrong."
)

// ErrSetupDone means an admin password is already stored.
var ErrSetupDone = errors.New("setup was already completed")

// AdminSession is a signed-in dashboard session. Only the SHA-256 of its
// random id is stored, so a leaked database grants no session.
type AdminSession struct {
	IDHash     string
	CreatedAt  time.Time
	LastSeenAt time.Time
	ClientIP   string
	UserAgent  string
}

// AdminStore persists the admin password hash and sessions.
type AdminStore interface {
	PasswordHash(ctx context.Context) (string, error) // ErrNotFound when none is stored
	// SetPasswordHash stores hash; with onlyIfUnset it fails with ErrConflict
	// when a hash exists (the setup race).
	SetPasswordHash(ctx context.Context, hash string, onlyIfUnset bool) error
	CreateSession(ctx context.Context, s AdminSession) error
	FindSession(ctx context.Context, idHash string) (AdminSession, error)
	TouchSession(ctx context.Context, idHash string, at time.Time) error
	DeleteSession(ctx context.Context, idHash string) error
	// DeleteSessionsExcept ends every session but keep ("" ends all).
	DeleteSessionsExcept(ctx context.Context, keep string) error
	ListSessions(ctx context.Context) ([]AdminSession, error)
}

// Auth owns the admin password, dashboard sessions and sign-in throttling.
type Auth struct {
	store     AdminStore
	clock     Clock
	params    Argon2Params
	verifySem chan struct{}
	throttle  LoginThrottle
	verified  atomic.Int64 // argon2id verifications run

	mu       sync.Mutex
	hasPwd   bool
	lastSeen map[string]time.Time // throttles TouchSession writes
}

// Argon2Params tunes argon2id; tests use a cheaper set.
type Argon2Params struct {
	MemoryKiB uint32
	Time      uint32
	Threads   uint8
}

// DefaultArgon2 follows the OWASP recommendation (19 MiB, 2 passes, 1 lane).
var DefaultArgon2 = Argon2Params{MemoryKiB: 19 * 1024, Time: 2, Threads: 1}

// NewAuth builds the service.
func NewAuth(ctx context.Context, store AdminStore, clock Clock, params Argon2Params) (*Auth, error) {
	a := &Auth{store: store, clock: clock, params: params, verifySem: make(chan struct{}, 2),
		throttle: NewMemoryLoginThrottle(), lastSeen: map[string]time.Time{}}
	_, err := store.PasswordHash(ctx)
	switch {
	case err == nil:
		a.hasPwd = true
	case !errors.Is(err, ErrNotFound):
		return nil, err
	}
	return a, nil
}

// UseLoginThrottle replaces the in-memory throttle (a store shared by
// several gateways counts fleet-wide). Call it before serving.
func (a *Auth) UseLoginThrottle(t LoginThrottle) { a.throttle = t }

// Verifications counts the argon2id password verifications run so far
// (tests assert one per admitted attempt and none for refused ones).
func (a *Auth) Verifications() int64 { return a.verified.Load() }

// NeedsSetup reports whether no admin password is stored yet. Only a
// stored password is cached for good (it is never removed): while none is
// known the store is asked again, because in shared mode another replica
// may have completed setup since this one started. A store that cannot
// answer leaves the cached answer.
func (a *Auth) NeedsSetup() bool {
	a.mu.Lock()
	has := a.hasPwd
	a.mu.Unlock()
	if has {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if _, err := a.store.PasswordHash(ctx); err != nil {
		return true
	}
	a.setHas()
	return false
}

// ValidateNewPassword applies the password rules to a new password and its confirmation.
func ValidateNewPassword(field, pw, confirm string) error {
	fe := fieldErrors{}
	n := utf8.RuneCountInString(pw)
	switch {
	case len(pw) > PasswordMaxBytes:
		fe.add(field, MsgPasswordBytes)
	case n < PasswordMinLen:
		fe.add(field, MsgPasswordShort)
	case n > PasswordMaxLen:
		fe.add(field, MsgPasswordLong)
	case pw != confirm:
		fe.add("confirm", MsgPasswordMismatch)
	}
	return fe.Err()
}

// SetInitialPassword stores the first admin password; ErrSetupDone if one exists.
func (a *Auth) SetInitialPassword(ctx context.Context, pw, confirm string) error {
	if err := ValidateNewPassword("password", pw, confirm); err != nil {
		return err
	}
	if err := a.store.SetPasswordHash(ctx, a.hash(pw), true); err != nil {
		if errors.Is(err, ErrConflict) {
			a.setHas()
			return ErrSetupDone
		}
		return err
	}
	a.setHas()
	return nil
}

func (a *Auth) setHas() {
	a.mu.Lock()
	a.hasPwd = true
	a.mu.Unlock()
}

// NewSessionID returns a random 256-bit session id.
func NewSessionID() string { return RandomToken(32) }

// Login checks the password under throttling and opens a session, returning
// its id (to be put in the cookie, never stored in plain).
func (a *Auth) Login(ctx context.Context, ip string, loopback bool, userAgent, pw string) (string, error) {
	if err := a.checkPassword(ctx, ip, loopback, "password", pw, fmt.Errorf("%s: %w", MsgWrongPassword, ErrUnauthorized)); err != nil {
		return "", err
	}
	return a.openSession(ctx, ip, userAgent)
}

// SignIn is Login that also revokes the session the browser presented, if
// any (issue 17 item 15): signing in again never leaves the old cookie
// usable, so a cookie planted before sign-in or left from an earlier
// sign-in is dead once the admin signs in.
func (a *Auth) SignIn(ctx context.Context, ip string, loopback bool, userAgent, pw, presented string) (string, error) {
	sid, err := a.Login(ctx, ip, loopback, userAgent, pw)
	if err != nil {
		return "", err
	}
	if presented != "" && presented != sid {
		if err := a.store.DeleteSession(ctx, SHA256Hex(presented)); err != nil && !errors.Is(err, ErrNotFound) {
			return "", err
		}
	}
	return sid, nil
}

// ConfirmPassword re-checks the admin password of a signed-in admin before
// a sensitive change, under the same throttle as sign-in (a stolen session
// must not be a way to guess the password).
func (a *Auth) ConfirmPassword(ctx context.Context, ip string, loopback bool, field, pw string) error {
	return a.checkPassword(ctx, ip, loopback, field, pw, Invalid(field, MsgCurrentWrong))
}

// checkPassword runs one throttled argon2id check of pw against the stored
// hash: the throttle reserves the check (and counts it as a failure) before
// it runs, so concurrent attempts cannot exceed the limit; wrong is the
// error of a wrong password.
func (a *Auth) checkPassword(ctx context.Context, ip string, loopback bool, field, pw string, wrong error) error {
	if pw == "" {
		return Invalid(field, MsgPasswordEmpty)
	}
	if len(pw) > PasswordMaxBytes {
		return Invalid(field, MsgPasswordBytes)
	}
	res, err := a.throttle.Reserve(ctx, LoginAttempt{IP: ip, Loopback: loopback, At: a.clock.Now()})
	if err != nil {
		return err
	}
	if res.Wait > 0 {
		return &ThrottledError{RetryAfter: res.Wait}
	}
	settle := func(o LoginOutcome) { _ = a.throttle.Settle(context.WithoutCancel(ctx), res, o) }
	hash, err := a.store.PasswordHash(ctx)
	if err != nil {
		settle(LoginNotChecked)
		if errors.Is(err, ErrNotFound) {
			return ErrUnauthorized
		}
		return err
	}
	ok, err := a.verify(ctx, hash, pw)
	if err != nil {
		settle(LoginNotChecked)
		return err
	}
	if !ok {
		settle(LoginFailed)
		return wrong
	}
	settle(LoginSucceeded)
	return nil
}

func (a *Auth) openSession(ctx context.Context, ip, userAgent string) (string, error) {
	id := NewSessionID()
	now := a.clock.Now().UTC()
	if len(userAgent) > 256 {
		userAgent = userAgent[:256]
	}
	if err := a.store.CreateSession(ctx, AdminSession{IDHash: SHA256Hex(id), CreatedAt: now, LastSeenAt: now, ClientIP: ip, UserAgent: userAgent}); err != nil {
		return "", err
	}
	return id, nil
}

// OpenSession opens a session without a password check (right after setup).
func (a *Auth) OpenSession(ctx context.Context, ip, userAgent string) (string, error) {
	return a.openSession(ctx, ip, userAgent)
}

// Session validates a session id: it must exist, be within the idle timeout
// and the absolute lifetime. Expired rows are deleted.
func (a *Auth) Session(ctx context.Context, id string) (AdminSession, error) {
	if id == "" {
		return AdminSession{}, ErrUnauthorized
	}
	h := SHA256Hex(id)
	s, err := a.store.FindSession(ctx, h)
	if err != nil {
		if errors.Is(err, ErrNotFound) {
			return AdminSession{}, ErrUnauthorized
		}
		return AdminSession{}, err
	}
	now := a.clock.Now()
	if now.Sub(s.LastSeenAt) > SessionIdleTimeout || now.Sub(s.CreatedAt) > SessionMaxLifetime {
		_ = a.store.DeleteSession(ctx, h)
		return AdminSession{}, ErrUnauthorized
	}
	// Touch at most once a minute: last-seen is for display and idle expiry.
	if now.Sub(s.LastSeenAt) > time.Minute {
		if err := a.store.TouchSession(ctx, h, now.UTC()); err == nil {
			s.LastSeenAt = now.UTC()
		}
	}
	return s, nil
}

// Logout ends one session server-side.
func (a *Auth) Logout(ctx context.Context, id string) error {
	return a.store.DeleteSession(ctx, SHA256Hex(id))
}

// EndSession ends a session by its stored hash (Account page).
func (a *Auth) EndSession(ctx context.Context, idHash string) error {
	return a.store.DeleteSession(ctx, idHash)
}

// EndOtherSessions ends every session except the one with id.
func (a *Auth) EndOtherSessions(ctx context.Context, id string) error {
	return a.store.DeleteSessionsExcept(ctx, SHA256Hex(id))
}

// Sessions lists open sessions.
func (a *Auth) Sessions(ctx context.Context) ([]AdminSession, error) {
	return a.store.ListSessions(ctx)
}

// ChangePassword checks the current password (throttled like sign-in),
// stores the new one, ends every session and opens a fresh one for the
// caller (rotation).
func (a *Auth) ChangePassword(ctx context.Context, ip, userAgent, current, next, confirm string) (string, error) {
	if err := ValidateNewPassword("new", next, confirm); err != nil {
		return "", err
	}
	if err := a.ConfirmPassword(ctx, ip, isLoopbackIP(ip), "current", current); err != nil {
		return "", err
	}
	if err := a.store.SetPasswordHash(ctx, a.hash(next), false); err != nil {
		return "", err
	}
	if err := a.store.DeleteSessionsExcept(ctx, ""); err != nil {
		return "", err
	}
	return a.openSession(ctx, ip, userAgent)
}

// isLoopbackIP reports a loopback address (the account-wide limit spares it).
func isLoopbackIP(ip string) bool {
	a, err := netip.ParseAddr(ip)
	return err == nil && a.Unmap().IsLoopback()
}

func (a *Auth) hash(pw string) string {
	salt := make([]byte, 16)
	if _, err := rand.Read(salt); err != nil {
		panic(err)
	}
	p := a.params
	key := argon2.IDKey([]byte(pw), salt, p.Time, p.MemoryKiB, p.Threads, 32)
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s", argon2.Version, p.MemoryKiB, p.Time, p.Threads,
		base64.RawStdEncoding.EncodeToString(salt), base64.RawStdEncoding.EncodeToString(key))
}

// verify compares pw with an encoded argon2id hash behind a semaphore of 2,
// so a flood of sign-ins cannot exhaust memory.
func (a *Auth) verify(ctx context.Context, encoded, pw string) (bool, error) {
	select {
	case a.verifySem <- struct{}{}:
		defer func() { <-a.verifySem }()
	case <-ctx.Done():
		return false, ctx.Err()
	}
	parts := strings.Split(encoded, "$")
	if len(parts) != 6 || parts[1] != "argon2id" {
		return false, errors.New("services: stored password hash has an unknown format")
	}
	var m, t uint32
	var p uint8
	if _, err := fmt.Sscanf(parts[3], "m=%d,t=%d,p=%d", &m, &t, &p); err != nil {
		return false, fmt.Errorf("services: stored password hash: %w", err)
	}
	salt, err1 := base64.RawStdEncoding.DecodeString(parts[4])
	want, err2 := base64.RawStdEncoding.DecodeString(parts[5])
	if err1 != nil || err2 != nil {
		return false, errors.New("services: stored password hash is corrupt")
	}
	a.verified.Add(1)
	got := argon2.IDKey([]byte(pw), salt, t, m, p, uint32(len(want)))
	return subtle.ConstantTimeCompare(got, want) == 1, nil
}

// BootstrapPassword stores the first password from SWITCHYARD_ADMIN_PASSWORD
// when none is stored; a stored password makes the variable a no-op.
func (a *Auth) BootstrapPassword(ctx context.Context, pw string) error {
	if pw == "" || !a.NeedsSetup() {
		return nil
	}
	if utf8.RuneCountInString(pw) < PasswordMinLen {
		return fmt.Errorf("SWITCHYARD_ADMIN_PASSWORD: %s", MsgPasswordShort)
	}
	err := a.SetInitialPassword(ctx, pw, pw)
	if errors.Is(err, ErrSetupDone) {
		return nil
	}
	return err
}
