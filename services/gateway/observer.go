package gateway

import "time"

// Observer receives the gateway's countable events (metrics). Methods must
// be cheap and never block; a nil Observer is replaced by a no-op.
type Observer interface {
	Attempt(provider, outcome string) // success, failure, aborted
	Failure(provider, reason string)
	Failover(kind string) // connection, target
	Excluded(reason string)
	PoolExhausted(code string)
	TTFB(provider string, d time.Duration)
	EmergencyFallback(outcome string)
	Waited(combo bool)
	// Used reports a dispatch starting on a connection: every attempt,
	// the failed ones too (the dashboard's "last used"; persisted in
	// batches, never per request).
	Used(connectionID string, at time.Time)
	// StoreError reports a store (one of the Store* names) that failed where
	// failing the request would be worse: a write after the outcome was
	// decided (memory already holds the value; the store catches up at its
	// next write), or a shared slot or queue store that could not answer
	// (the request went without that gate). Nothing else reports it.
	StoreError(store string, err error)
}

// Names of the stores a StoreError comes from.
const (
	StoreAffinityPin  = "affinity_pin"
	StoreToolLimit    = "tool_limit"
	StoreSlots        = "slots"
	StoreRequestQueue = "request_queue"
)

type nopObserver struct{}

func (nopObserver) Attempt(string, string)     {}
func (nopObserver) Failure(string, string)     {}
func (nopObserver) Failover(string)            {}
func (nopObserver) Excluded(string)            {}
func (nopObserver) PoolExhausted(string)       {}
func (nopObserver) TTFB(string, time.Duration) {}
func (nopObserver) EmergencyFallback(string)   {}
func (nopObserver) Waited(bool)                {}
func (nopObserver) Used(string, time.Time)     {}
func (nopObserver) StoreError(string, error)   {}

// storeError reports err (nil = nothing) to the observer.
func (g *Gateway) storeError(store string, err error) {
	if err != nil {
		g.obs.StoreError(store, err)
	}
}
