package app

import (
	"context"
	"sync"
	"time"

	"switchyard/services/resilience"
)

// decisionFlushEvery is how often the resilience engine's deferred writes
// run: diagnostics coalesced to one write per connection per second, the
// breakers' batched success leak, and the decisions applied locally while
// the store was unreachable (reconciled extend-only once it answers).
const decisionFlushEvery = time.Second

// decisionFlusher runs Engine.FlushDecisions on a ticker until stopped; the
// final, forced flush is flushResilience's at shutdown. Both modes run it:
// embedded mode takes the same decision path as a fleet.
type decisionFlusher struct {
	stop chan struct{}
	done chan struct{}
	once sync.Once
}

func startDecisionFlusher(e *resilience.Engine, every time.Duration, onErr func(error)) *decisionFlusher {
	f := &decisionFlusher{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(f.done)
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-f.stop:
				return
			case <-tick.C:
				ctx, cancel := context.WithTimeout(context.Background(), every)
				if err := e.FlushDecisions(ctx, false); err != nil {
					onErr(err)
				}
				cancel()
			}
		}
	}()
	return f
}

// Close stops the loop and waits for a flush in progress; a second Close
// (a server closed twice) does nothing.
func (f *decisionFlusher) Close() {
	if f == nil {
		return
	}
	f.once.Do(func() { close(f.stop) })
	<-f.done
}
