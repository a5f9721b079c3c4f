package resilience

import "context"

// WindowGateStore is where the provider window gate (20-resilience §3)
// keeps its state. *WindowGate is the in-process implementation and the
// default; a shared one (Redis, scale-out §3.4 row 3) counts final failures
// fleet-wide so a gate set through one replica holds on all of them.
//
// Block runs for every combo target the gateway pre-screens, so it must
// answer from memory, allocation-free, with a lock-free empty check first: a
// shared implementation keeps a mirror of the live deadlines and reads only
// that. The writes run on failures and on successes of a provider that has a
// live entry; they take the request's context, read time from the
// implementation (a shared one uses its server's clock), and return an error
// wrapping services.ErrUnavailable when the shared state cannot be reached.
// A shared implementation should then apply the write to its local mirror
// (a *WindowGate, which Block reads anyway), so an outage degrades the gate
// to per-process behaviour; the engine never fails a request for a gate
// error, it counts it (EngineHooks.StoreError). Entries and Sweep read the
// local view.
type WindowGateStore interface {
	// Block reports whether the gate excludes a target of provider (pinning
	// connectionID, or "") and how long for.
	Block(provider, connectionID string) (WindowBlock, bool)
	// RecordFinalFailure counts the final failure of a combo target.
	RecordFinalFailure(ctx context.Context, provider string, profile Profile, connectionID string, reason Reason, perModelQuota500 bool) error
	// ProviderScope applies a rule with scope provider.
	ProviderScope(ctx context.Context, provider string, profile Profile, cooldownMs int64) error
	// Success empties the provider's window and ends a connection-level entry.
	Success(ctx context.Context, provider, connectionID string) error
	// Entries lists the live entries, by key.
	Entries() []WindowGateStatus
	// Clear drops every entry and returns how many were live.
	Clear(ctx context.Context) (int, error)
	// Sweep drops dead entries of the local view and returns how many.
	Sweep() int
	// Enabled reports providerCooldown.enabled as the gate reads it.
	Enabled() bool
}

var _ WindowGateStore = (*WindowGate)(nil)
