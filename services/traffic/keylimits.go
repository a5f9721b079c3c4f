package traffic

import (
	"context"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"switchyard/services"
)

// KeyLimit is a client key's own limits (10-gateway-api §3.3): at most
// RequestsPerMinute inference requests per minute (a token bucket of that
// capacity refilled at RequestsPerMinute/60 per second) and at most
// MaxConcurrent of them in flight. 0 is unlimited.
type KeyLimit struct {
	RequestsPerMinute int
	MaxConcurrent     int
}

// KeyLimitOf reads the limits of an API key (nil and 0 are unlimited).
func KeyLimitOf(k services.APIKey) KeyLimit {
	var l KeyLimit
	if k.RequestsPerMinute != nil && *k.RequestsPerMinute > 0 {
		l.RequestsPerMinute = *k.RequestsPerMinute
	}
	if k.MaxConcurrentRequests != nil && *k.MaxConcurrentRequests > 0 {
		l.MaxConcurrent = *k.MaxConcurrentRequests
	}
	return l
}

// Unlimited reports a key without limits: nothing to admit or release.
func (l KeyLimit) Unlimited() bool { return l.RequestsPerMinute <= 0 && l.MaxConcurrent <= 0 }

// KeyLimiter admits the inference requests of client keys under their
// KeyLimit. It is the one home of the per-key rule; the request path calls
// Admit once per request and Release once when the request ends.
//
// The interface is shaped for a shared implementation (several replicas,
// scale-out §1 row 10): Admit is one decision — rate and concurrency in
// one call, so one round trip (one Lua script in Redis) — and the limiter
// judges time by its own clock (the server's, never the caller's), so
// replicas with skewed clocks agree. A refusal is a *KeyRefusal; any other
// error would mean the limiter could not decide, which implementations
// must not return (a shared one falls back to local limits instead:
// scale-out §0 decision 5, never a 500).
type KeyLimiter interface {
	// Admit takes one request of keyID under lim: a token of the rate
	// bucket, then a concurrency unit. The grant goes back to Release
	// when the request ends (a refused request holds nothing).
	Admit(ctx context.Context, keyID string, lim KeyLimit) (KeyGrant, error)
	// Release returns the concurrency unit of a grant; the zero grant
	// and a second Release of the same grant do nothing harmful.
	Release(g KeyGrant)
	// Forget drops what is kept of a key that was revoked or deleted;
	// grants still out stay releasable.
	Forget(keyID string)
}

// KeyGrant is what an admitted request holds until Release. Ref belongs to
// the implementation (the memory limiter's per-key state, a shared
// limiter's lease token); callers only hand the grant back.
type KeyGrant struct {
	KeyID string
	Ref   any
}

// Kinds of KeyRefusal.
const (
	KeyLimitRate        = "requests_per_minute"
	KeyLimitConcurrency = "max_concurrent_requests"
)

// KeyRefusal is a request refused by its key's own limits: 429
// rate_limit_exceeded with Retry-After (10-gateway-api §3.4). It is a
// local limit: it never penalises a connection, provider or model.
type KeyRefusal struct {
	// Kind is KeyLimitRate or KeyLimitConcurrency.
	Kind string
	// Limit is the limit that refused.
	Limit int
	// RetryAfter is when the bucket holds a token again (rate), or 1 s
	// (concurrency: nothing says when a request ends).
	RetryAfter time.Duration
}

func (e *KeyRefusal) Error() string {
	if e.Kind == KeyLimitConcurrency {
		return fmt.Sprintf("This API key may have at most %d requests in flight.", e.Limit)
	}
	return fmt.Sprintf("This API key is limited to %d requests per minute.", e.Limit)
}

// RetryAfterSeconds is the Retry-After header value: whole seconds,
// rounded up, at least 1.
func (e *KeyRefusal) RetryAfterSeconds() int {
	s := int(math.Ceil(e.RetryAfter.Seconds()))
	if s < 1 {
		s = 1
	}
	return s
}

// keyIdle is how long a key's state must go unused, with nothing in
// flight, before it is dropped: a bucket of capacity rpm refills at rpm/60
// per second, so after a minute it is full again, exactly as a fresh state
// would be. Dropping it then changes no answer.
const keyIdle = time.Minute

// KeyLimits is the in-memory KeyLimiter of one process (the default; limits
// are per process until a shared implementation replaces it). Keys without
// limits never reach it. State is kept per key id, looked up without a
// global lock; idle keys are dropped by a sweep that runs at most once per
// keyIdle, on an Admit.
type KeyLimits struct {
	clock     services.Clock
	keys      sync.Map // key id → *keyState
	lastSweep atomic.Int64
	sweeping  atomic.Bool
}

