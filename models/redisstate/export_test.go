package redisstate

import "context"

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
