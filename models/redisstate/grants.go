package redisstate

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// grants is the set of live grants this replica holds in Redis (slots,
// key concurrency, queue runs), renewed while they run and put back after a
// Redis restart. A crashed replica renews nothing, so its grants lapse within
// the TTL and their slots return to the fleet.
type grants struct {
	c       *Client
	replica string
	ttl     time.Duration
	seq     atomic.Uint64

	mu   sync.Mutex
	live map[string]string // grant id → the grant set's key
}

func newGrants(c *Client, replica string, ttl time.Duration) *grants {
	g := &grants{c: c, replica: replica, ttl: ttl, live: make(map[string]string)}
	c.OnUp(g.reseed)
	return g
}

// newID returns a grant id unique in the fleet.
func (g *grants) newID() string {
	return g.replica + ":" + strconv.FormatUint(g.seq.Add(1), 36)
}

func (g *grants) hold(id, key string) {
	g.mu.Lock()
	g.live[id] = key
	g.mu.Unlock()
}

func (g *grants) drop(id string) {
	g.mu.Lock()
	delete(g.live, id)
	g.mu.Unlock()
}

// renewBatch bounds one renew script's keys.
const renewBatch = 256

// renew extends every live grant by the TTL; it also re-adds grants that a
// restarted Redis lost. Errors are left to the breaker.
func (g *grants) renew(ctx context.Context) error {
	g.mu.Lock()
	keys := make([]string, 0, len(g.live))
	args := make([]any, 0, len(g.live)+1)
	args = append(args, g.ttl.Milliseconds())
	for id, key := range g.live {
		keys = append(keys, key)
		args = append(args, id)
	}
	g.mu.Unlock()
	for len(keys) > 0 {
		n := min(len(keys), renewBatch)
		batch := append([]any{args[0]}, args[1:n+1]...)
		if _, err := g.c.run(ctx, renewGrants, keys[:n], batch...); err != nil {
			return err
		}
		keys, args = keys[n:], append([]any{args[0]}, args[n+1:]...)
	}
	return nil
}

// reseed runs when Redis answers again after an outage.
func (g *grants) reseed(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	_ = g.renew(ctx)
}

// run renews the live grants every third of the TTL until ctx ends.
func (g *grants) run(ctx context.Context) {
	every(ctx, g.ttl/3, func() { _ = g.renew(ctx) })
}
