// Package feeds stands in for the shared change feed in tests of one
// process: several replicas' caches joined the way models.PGFeed joins them.
// It imports services only, so the tests of any package below models can
// use it.
package feeds

import (
	"context"
	"sync"

	"switchyard/services"
)

// Fleet stands in for the PostgreSQL change feed of several replicas
// in one process: each replica has its own services.LocalFeed; a Publish
// delivers to the publisher's subscribers first (Origin ""), then to every
// other replica's with Origin set to the publisher's name, as
// models.PGFeed's listener does. Paused, the cross-replica deliveries wait
// in order until Resume (a notification in flight); Drop loses them (a
// listener that was disconnected).
type Fleet struct {
	names []string
	local []*services.LocalFeed

	mu     sync.Mutex
	paused bool
	queue  []queued
	sent   int // changes delivered to another replica
}

type queued struct {
	to int
	c  services.Change
}

// NewFleet returns one feed per replica name.
func New(names ...string) *Fleet {
	f := &Fleet{names: names}
	for range names {
		f.local = append(f.local, services.NewLocalFeed(nil))
	}
	return f
}

// Feed is replica i's change feed.
func (f *Fleet) Feed(i int) services.ChangeFeed { return fleetSide{f: f, i: i} }

// Pause holds the cross-replica deliveries until Resume.
func (f *Fleet) Pause() {
	f.mu.Lock()
	f.paused = true
	f.mu.Unlock()
}

// Resume delivers what waited, in order, and lets later changes through.
func (f *Fleet) Resume(ctx context.Context) {
	f.mu.Lock()
	f.paused = false
	q := f.queue
	f.queue = nil
	f.mu.Unlock()
	for _, d := range q {
		f.deliver(ctx, d)
	}
}

// Drop forgets what waited (and stays paused).
func (f *Fleet) Drop() {
	f.mu.Lock()
	f.queue = nil
	f.mu.Unlock()
}

// Sent counts the changes delivered from one replica to another.
func (f *Fleet) Sent() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.sent
}

func (f *Fleet) deliver(ctx context.Context, d queued) {
	f.mu.Lock()
	f.sent++
	f.mu.Unlock()
	_ = f.local[d.to].Publish(ctx, d.c)
}

type fleetSide struct {
	f *Fleet
	i int
}

func (s fleetSide) Publish(ctx context.Context, c services.Change) error {
	err := s.f.local[s.i].Publish(ctx, c)
	c.Origin = s.f.names[s.i]
	for j := range s.f.local {
		if j == s.i {
			continue
		}
		d := queued{to: j, c: c}
		s.f.mu.Lock()
		if s.f.paused {
			s.f.queue = append(s.f.queue, d)
			s.f.mu.Unlock()
			continue
		}
		s.f.mu.Unlock()
		s.f.deliver(ctx, d)
	}
	return err
}

func (s fleetSide) Subscribe(kind services.ChangeKind, h services.ChangeHandler) {
	s.f.local[s.i].Subscribe(kind, h)
}

func (s fleetSide) Resync(ctx context.Context, kind services.ChangeKind) error {
	return s.f.local[s.i].Resync(ctx, kind)
}
