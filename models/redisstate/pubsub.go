package redisstate

import (
	"context"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// listenFreeNeed delivers the release notices on channels free+<key> to
// onFree and the need notices on need+<key> to onNeed until ctx ends.
func listenFreeNeed(ctx context.Context, rdb redis.UniversalClient, free, need string, onFree, onNeed func(key string)) {
	listen(ctx, func(ctx context.Context) *redis.PubSub { return rdb.PSubscribe(ctx, free+"*", need+"*") },
		func(msg *redis.Message) {
			if key, ok := strings.CutPrefix(msg.Channel, need); ok {
				onNeed(key)
			} else if key, ok := strings.CutPrefix(msg.Channel, free); ok {
				onFree(key)
			}
		})
}

// every calls fn every d until ctx ends.
func every(ctx context.Context, d time.Duration, fn func()) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			fn()
		}
	}
}

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
