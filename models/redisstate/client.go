package redisstate

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// ErrDegraded is returned without touching Redis while the client's breaker
// is open, and wraps every Redis failure: the caller falls back to its
// local implementation.
var ErrDegraded = errors.New("redisstate: redis unavailable")

// Options tune the client. Zero values take the defaults of the scale-out
// design §3.6, sized for a request path that must never wait on Redis for
// more than tens of milliseconds.
type Options struct {
	// CallTimeout bounds one call on the request path. Default 50 ms.
	CallTimeout time.Duration
	// DialTimeout bounds one connection attempt. Default 100 ms.
	DialTimeout time.Duration
	// FailuresToOpen consecutive failures open the breaker. Default 3.
	FailuresToOpen int
	// OpenFor is how long the breaker stays open before one probe. Default 2 s.
	OpenFor time.Duration
	// PoolSize bounds the connection pool. Default 32.
	PoolSize int
	// Now is the local clock of the breaker (not of any limit). Default time.Now.
	Now func() time.Time
	// ReserveNow is the local clock a replica's reserves lapse by
	// (reserve.go; a block's record in Redis lapses by the server's clock
	// at twice the local TTL). Default time.Now.
	ReserveNow func() time.Time
}

func (o Options) withDefaults() Options {
	if o.CallTimeout <= 0 {
		o.CallTimeout = 50 * time.Millisecond
	}
	if o.DialTimeout <= 0 {
		o.DialTimeout = 100 * time.Millisecond
	}
	if o.FailuresToOpen <= 0 {
		o.FailuresToOpen = 3
	}
	if o.OpenFor <= 0 {
		o.OpenFor = 2 * time.Second
	}
	if o.PoolSize <= 0 {
		o.PoolSize = 32
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.ReserveNow == nil {
		o.ReserveNow = time.Now
	}
	return o
}

// Client is the shared Redis connection of one replica and its breaker.
type Client struct {
	rdb  redis.UniversalClient
	opts Options

	mu        sync.Mutex
	failures  int
	openUntil time.Time
	probing   bool
	degraded  atomic.Bool
	onUp      []func(context.Context)
	lastErr   atomic.Value // string

	// releases feed RunReleaser (releaser.go); releasing says it runs.
	releases  chan releaseOp
	releasing atomic.Bool
}

// ParseURL checks a redis:// or rediss:// URL (Valkey accepts the same).
func ParseURL(raw string) (*redis.Options, error) {
	o, err := redis.ParseURL(raw)
	if err != nil {
		var perr error = err
		return nil, fmt.Errorf("redisstate: %w", perr)
	}
	return o, nil
}

// New connects to the Redis server at rawURL. It does not wait for the
// server: a replica starts while Redis is down, degraded, and its first
// successful call marks it up.
func New(rawURL string, opts Options) (*Client, error) {
	ro, err := ParseURL(rawURL)
	if err != nil {
		return nil, err
	}
	opts = opts.withDefaults()
	ro.DialTimeout = opts.DialTimeout
	ro.ReadTimeout = opts.CallTimeout
	ro.WriteTimeout = opts.CallTimeout
	ro.PoolTimeout = opts.CallTimeout
	ro.MaxRetries = -1 // no retries on the request path: the fallback is the retry
	ro.DialerRetries = 1
	ro.PoolSize = opts.PoolSize
	ro.ContextTimeoutEnabled = true
	return NewWithClient(redis.NewClient(ro), opts), nil
}

// NewWithClient wraps an existing client (tests pass one on miniredis).
func NewWithClient(rdb redis.UniversalClient, opts Options) *Client {
	c := &Client{rdb: rdb, opts: opts.withDefaults(), releases: make(chan releaseOp, releaseQueue)}
	c.lastErr.Store("")
	return c
}

// Close closes the connection pool.
func (c *Client) Close() error { return c.rdb.Close() }

// Degraded reports whether the last calls failed (the breaker is open or
// probing): the limits are then enforced per replica.
func (c *Client) Degraded() bool { return c.degraded.Load() }

// LastError is the text of the last Redis failure ("" when none).
func (c *Client) LastError() string { return c.lastErr.Load().(string) }

// OnUp registers fn to run (in its own goroutine) whenever Redis answers
// again after being degraded: the limiters re-seed their live grants there.
func (c *Client) OnUp(fn func(context.Context)) {
	c.mu.Lock()
	c.onUp = append(c.onUp, fn)
	c.mu.Unlock()
}

// allow reports whether a call may go to Redis now. While the breaker is
// open it refuses; once OpenFor has passed one caller probes.
func (c *Client) allow() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.openUntil.IsZero() {
		return true
	}
	if c.probing || c.opts.Now().Before(c.openUntil) {
		return false
	}
	c.probing = true
	return true
}

// done records a call's outcome in the breaker.
func (c *Client) done(err error) {
	c.mu.Lock()
	var up []func(context.Context)
	if err == nil {
		wasDegraded := c.degraded.Load()
		c.failures, c.openUntil, c.probing = 0, time.Time{}, false
		if wasDegraded {
			c.degraded.Store(false)
			up = append(up, c.onUp...)
		}
	} else {
		c.lastErr.Store(err.Error())
		c.failures++
		c.probing = false
		if c.failures >= c.opts.FailuresToOpen || !c.openUntil.IsZero() {
			c.openUntil = c.opts.Now().Add(c.opts.OpenFor)
			c.degraded.Store(true)
		}
	}
	c.mu.Unlock()
	for _, fn := range up {
		go fn(context.Background())
	}
}

// call runs fn against Redis under the breaker and the per-call timeout.
// A refusal of the breaker or any Redis error comes back wrapping
// ErrDegraded; redis.Nil is a normal answer, not a failure.
func (c *Client) call(ctx context.Context, fn func(ctx context.Context) error) error {
	if !c.allow() {
		return ErrDegraded
	}
	cctx, cancel := context.WithTimeout(ctx, c.opts.CallTimeout)
	err := fn(cctx)
	cancel()
	if err != nil && errors.Is(err, redis.Nil) {
		err = nil
	}
	if err != nil && ctx.Err() != nil {
		// The caller gave up (client gone): says nothing about Redis.
		c.mu.Lock()
		c.probing = false
		c.mu.Unlock()
		return ctx.Err()
	}
	c.done(err)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrDegraded, err)
	}
	return nil
}

// Ping checks the server (health probe; counts in the breaker like any call).
func (c *Client) Ping(ctx context.Context) error {
	return c.call(ctx, func(ctx context.Context) error { return c.rdb.Ping(ctx).Err() })
}

// ServerTime returns the Redis server's clock.
func (c *Client) ServerTime(ctx context.Context) (time.Time, error) {
	var t time.Time
	err := c.call(ctx, func(ctx context.Context) error {
		var err error
		t, err = c.rdb.Time(ctx).Result()
		return err
	})
	return t, err
}

// run executes a script (EVALSHA, loading it on NOSCRIPT) under the breaker.
func (c *Client) run(ctx context.Context, s *redis.Script, keys []string, args ...any) ([]any, error) {
	var out []any
	err := c.call(ctx, func(ctx context.Context) error {
		res, err := s.Run(ctx, c.rdb, keys, args...).Result()
		if err != nil {
			return err
		}
		switch v := res.(type) {
		case []any:
			out = v
		default:
			out = []any{v}
		}
		return nil
	})
	return out, err
}

func asInt(v any) int64 {
	switch x := v.(type) {
	case int64:
		return x
	case string:
		var n int64
		fmt.Sscan(x, &n)
		return n
	}
	return 0
}
