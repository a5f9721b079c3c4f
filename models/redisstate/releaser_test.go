package redisstate_test

import (
	"context"
	"testing"
	"time"

	"switchyard/models/redisstate"
)

// With the releaser running, a release costs the request no round trip of
// its own: the releases go in pipelines, and the grants they give back are
// free for the fleet once the pipeline ran.
func TestReleasesLeaveTheRequestPath(t *testing.T) {
	_, c := server(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { c.RunReleaser(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	waitReleasing(t, c)

	a := redisstate.NewKeyLimits(c, "", "a", 0)
	hooks := redisstate.CountCommands(c)
	var held []redisstate.KeyDecision
	for range 20 {
		d, err := a.Admit(context.Background(), "k", 0, 20)
		if err != nil || !d.Admitted {
			t.Fatalf("admit: %+v %v", d, err)
		}
		held = append(held, d)
	}
	admits := hooks.Single.Load()
	for _, d := range held {
		a.Release(d)
	}
	until(t, "the 20 grants are free again", func() bool {
		d, err := a.Admit(context.Background(), "k", 0, 20)
		if err != nil || !d.Admitted {
			return false
		}
		a.Release(d)
		return hooks.Piped.Load() >= 20 && freeAll(t, a, 20)
	})
	// Only the admissions (and the polls' admissions) went on their own.
	if got := hooks.Single.Load() - admits; hooks.Piped.Load() < 20 || got == 0 {
		t.Fatalf("single calls %d after the admissions, piped %d: the releases did not go through the releaser", got, hooks.Piped.Load())
	}
}

// freeAll reports whether n grants can be held at once, and gives them back.
func freeAll(t *testing.T, k *redisstate.KeyLimits, n int) bool {
	t.Helper()
	var got []redisstate.KeyDecision
	defer func() {
		for _, d := range got {
			k.Release(d)
		}
	}()
	for range n {
		d, err := k.Admit(context.Background(), "k", 0, n)
		if err != nil || !d.Admitted {
			return false
		}
		got = append(got, d)
	}
	return true
}

// Without a releaser a release goes at once, so it is visible to the next
// admission; releases queued when the releaser stops are still sent; a
// script Redis lost (a restart) is sent again with its source.
func TestReleasesWithoutReleaserAndAtStop(t *testing.T) {
	_, c := server(t)
	a := redisstate.NewKeyLimits(c, "", "a", 0)
	ctx := context.Background()
	d, _ := a.Admit(ctx, "k", 0, 1)
	a.Release(d)
	if d2, _ := a.Admit(ctx, "k", 0, 1); !d2.Admitted {
		t.Fatal("a synchronous release was not visible to the next admission")
	} else {
		d = d2
	}

	rctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { c.RunReleaser(rctx); close(done) }()
	waitReleasing(t, c)
	if err := redisstate.FlushScripts(ctx, c); err != nil {
		t.Fatal(err)
	}
	a.Release(d)
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second): // a hang detector
		t.Fatal("RunReleaser did not return")
	}
	if d3, _ := a.Admit(ctx, "k", 0, 1); !d3.Admitted {
		t.Fatal("the release queued at stop (after a script flush) never reached Redis")
	}
}

func waitReleasing(t *testing.T, c *redisstate.Client) {
	t.Helper()
	until(t, "the releaser runs", c.Releasing)
}
