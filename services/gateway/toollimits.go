package gateway

import (
	"context"
	"fmt"
	"sync"
	"time"

	"switchyard/services"
)

// ToolLimit is a learned maximum tool count of (provider, model) (20-resilience §13.2).
type ToolLimit struct {
	Provider  string
	Model     string
	MaxTools  int
	Source    string // parsed or inferred
	LearnedAt time.Time
	ExpiresAt time.Time
}

// ToolLimitStore persists learned limits (24 h TTL, survives restart).
type ToolLimitStore interface {
	LoadToolLimits(ctx context.Context) ([]ToolLimit, error)
	SaveToolLimit(ctx context.Context, l ToolLimit) error
	DeleteToolLimits(ctx context.Context) (int, error)
}

// ToolLimits keeps learned limits in memory with write-through.
type ToolLimits struct {
	clock services.Clock
	store ToolLimitStore
	mu    sync.RWMutex
	m     map[[2]string]ToolLimit

	// feed shares learned limits with the other replicas of a fleet
	// (Share, toollimits_shared.go); nil in a single process.
	feed  services.ChangeFeed
	onErr func(error)
	pubs  sync.WaitGroup
}

const toolLimitTTL = 24 * time.Hour

// NewToolLimits loads stored limits.
func NewToolLimits(ctx context.Context, clock services.Clock, store ToolLimitStore) (*ToolLimits, error) {
	t := &ToolLimits{clock: clock, store: store, m: map[[2]string]ToolLimit{}}
	if store != nil {
		list, err := store.LoadToolLimits(ctx)
		if err != nil {
			return nil, err
		}
		for _, l := range list {
			t.m[[2]string{l.Provider, l.Model}] = l
		}
	}
	return t, nil
}

// Get returns a live limit.
func (t *ToolLimits) Get(provider, model string) (ToolLimit, bool) {
	if t == nil {
		return ToolLimit{}, false
	}
	t.mu.RLock()
	l, ok := t.m[[2]string{provider, model}]
	t.mu.RUnlock()
	if !ok || !t.clock.Now().Before(l.ExpiresAt) {
		return ToolLimit{}, false
	}
	return l, true
}

// Learn records a limit from a tool_limit rejection: the parsed number, else
// the request's tool count − 1. The limit applies at once; the error is the
// store's (write-through after memory).
func (t *ToolLimits) Learn(ctx context.Context, provider, model string, parsed, toolCount int) error {
	if t == nil {
		return nil
	}
	l := ToolLimit{Provider: provider, Model: model, MaxTools: parsed, Source: "parsed"}
	if parsed <= 0 {
		l.MaxTools, l.Source = toolCount-1, "inferred"
	}
	if l.MaxTools < 0 {
		l.MaxTools = 0
	}
	return t.put(ctx, l)
}

// Succeeded raises an inferred limit after a success with k tools; the
// error is the store's, as for Learn.
func (t *ToolLimits) Succeeded(ctx context.Context, provider, model string, k int) error {
	if t == nil || k == 0 {
		return nil
	}
	l, ok := t.Get(provider, model)
	if !ok || l.Source != "inferred" || l.MaxTools >= k {
		return nil
	}
	l.MaxTools = k
	return t.put(ctx, l)
}

func (t *ToolLimits) put(ctx context.Context, l ToolLimit) error {
	now := t.clock.Now().UTC()
	l.LearnedAt, l.ExpiresAt = now, now.Add(toolLimitTTL)
	t.mu.Lock()
	t.m[[2]string{l.Provider, l.Model}] = l
	t.mu.Unlock()
	if t.store == nil {
		return nil
	}
	if err := t.store.SaveToolLimit(context.WithoutCancel(ctx), l); err != nil {
		return fmt.Errorf("gateway: save tool limit %s/%s: %w", l.Provider, l.Model, err)
	}
	t.announce(ctx, l)
	return nil
}

// All lists live limits (health report).
func (t *ToolLimits) All() []ToolLimit {
	now := t.clock.Now()
	t.mu.RLock()
	defer t.mu.RUnlock()
	var out []ToolLimit
	for _, l := range t.m {
		if now.Before(l.ExpiresAt) {
			out = append(out, l)
		}
	}
	return out
}

// Clear forgets every learned limit, stored ones first: when the delete
// fails nothing is forgotten (a limit cleared only in memory would return
// at the next start).
func (t *ToolLimits) Clear(ctx context.Context) (int, error) {
	if t.store != nil {
		if _, err := t.store.DeleteToolLimits(ctx); err != nil {
			return 0, fmt.Errorf("gateway: clear tool limits: %w", err)
		}
	}
	t.mu.Lock()
	n := len(t.m)
	t.m = map[[2]string]ToolLimit{}
	t.mu.Unlock()
	t.announceClear(ctx)
	return n, nil
}

// ToolLimits returns the learned tool limits.
func (g *Gateway) ToolLimits() *ToolLimits { return g.tools }
