package redisstate

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
)

// listen delivers the messages of the subscriptions subscribe opens to
// handle until ctx ends, subscribing again a second after a lost
// connection. The subscription is closed when ctx ends: go-redis closes a
// PubSub's channel only on Close, so a loop ranging over it would
// otherwise outlive the context and hang the shutdown that waits for it.
func listen(ctx context.Context, subscribe func(context.Context) *redis.PubSub, handle func(*redis.Message)) {
	for ctx.Err() == nil {
		sub := subscribe(ctx)
		stop := context.AfterFunc(ctx, func() { sub.Close() })
		for msg := range sub.Channel(redis.WithChannelHealthCheckInterval(5 * time.Second)) {
			handle(msg)
		}
		if stop() {
			sub.Close()
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second): // resubscribe after a lost connection
		}
	}
}
