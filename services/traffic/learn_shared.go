package traffic

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"switchyard/services"
)

// Learned rate limits in a fleet (scale-out §3.4 row 9, the PostgreSQL
// half): what one replica learned from an upstream's rate-limit headers
// reaches the others with its debounced write (at most once per key per
// PersistEvery), so a replica that has not yet proxied to a key still
// spaces and throttles its requests by what the others learned. The
// request path is unchanged: Learn only marks entries; the persister
// writes and publishes.

// ShareLearned publishes every stored learned limit on feed and applies the
// other replicas' (newer observations win, as in Restore). Call it once,
// before traffic. onErr (may be nil) sees changes that could not be
// published.
func (q *Queues) ShareLearned(feed services.ChangeFeed, onErr func(error)) {
	q.learnedFeed, q.learnedOnErr = feed, onErr
	feed.Subscribe(services.ChangeLearnedLimit, q.followLearned)
}

type learnedPayload struct {
	Limit      int   `json:"l"`
	Remaining  int   `json:"r"`
	ResetAt    int64 `json:"ra,omitempty"` // Unix ms; 0 unknown
	MinTimeMs  int64 `json:"m"`
	ObservedAt int64 `json:"o"` // Unix ms
}

func (q *Queues) announceLearned(ctx context.Context, stored []LearnedLimit) {
	if q.learnedFeed == nil {
		return
	}
	for _, l := range stored {
		p := learnedPayload{Limit: l.LimitRequests, Remaining: l.Remaining, MinTimeMs: l.MinTimeMs, ObservedAt: l.ObservedAt.UnixMilli()}
		if !l.ResetAt.IsZero() {
			p.ResetAt = l.ResetAt.UnixMilli()
		}
		b, _ := json.Marshal(p)
		c := services.Change{Kind: services.ChangeLearnedLimit, Key: l.Key, Payload: string(b)}
		if err := q.learnedFeed.Publish(ctx, c); err != nil && q.learnedOnErr != nil {
			q.learnedOnErr(fmt.Errorf("traffic: publish learned limit: %w", err))
		}
	}
}

func (q *Queues) followLearned(ctx context.Context, c services.Change) error {
	switch {
	case c.Key == "":
		_, err := q.LoadLearned(ctx)
		return err
	case c.Origin == "":
		return nil // this process's own write
	}
	var p learnedPayload
	if err := json.Unmarshal([]byte(c.Payload), &p); err != nil {
		return fmt.Errorf("traffic: unreadable learned limit change %q: %w", c.Payload, err)
	}
	l := LearnedLimit{Key: c.Key, LimitRequests: p.Limit, Remaining: p.Remaining, MinTimeMs: p.MinTimeMs,
		ObservedAt: time.UnixMilli(p.ObservedAt).UTC()}
	if p.ResetAt != 0 {
		l.ResetAt = time.UnixMilli(p.ResetAt).UTC()
	}
	q.Restore([]LearnedLimit{l})
	return nil
}
