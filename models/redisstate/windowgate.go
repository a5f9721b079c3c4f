package redisstate

import (
	"context"
	"encoding/json"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"switchyard/services/resilience"
)

// WindowGate is the fleet-wide counter of the provider window gate
// (resilience.WindowCounter; scale-out §3.4 row 3): each provider's failure
// instants in a sorted set on the Redis server's clock, its deadline in a key
// that expires with it, and every change published so each replica's local
// gate (the mirror the request path reads) follows within a round trip.
type WindowGate struct {
	c       *Client
	prefix  string
	replica string
	seq     atomic.Uint64
	mirror  *resilience.WindowGate
}

var _ resilience.WindowCounter = (*WindowGate)(nil)

// NewWindowGate returns the shared counter; mirror is this replica's gate,
// which receives the other replicas' changes.
func NewWindowGate(c *Client, prefix, replica string, mirror *resilience.WindowGate) *WindowGate {
	if prefix == "" {
		prefix = "sy"
	}
	return &WindowGate{c: c, prefix: prefix, replica: replica, mirror: mirror}
}

type gateEvent struct {
	Replica  string `json:"r"`
	Type     string `json:"t"` // fail, close, rule, clear, clearall
	Provider string `json:"p,omitempty"`
	UntilMs  int64  `json:"u,omitempty"`
	Waitable bool   `json:"w,omitempty"`
}

func (w *WindowGate) keys(provider string) (failures, until string) {
	base := w.prefix + ":wg:{" + provider + "}"
	return base, base + ":until"
}

func (w *WindowGate) channel() string { return w.prefix + ":wg:events" }

func (w *WindowGate) publish(ctx context.Context, ev gateEvent) {
	ev.Replica = w.replica
	b, _ := json.Marshal(ev)
	_ = w.c.call(ctx, func(ctx context.Context) error { return w.c.rdb.Publish(ctx, w.channel(), b).Err() })
}

// CountFailure implements resilience.WindowCounter.
func (w *WindowGate) CountFailure(ctx context.Context, provider string, threshold int, window, cooldown time.Duration, waitable bool) (time.Time, error) {
	failures, until := w.keys(provider)
	member := w.replica + ":" + strconv.FormatUint(w.seq.Add(1), 36) + ":" + strconv.FormatInt(time.Now().UnixNano(), 36)
	wait := 0
	if waitable {
		wait = 1
	}
	res, err := w.c.run(ctx, windowFailure, []string{failures, until}, member, threshold, window.Milliseconds(), cooldown.Milliseconds(), wait)
	if err != nil {
		return time.Time{}, err
	}
	if asInt(res[0]) == 1 {
		u := time.UnixMilli(asInt(res[1]))
		w.publish(ctx, gateEvent{Type: "close", Provider: provider, UntilMs: u.UnixMilli(), Waitable: waitable})
		return u, nil
	}
	w.publish(ctx, gateEvent{Type: "fail", Provider: provider})
	return time.Time{}, nil
}

// CloseProvider implements resilience.WindowCounter.
func (w *WindowGate) CloseProvider(ctx context.Context, provider string, cooldown time.Duration) (time.Time, error) {
	_, until := w.keys(provider)
	res, err := w.c.run(ctx, windowClose, []string{until}, cooldown.Milliseconds(), 0)
	if err != nil {
		return time.Time{}, err
	}
	u := time.UnixMilli(asInt(res[1]))
	w.publish(ctx, gateEvent{Type: "rule", Provider: provider, UntilMs: u.UnixMilli()})
	return u, nil
}

// ClearWindow implements resilience.WindowCounter.
func (w *WindowGate) ClearWindow(ctx context.Context, provider string) error {
	failures, _ := w.keys(provider)
	if err := w.c.call(ctx, func(ctx context.Context) error { return w.c.rdb.Del(ctx, failures).Err() }); err != nil {
		return err
	}
	w.publish(ctx, gateEvent{Type: "clear", Provider: provider})
	return nil
}

// ClearAll implements resilience.WindowCounter.
func (w *WindowGate) ClearAll(ctx context.Context) error {
	err := w.c.call(ctx, func(ctx context.Context) error {
		iter := w.c.rdb.Scan(ctx, 0, w.prefix+":wg:{*", 256).Iterator()
		var keys []string
		for iter.Next(ctx) {
			keys = append(keys, iter.Val())
		}
		if err := iter.Err(); err != nil || len(keys) == 0 {
			return err
		}
		return w.c.rdb.Del(ctx, keys...).Err()
	})
	if err != nil {
		return err
	}
	w.publish(ctx, gateEvent{Type: "clearall"})
	return nil
}

// Run applies the other replicas' changes to the mirror until ctx ends.
func (w *WindowGate) Run(ctx context.Context) {
	listen(ctx, func(ctx context.Context) *redis.PubSub { return w.c.rdb.Subscribe(ctx, w.channel()) },
		func(msg *redis.Message) {
			var ev gateEvent
			if json.Unmarshal([]byte(msg.Payload), &ev) != nil || ev.Replica == w.replica {
				return
			}
			w.apply(ev)
		})
}

func (w *WindowGate) apply(ev gateEvent) {
	switch ev.Type {
	case "fail":
		w.mirror.MirrorFailure(ev.Provider, "")
	case "close":
		w.mirror.MirrorClose(ev.Provider, "", time.UnixMilli(ev.UntilMs), ev.Waitable)
	case "rule":
		w.mirror.MirrorRule(ev.Provider, time.UnixMilli(ev.UntilMs))
	case "clear":
		w.mirror.MirrorSuccess(ev.Provider)
	case "clearall":
		w.mirror.MirrorClear()
	}
}
