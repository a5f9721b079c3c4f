package events_test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"switchyard/services/events"
)

// stepClock moves one second on every Now.
type stepClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *stepClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(time.Second)
	return c.t
}

func (c *stepClock) Wait(ctx context.Context, _ time.Duration) error { return ctx.Err() }

var t0 = time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)

func TestRingKeepsTheLast50NewestFirst(t *testing.T) {
	r := events.NewRing(&stepClock{t: t0})
	if got := r.Snapshot(); len(got) != 0 {
		t.Fatalf("fresh ring holds %d events", len(got))
	}
	r.Record(events.Event{Type: events.CooldownSet, ConnectionID: "c0"})
	if got := r.Snapshot(); len(got) != 1 || got[0].ConnectionID != "c0" || !got[0].At.Equal(t0.Add(time.Second)) {
		t.Fatalf("one event: %+v", got)
	}
	for i := 1; i < 120; i++ {
		r.Record(events.Event{Type: events.CooldownSet, ConnectionID: "c" + strconv.Itoa(i)})
	}
	got := r.Snapshot()
	if len(got) != events.Capacity || events.Capacity != 50 {
		t.Fatalf("ring holds %d events, want 50", len(got))
	}
	for i, e := range got {
		if want := "c" + strconv.Itoa(119-i); e.ConnectionID != want {
			t.Fatalf("event %d is %s, want %s (newest first)", i, e.ConnectionID, want)
		}
		if i > 0 && !e.At.Before(got[i-1].At) {
			t.Fatalf("event %d at %v is not older than %v", i, e.At, got[i-1].At)
		}
	}
	// The snapshot is a copy: recording more leaves it as it was.
	r.Record(events.Event{Type: events.LeaseEnded, LeaseID: "17"})
	if got[0].ConnectionID != "c119" {
		t.Fatal("a snapshot changed after a later Record")
	}
}

func TestRingKeepsAGivenTime(t *testing.T) {
	r := events.NewRing(&stepClock{t: t0})
	at := t0.Add(-time.Hour)
	r.Record(events.Event{Type: events.BreakerOpened, Provider: "openai", At: at})
	if got := r.Snapshot(); !got[0].At.Equal(at) {
		t.Fatalf("at %v, want %v", got[0].At, at)
	}
}

func TestRingConcurrentRecord(t *testing.T) {
	r := events.NewRing(&stepClock{t: t0})
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				r.Record(events.Event{Type: events.CooldownSet, ConnectionID: "g" + strconv.Itoa(g)})
				if i%50 == 0 {
					_ = r.Snapshot()
				}
			}
		}()
	}
	wg.Wait()
	got := r.Snapshot()
	if len(got) != events.Capacity {
		t.Fatalf("%d events after concurrent records", len(got))
	}
	for _, e := range got {
		if e.Type != events.CooldownSet || e.ConnectionID == "" || e.At.IsZero() {
			t.Fatalf("torn event %+v", e)
		}
	}
}

func TestSubject(t *testing.T) {
	for _, tc := range []struct {
		e          events.Event
		prov, conn string
		want       string
	}{
		{events.Event{Type: events.BreakerOpened, Provider: "openai"}, "OpenAI", "", "OpenAI"},
		{events.Event{Type: events.BreakerClosed, Provider: "openai"}, "", "", "openai"},
		{events.Event{Type: events.CooldownSet, Provider: "openai", ConnectionID: "c_7"}, "OpenAI", "team-1", "team-1 · OpenAI"},
		{events.Event{Type: events.TerminalReset, ConnectionID: "c_7"}, "", "", "c_7"},
		{events.Event{Type: events.LockoutSet, ConnectionID: "c_7", Model: "gpt-4o"}, "OpenAI", "team-1", "gpt-4o on team-1"},
		{events.Event{Type: events.LeaseEnded, ConnectionID: "c_3", LeaseID: "17"}, "GLM", "glm-1", "lease 17 on glm-1"},
		{events.Event{Type: events.EmergencyFallback, Model: "demo", Target: "openai/gpt-4o-mini"}, "", "", "demo → openai/gpt-4o-mini"},
	} {
		if got := tc.e.Subject(tc.prov, tc.conn); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.e.Type, got, tc.want)
		}
	}
}

func BenchmarkRecord(b *testing.B) {
	r := events.NewRing(&stepClock{t: t0})
	e := events.Event{Type: events.CooldownSet, Provider: "openai", ConnectionID: "c_7", Cause: "rate_limit", Status: 429, At: t0}
	b.ReportAllocs()
	for b.Loop() {
		r.Record(e)
	}
}
