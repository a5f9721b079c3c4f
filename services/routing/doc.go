// Package routing answers the combo-level question of 30-routing: in which
// order are a combo's entries (or entry × connection candidates) tried?
//
// Each strategy of 30-routing §10 that orders entries is a small type with a
// pure-looking Order method fed by the Request (injected signals: dispatch
// metrics, prices, context windows, the cache affinity key) and, where the
// spec keeps per-combo state (round-robin tickets, weighted stickiness,
// strict-random decks, least-used counters, the LKGP record), by a
// *MemoryState shared by the registry. Randomness comes only from the
// *rand.Rand given to NewRegistry (30-routing §9).
//
// The gateway's use, per request:
//
//	reg := routing.NewRegistry(rng, state)         // once, in app
//	strat, ok := routing.Lookup(reg, combo.Strategy) // !ok → log, priority runs
//	order := strat.Order(req, entries)             // once per request
//	for _, e := range order { … state.OnDispatch / OnSuccess / OnFailure / OnSkip … }
//
// Account selection inside a provider (§11) lives in services/accounts; the
// executors of fusion and pipeline and the candidate-level quota strategies
// are not here. The package imports the standard library and
// switchyard/services (for the strategy descriptions) only; it must not
// import models, handlers, views or app.
package routing
