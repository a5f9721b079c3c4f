package services

import (
	"context"
	"errors"
	"sync"
	"time"
)

// coalesceWriteTimeout bounds one background write.
const coalesceWriteTimeout = 10 * time.Second

// Coalescer writes the latest value queued per key on its own goroutine, so
// a caller on the request path only records what changed and never waits
// for the store (scale-out §3.4: pins and LKGP records written off the
// request goroutine, coalesced per key). A key queued again before its
// write started is written once, with the newer value, at its old place in
// the queue; writes of one key happen in the order they were queued. A
// failed write is reported to onErr and not retried: what is coalesced here
// is a preference or a hint that the next change writes again.
type Coalescer[K comparable, V any] struct {
	write func(ctx context.Context, k K, v V) error
	onErr func(error)

	mu      sync.Mutex
	pending map[K]V
	order   []K
	closed  bool

	wmu  sync.Mutex // one write at a time: the loop's and Flush's
	kick chan struct{}
	stop chan struct{}
	done chan struct{}
	once sync.Once
}

// NewCoalescer starts the writer. write stores one value; onErr (may be
// nil) sees its failures.
func NewCoalescer[K comparable, V any](write func(ctx context.Context, k K, v V) error, onErr func(error)) *Coalescer[K, V] {
	c := &Coalescer[K, V]{write: write, onErr: onErr, pending: map[K]V{},
		kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	go c.run()
	return c
}

// Put queues v as k's value, replacing one still queued. It never blocks on
// the store. After Close it does nothing.
func (c *Coalescer[K, V]) Put(k K, v V) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	if _, queued := c.pending[k]; !queued {
		c.order = append(c.order, k)
	}
	c.pending[k] = v
	c.mu.Unlock()
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// Discard drops the queued values match selects (a deletion that makes
// them moot).
func (c *Coalescer[K, V]) Discard(match func(k K, v V) bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	kept := c.order[:0]
	for _, k := range c.order {
		if match(k, c.pending[k]) {
			delete(c.pending, k)
			continue
		}
		kept = append(kept, k)
	}
	c.order = kept
}

// Pending counts the queued values.
func (c *Coalescer[K, V]) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.order)
}

func (c *Coalescer[K, V]) take() (K, V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var k K
	var v V
	if len(c.order) == 0 {
		return k, v, false
	}
	k, c.order = c.order[0], c.order[1:]
	v = c.pending[k]
	delete(c.pending, k)
	return k, v, true
}

// drain writes until nothing is queued and returns the write errors.
func (c *Coalescer[K, V]) drain(ctx context.Context) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	var errs []error
	for {
		k, v, ok := c.take()
		if !ok {
			return errors.Join(errs...)
		}
		wctx, cancel := context.WithTimeout(ctx, coalesceWriteTimeout)
		err := c.write(wctx, k, v)
		cancel()
		if err != nil {
			errs = append(errs, err)
			if c.onErr != nil {
				c.onErr(err)
			}
		}
	}
}

func (c *Coalescer[K, V]) run() {
	defer close(c.done)
	for {
		select {
		case <-c.kick:
			_ = c.drain(context.Background())
		case <-c.stop:
			return
		}
	}
}

// Flush writes everything queued now, in the caller's goroutine, and
// returns the write errors (tests, shutdown).
func (c *Coalescer[K, V]) Flush(ctx context.Context) error { return c.drain(ctx) }

// Close stops the writer and writes what is still queued. Later Puts are
// dropped. It may be called again.
func (c *Coalescer[K, V]) Close(ctx context.Context) error {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.once.Do(func() { close(c.stop) })
	select {
	case <-c.done:
	case <-ctx.Done():
		return ctx.Err()
	}
	return c.drain(ctx)
}
