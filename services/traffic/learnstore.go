package traffic

import (
	"context"
	"fmt"
	"time"
)

// LearnedStore keeps learned rate limits across restarts
// (learned_rate_limits, 20-resilience §10 and §15); models implements it.
type LearnedStore interface {
	// LoadLearnedLimits returns every stored limit.
	LoadLearnedLimits(ctx context.Context) ([]LearnedLimit, error)
	// SaveLearnedLimits inserts or replaces the limits of their keys.
	SaveLearnedLimits(ctx context.Context, limits []LearnedLimit) error
	// DeleteLearnedLimits deletes the limits of keys; missing keys are no
	// error.
	DeleteLearnedLimits(ctx context.Context, keys []string) error
}

// PersistEvery is the least time between two writes of one key's learned
// limit (the spec's 60 s debounce): up to that much learning may be lost in a
// crash.
const PersistEvery = 60 * time.Second

// UseLearnedStore makes the queues persist their learned limits in store:
// PersistLearned and FlushLearned write them, Reset deletes them, and
// LoadLearned restores them at start. Call it before the queues are used.
func (q *Queues) UseLearnedStore(store LearnedStore) { q.learnedStore = store }

// LoadLearned restores the stored learned limits (Restore: entries older
// than 24 h are ignored) and returns how many it loaded.
func (q *Queues) LoadLearned(ctx context.Context) (int, error) {
	if q.learnedStore == nil {
		return 0, nil
	}
	limits, err := q.learnedStore.LoadLearnedLimits(ctx)
	if err != nil {
		return 0, fmt.Errorf("traffic: load learned limits: %w", err)
	}
	return q.Restore(limits), nil
}

// PersistLearned stores the learned limits that changed since they were
// last stored, each key at most once per PersistEvery (the queue's clock),
// and returns how many it wrote. The request path only marks entries dirty;
// a background loop calls this. On error nothing is marked stored, so the
// next call tries again.
func (q *Queues) PersistLearned(ctx context.Context) (int, error) {
	return q.persist(ctx, false)
}

// FlushLearned is PersistLearned without the per-key spacing: at shutdown,
// so a clean restart loses no learning.
func (q *Queues) FlushLearned(ctx context.Context) (int, error) {
	return q.persist(ctx, true)
}

func (q *Queues) persist(ctx context.Context, all bool) (int, error) {
	store := q.learnedStore
	if store == nil {
		return 0, nil
	}
	q.persistMu.Lock()
	defer q.persistMu.Unlock()
	q.mu.Lock()
	now := q.clock.Now()
	var due []LearnedLimit
	for key, e := range q.learned {
		if !e.observedAt.After(e.savedObservedAt) {
			continue
		}
		if !all && !e.savedAt.IsZero() && now.Sub(e.savedAt) < PersistEvery {
			continue
		}
		due = append(due, e.snapshot(key, now))
	}
	q.mu.Unlock()
	if len(due) == 0 {
		return 0, nil
	}
	if err := store.SaveLearnedLimits(ctx, due); err != nil {
		return 0, fmt.Errorf("traffic: store %d learned limits: %w", len(due), err)
	}
	q.mu.Lock()
	for _, l := range due {
		if e := q.learned[l.Key]; e != nil {
			e.savedObservedAt, e.savedAt = l.ObservedAt, now
		}
	}
	q.mu.Unlock()
	q.announceLearned(ctx, due)
	return len(due), nil
}
