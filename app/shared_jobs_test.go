package app

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"
)

type fakeLocker struct {
	mine bool
	err  error
	asks []string
}

func (f *fakeLocker) Holds(_ context.Context, job string) (bool, error) {
	f.asks = append(f.asks, job)
	return f.mine, f.err
}

// A singleton job runs on the replica holding its lock only; the others run
// its memory half (if any); a replica that cannot ask skips the tick.
func TestSingletonJobRunsOnTheHolderOnly(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	var ran, others int
	j := singletonJob{name: "pins_sweep", every: time.Minute,
		run:    func(context.Context) error { ran++; return nil },
		others: func() { others++ }}
	ctx := context.Background()
	holder, other, down := &fakeLocker{mine: true}, &fakeLocker{}, &fakeLocker{err: errors.New("connection refused")}
	runOnce(ctx, holder, j, log)
	runOnce(ctx, other, j, log)
	runOnce(ctx, down, j, log)
	if ran != 1 || others != 1 {
		t.Fatalf("ran %d, others %d; want 1 and 1", ran, others)
	}
	if len(holder.asks) != 1 || holder.asks[0] != "pins_sweep" {
		t.Fatalf("asked %v", holder.asks)
	}
}
