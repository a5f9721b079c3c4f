package redisstate

import (
	"context"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

// RenewNow renews (and re-seeds) the live grants of s at once.
func RenewNow(ctx context.Context, s *Slots) error { return s.g.renew(ctx) }

// Waiting is the number of queued waiters of a connection's gate.
func Waiting(ctx context.Context, c *Client, prefix, conn string) int {
	n, _ := c.rdb.ZCard(ctx, prefix+":slot:{"+conn+"}:wq").Result()
	return int(n)
}

// QueueWaiting is the number of queued waiters of a request-queue key.
func QueueWaiting(ctx context.Context, c *Client, prefix, key string) int {
	n, _ := c.rdb.ZCard(ctx, prefix+":rq:{"+key+"}:wq").Result()
	return int(n)
}

// Hooks counts the commands c sends on its own and inside pipelines.
type Hooks struct{ Single, Piped atomic.Int64 }

func (h *Hooks) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *Hooks) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if name := cmd.Name(); name == "evalsha" || name == "eval" {
			h.Single.Add(1)
		}
		return next(ctx, cmd)
	}
}
func (h *Hooks) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.Piped.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}

// CountCommands installs a Hooks on c's connection.
func CountCommands(c *Client) *Hooks {
	h := &Hooks{}
	c.rdb.AddHook(h)
	return h
}

// FlushScripts drops the scripts Redis holds (as a restart does).
func FlushScripts(ctx context.Context, c *Client) error { return c.rdb.ScriptFlush(ctx).Err() }

// QueueRunning is the number of running grants of a request-queue key.
func QueueRunning(ctx context.Context, c *Client, prefix, key string) int {
	n, _ := c.rdb.ZCard(ctx, prefix+":rq:{"+key+"}:run").Result()
	return int(n)
}

// QueueTouched reports whether any state of a request-queue key exists.
func QueueTouched(ctx context.Context, c *Client, prefix, key string) bool {
	base := prefix + ":rq:{" + key + "}"
	n, _ := c.rdb.Exists(ctx, base, base+":run", base+":wq", base+":we", base+":seq").Result()
	return n > 0
}

// Sweep gives idle reserves back at once (Run does it every second).
func (s *Slots) Sweep()     { s.sweep() }
func (k *KeyLimits) Sweep() { k.sweep() }
func (q *Queues) Sweep()    { q.sweep() }

// KeyGrants is the number of concurrency grants of a client key in Redis.
func KeyGrants(ctx context.Context, c *Client, prefix, keyID string) int {
	n, _ := c.rdb.ZCard(ctx, prefix+":kconc:{"+keyID+"}").Result()
	return int(n)
}

// SlotGrants is the number of slot grants of a connection in Redis.
func SlotGrants(ctx context.Context, c *Client, prefix, conn string) int {
	n, _ := c.rdb.ZCard(ctx, prefix+":slot:{"+conn+"}").Result()
	return int(n)
}
