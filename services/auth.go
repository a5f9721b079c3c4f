package services

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"golang.org/x/crypto/argon2"
)

// Session lifetimes (50-dashboard §5).
const (
	SessionIdleTimeout = 12 * time.Hour
	SessionMaxLifetime = 7 * 24 * time.Hour
)

// Password rules shared by setup and password change.
const (
	PasswordMinLen = 12
	PasswordMaxLen = 256
)

// Messages of the setup, sign-in and account forms.
const (
	MsgPasswordShort    = "Use at least 12 characters."
	MsgPasswordLong     = "Use at most 256 characters."
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

	mu       sync.Mutex
	perIP    map[string][]time.Time // failure times within the window
	account  []time.Time
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

// Throttling constants (50-dashboard §6.2).
const (
	throttleWindow      = 15 * time.Minute
	throttlePerIPFrom   = 5
	throttleAccountFrom = 20
	throttleBase        = 30 * time.Second
	throttleCap         = 15 * time.Minute
)

// NewAuth builds the service.
func NewAuth(ctx context.Context, store AdminStore, clock Clock, params Argon2Params) (*Auth, error) {
	a := &Auth{store: store, clock: clock, params: params, verifySem: make(chan struct{}, 2),
		perIP: map[string][]time.Time{}, lastSeen: map[string]time.Time{}}
	_, err := store.PasswordHash(ctx)
	switch {
	case err == nil:
		a.hasPwd = true
	case !errors.Is(err, ErrNotFound):
		return nil, err
	}
	return a, nil
}

// NeedsSetup reports whether no admin password is stored yet.
func (a *Auth) NeedsSetup() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return !a.hasPwd
}

// ValidateNewPassword applies the password rules to a new password and its confirmation.
func ValidateNewPassword(field, pw, confirm string) error {
	fe := fieldErrors{}
	n := utf8.RuneCountInString(pw)
	switch {
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
	if pw == "" {
		return "", Invalid("password", MsgPasswordEmpty)
	}
	now := a.clock.Now()
	if wait := a.throttled(ip, loopback, now); wait > 0 {
		return "", &ThrottledError{RetryAfter: wait}
	}
	hash, err := a.store.PasswordHash(ctx)
	if err != nil {
		if errors.Is(err, ErrNotFound) {
			return "", ErrUnauthorized
		}
		return "", err
	}
	ok, err := a.verify(ctx, hash, pw)
	if err != nil {
		return "", err
	}
	if !ok {
		a.recordFailure(ip, now)
		return "", fmt.Errorf("%s: %w", MsgWrongPassword, ErrUnauthorized)
	}
	a.mu.Lock()
	delete(a.perIP, ip)
	a.mu.Unlock()
	return a.openSession(ctx, ip, userAgent)
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

// ChangePassword checks the current password, stores the new one, ends every
// session and opens a fresh one for the caller (rotation).
func (a *Auth) ChangePassword(ctx context.Context, ip, userAgent, current, next, confirm string) (string, error) {
	if err := ValidateNewPassword("new", next, confirm); err != nil {
		return "", err
	}
	hash, err := a.store.PasswordHash(ctx)
	if err != nil {
		return "", err
	}
	ok, err := a.verify(ctx, hash, current)
	if err != nil {
		return "", err
	}
	if !ok {
		return "", Invalid("current", MsgCurrentWrong)
	}
	if err := a.store.SetPasswordHash(ctx, a.hash(next), false); err != nil {
		return "", err
	}
	if err := a.store.DeleteSessionsExcept(ctx, ""); err != nil {
		return "", err
	}
	return a.openSession(ctx, ip, userAgent)
}

// throttled returns how long ip must still wait, or 0.
func (a *Auth) throttled(ip string, loopback bool, now time.Time) time.Duration {
	a.mu.Lock()
	defer a.mu.Unlock()
	fails := prune(a.perIP[ip], now)
	a.perIP[ip] = fails
	a.account = prune(a.account, now)
	wait := backoffWait(fails, throttlePerIPFrom, now)
	if !loopback {
		if w := backoffWait(a.account, throttleAccountFrom, now); w > wait {
			wait = w
		}
	}
	return wait
}

func (a *Auth) recordFailure(ip string, now time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.perIP[ip] = append(prune(a.perIP[ip], now), now)
	a.account = append(prune(a.account, now), now)
}

// backoffWait: from the from-th failure, wait 30 s after the last failure,
// doubling per further failure, capped at 15 min.
func backoffWait(fails []time.Time, from int, now time.Time) time.Duration {
	if len(fails) < from {
		return 0
	}
	d := throttleBase
	for i := from; i < len(fails) && d < throttleCap; i++ {
		d *= 2
	}
	if d > throttleCap {
		d = throttleCap
	}
	if rem := fails[len(fails)-1].Add(d).Sub(now); rem > 0 {
		return rem
	}
	return 0
}

func prune(ts []time.Time, now time.Time) []time.Time {
	i := 0
	for i < len(ts) && now.Sub(ts[i]) >= throttleWindow {
		i++
	}
	return ts[i:]
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
		return errors.New("SWITCHYARD_ADMIN_PASSWORD: " + MsgPasswordShort)
	}
	err := a.SetInitialPassword(ctx, pw, pw)
	if errors.Is(err, ErrSetupDone) {
		return nil
	}
	return err
}