var _ KeyLimiter = (*KeyLimits)(nil)

// keyState is one key's bucket and in-flight count, guarded by mu. dead
// marks a state removed from the map (swept or forgotten): an Admit that
// loaded it before the removal looks it up again.
type keyState struct {
	mu       sync.Mutex
	rpm      int // the capacity the bucket was built for
	tokens   float64
	last     time.Time // last refill, and last use
	inFlight int
	dead     bool
}

// NewKeyLimits builds the in-memory limiter on the injected clock.
func NewKeyLimits(clock services.Clock) *KeyLimits {
	l := &KeyLimits{clock: clock}
	l.lastSweep.Store(clock.Now().UnixNano())
	return l
}

// Admit implements KeyLimiter.
func (l *KeyLimits) Admit(_ context.Context, keyID string, lim KeyLimit) (KeyGrant, error) {
	if lim.Unlimited() {
		return KeyGrant{}, nil
	}
	now := l.clock.Now()
	l.maybeSweep(now)
	for {
		st := l.state(keyID)
		st.mu.Lock()
		if st.dead {
			st.mu.Unlock()
			continue
		}
		err := st.admit(now, lim)
		st.mu.Unlock()
		if err != nil {
			return KeyGrant{}, err
		}
		if lim.MaxConcurrent <= 0 {
			return KeyGrant{}, nil
		}
		return KeyGrant{KeyID: keyID, Ref: st}, nil
	}
}

func (l *KeyLimits) state(keyID string) *keyState {
	if v, ok := l.keys.Load(keyID); ok {
		return v.(*keyState)
	}
	v, _ := l.keys.LoadOrStore(keyID, &keyState{})
	return v.(*keyState)
}

// admit applies the bucket, then the concurrency cap; mu is held. A
// request the concurrency cap refuses has still used its token, as one
// the rate bucket admits and the upstream refuses would.
func (st *keyState) admit(now time.Time, lim KeyLimit) error {
	if rpm := lim.RequestsPerMinute; rpm > 0 {
		if st.rpm != rpm || st.last.IsZero() {
			// A new key, or its limit changed: a full bucket of the new size.
			st.rpm, st.tokens = rpm, float64(rpm)
		} else if d := now.Sub(st.last); d > 0 {
			st.tokens = math.Min(float64(rpm), st.tokens+d.Seconds()*float64(rpm)/60)
		}
		st.last = now
		if st.tokens < 1 {
			wait := time.Duration((1 - st.tokens) / (float64(rpm) / 60) * float64(time.Second))
			return &KeyRefusal{Kind: KeyLimitRate, Limit: rpm, RetryAfter: wait}
		}
		st.tokens--
	} else {
		st.rpm = 0
		st.last = now
	}
	if lim.MaxConcurrent > 0 {
		if st.inFlight >= lim.MaxConcurrent {
			return &KeyRefusal{Kind: KeyLimitConcurrency, Limit: lim.MaxConcurrent, RetryAfter: time.Second}
		}
		st.inFlight++
	}
	return nil
}

// Release implements KeyLimiter.
func (l *KeyLimits) Release(g KeyGrant) {
	st, ok := g.Ref.(*keyState)
	if !ok {
		return
	}
	st.mu.Lock()
	if st.inFlight > 0 {
		st.inFlight--
	}
	st.last = l.clock.Now()
	st.mu.Unlock()
}

// Forget implements KeyLimiter: the key's state leaves the map at once;
// grants still out release into the state they came from.
func (l *KeyLimits) Forget(keyID string) {
	if v, ok := l.keys.LoadAndDelete(keyID); ok {
		st := v.(*keyState)
		st.mu.Lock()
		st.dead = true
		st.mu.Unlock()
	}
}

// Len reports how many keys have state (tests, metrics).
func (l *KeyLimits) Len() int {
	n := 0
	l.keys.Range(func(any, any) bool { n++; return true })
	return n
}

// maybeSweep drops idle keys at most once per keyIdle; one caller sweeps
// while the others go on.
func (l *KeyLimits) maybeSweep(now time.Time) {
	if now.UnixNano()-l.lastSweep.Load() < int64(keyIdle) || !l.sweeping.CompareAndSwap(false, true) {
		return
	}
	defer l.sweeping.Store(false)
	l.lastSweep.Store(now.UnixNano())
	l.keys.Range(func(k, v any) bool {
		st := v.(*keyState)
		st.mu.Lock()
		if st.inFlight == 0 && now.Sub(st.last) >= keyIdle {
			st.dead = true
			l.keys.Delete(k)
		}
		st.mu.Unlock()
		return true
	})
}
