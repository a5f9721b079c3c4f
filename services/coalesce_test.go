package services_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"

	"switchyard/services"
)

// A key queued again while an earlier write of another key is running is
// written once, with its latest value; keys keep their queue order; Put
// never waits for the store.
func TestCoalescerWritesLatestValuePerKey(t *testing.T) {
	var mu sync.Mutex
	var got []string
	started, release := make(chan struct{}, 8), make(chan struct{})
	c := services.NewCoalescer(func(_ context.Context, k string, v int) error {
		started <- struct{}{}
		<-release
		mu.Lock()
		got = append(got, k+"="+string(rune('0'+v)))
		mu.Unlock()
		return nil
	}, nil)
	c.Put("a", 1)
	<-started // the writer is inside a=1 and waits
	c.Put("b", 1)
	c.Put("c", 1)
	c.Put("b", 2) // replaces b=1, keeps b before c
	c.Put("a", 3) // queued behind c: a=1 is already being written
	if n := c.Pending(); n != 3 {
		t.Fatalf("pending %d, want 3 (b, c, a)", n)
	}
	close(release)
	if err := c.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	want := []string{"a=1", "b=2", "c=1", "a=3"}
	if !slices.Equal(got, want) {
		t.Fatalf("writes %v, want %v", got, want)
	}
	c.Put("d", 1) // after Close: dropped
	if c.Pending() != 0 {
		t.Fatal("a Put after Close was queued")
	}
}

// Discard drops queued values; Flush writes the rest now and returns the
// errors, which onErr sees too.
func TestCoalescerDiscardFlushAndErrors(t *testing.T) {
	boom := errors.New("boom")
	var seen []error
	var mu sync.Mutex
	block, started := make(chan struct{}), make(chan struct{}, 8)
	c := services.NewCoalescer(func(_ context.Context, k string, v string) error {
		started <- struct{}{}
		<-block
		if v == "bad" {
			return boom
		}
		return nil
	}, func(err error) { mu.Lock(); seen = append(seen, err); mu.Unlock() })
	defer c.Close(context.Background())
	c.Discard(func(string, string) bool { return true }) // nothing queued: no-op
	// Keep the background writer busy on one value so the rest stay queued.
	c.Put("first", "ok")
	<-started
	c.Put("x", "bad")
	c.Put("y", "ok")
	c.Put("z", "drop")
	c.Discard(func(_ string, v string) bool { return v == "drop" })
	close(block)
	err := c.Flush(context.Background())
	if err != nil && !errors.Is(err, boom) {
		t.Fatalf("Flush = %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 1 || !errors.Is(seen[0], boom) {
		t.Fatalf("onErr saw %v, want one boom", seen)
	}
}
