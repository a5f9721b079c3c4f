package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"switchyard/services"
)

// Learned tool limits in a fleet (scale-out §3.4 row 15): a limit learned
// on one replica is published once stored, and every other replica applies
// it to its memory, so the pre-screen of every replica knows it. A clear
// through any replica clears them all. The request path keeps reading
// memory only; publishing runs on its own goroutine.

// Share publishes this process's learned limits on feed and applies the
// other replicas'. Call it once, before traffic. onErr (may be nil) sees
// changes that could not be published.
func (t *ToolLimits) Share(feed services.ChangeFeed, onErr func(error)) {
	t.feed, t.onErr = feed, onErr
	feed.Subscribe(services.ChangeToolLimit, t.follow)
}

type toolLimitPayload struct {
	Provider  string `json:"p"`
	Model     string `json:"m"`
	MaxTools  int    `json:"n"`
	Source    string `json:"s"`
	LearnedAt int64  `json:"l"`
	ExpiresAt int64  `json:"e"`
}

// announce publishes a stored limit, off the caller's goroutine.
func (t *ToolLimits) announce(ctx context.Context, l ToolLimit) {
	if t.feed == nil {
		return
	}
	b, _ := json.Marshal(toolLimitPayload{Provider: l.Provider, Model: l.Model, MaxTools: l.MaxTools, Source: l.Source,
		LearnedAt: l.LearnedAt.UnixMilli(), ExpiresAt: l.ExpiresAt.UnixMilli()})
	t.publish(ctx, services.Change{Kind: services.ChangeToolLimit, Key: l.Provider + "/" + l.Model, Payload: string(b)})
}

// announceClear tells the others every limit is gone.
func (t *ToolLimits) announceClear(ctx context.Context) {
	if t.feed != nil {
		t.publish(ctx, services.Change{Kind: services.ChangeToolLimit, Payload: services.ChangeDeleted})
	}
}

func (t *ToolLimits) publish(ctx context.Context, c services.Change) {
	t.pubs.Add(1)
	go func() {
		defer t.pubs.Done()
		pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if err := t.feed.Publish(pctx, c); err != nil && t.onErr != nil {
			t.onErr(fmt.Errorf("gateway: publish %s: %w", c, err))
		}
	}()
}

// WaitPublished waits for the publishes in flight (tests, shutdown).
func (t *ToolLimits) WaitPublished() { t.pubs.Wait() }

func (t *ToolLimits) follow(ctx context.Context, c services.Change) error {
	switch {
	case c.Key == "" && (c.Payload == "" || c.Origin != ""):
		return t.Reload(ctx) // a resync, or another replica's clear
	case c.Origin == "" || c.Key == "":
		return nil // this process's own change
	}
	var p toolLimitPayload
	if err := json.Unmarshal([]byte(c.Payload), &p); err != nil {
		return fmt.Errorf("gateway: unreadable tool limit change %q: %w", c.Payload, err)
	}
	t.Apply(ToolLimit{Provider: p.Provider, Model: p.Model, MaxTools: p.MaxTools, Source: p.Source,
		LearnedAt: time.UnixMilli(p.LearnedAt).UTC(), ExpiresAt: time.UnixMilli(p.ExpiresAt).UTC()})
	return nil
}

// Apply installs a limit another replica learned, in memory only, unless
// the one held was learned later.
func (t *ToolLimits) Apply(l ToolLimit) {
	k := [2]string{l.Provider, l.Model}
	t.mu.Lock()
	defer t.mu.Unlock()
	if cur, ok := t.m[k]; ok && cur.LearnedAt.After(l.LearnedAt) {
		return
	}
	t.m[k] = l
}

// Reload replaces memory with the stored limits: a resync, or a clear made
// through another replica.
func (t *ToolLimits) Reload(ctx context.Context) error {
	if t.store == nil {
		return nil
	}
	list, err := t.store.LoadToolLimits(ctx)
	if err != nil {
		return fmt.Errorf("gateway: reload tool limits: %w", err)
	}
	m := make(map[[2]string]ToolLimit, len(list))
	for _, l := range list {
		m[[2]string{l.Provider, l.Model}] = l
	}
	t.mu.Lock()
	t.m = m
	t.mu.Unlock()
	return nil
}
