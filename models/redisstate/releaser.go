package redisstate

import (
	"context"
	"strings"

	"github.com/redis/go-redis/v9"
)

// A release gives a grant back (a slot, a queue run, a key's concurrency).
// The request it belonged to is over, so nobody waits for its answer: with
// a releaser running, releases leave the request path and go to Redis in
// pipelined batches, one round trip for all the releases that piled up
// meanwhile. A release that never arrives (Redis away, the process killed)
// lapses with the grant's TTL, as a failed synchronous one always did.

// releaseOp is one queued release.
type releaseOp struct {
	script *redis.Script
	keys   []string
	args   []any
}

// releaseQueue bounds the releases waiting for the releaser; when it is
// full a release is sent at once, on the caller's goroutine.
const releaseQueue = 4096

// releaseBatch bounds one pipeline.
const releaseBatch = 128

// release sends one release: queued for the releaser when it runs, else
// at once.
func (c *Client) release(s *redis.Script, keys []string, args ...any) {
	if c.releasing.Load() {
		select {
		case c.releases <- releaseOp{script: s, keys: keys, args: args}:
			return
		default: // full: send it here
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.opts.CallTimeout)
	defer cancel()
	_, _ = c.run(ctx, s, keys, args...)
}

// RunReleaser sends queued releases until ctx ends, then the ones still
// queued (bounded by one call timeout per batch). One replica runs one.
func (c *Client) RunReleaser(ctx context.Context) {
	c.releasing.Store(true)
	batch := make([]releaseOp, 0, releaseBatch)
	for {
		select {
		case <-ctx.Done():
			c.releasing.Store(false) // later releases go at once
			for {
				batch = c.gather(batch[:0])
				if len(batch) == 0 {
					return
				}
				c.sendReleases(batch)
			}
		case op := <-c.releases:
			c.sendReleases(c.gather(append(batch[:0], op)))
		}
	}
}

// gather adds the releases queued now to batch, up to releaseBatch.
func (c *Client) gather(batch []releaseOp) []releaseOp {
	for len(batch) < releaseBatch {
		select {
		case op := <-c.releases:
			batch = append(batch, op)
		default:
			return batch
		}
	}
	return batch
}

// sendReleases runs a batch as one pipeline of EVALSHA; a script Redis
// does not hold yet (after a restart) is sent again with its source.
func (c *Client) sendReleases(batch []releaseOp) {
	ctx, cancel := context.WithTimeout(context.Background(), c.opts.CallTimeout)
	defer cancel()
	_ = c.call(ctx, func(ctx context.Context) error {
		pipe := c.rdb.Pipeline()
		cmds := make([]*redis.Cmd, len(batch))
		for i, op := range batch {
			cmds[i] = op.script.EvalSha(ctx, pipe, op.keys, op.args...)
		}
		if _, err := pipe.Exec(ctx); err != nil && !noScript(err) {
			return err
		}
		for i, cmd := range cmds {
			if err := cmd.Err(); err != nil && noScript(err) {
				if err := batch[i].script.Run(ctx, c.rdb, batch[i].keys, batch[i].args...).Err(); err != nil && err != redis.Nil {
					return err
				}
			}
		}
		return nil
	})
}

func noScript(err error) bool { return err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT") }

// Releasing reports whether a releaser takes the releases now.
func (c *Client) Releasing() bool { return c.releasing.Load() }
