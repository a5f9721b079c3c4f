// Package events keeps the last resilience events of this process in memory
// for the Runtime page's Recent events panel and GET /api/resilience/events
// (50-dashboard §6.8): a breaker that opened, went half-open or closed, a
// connection cooldown set or cleared, a model lockout set or cleared, a
// terminal state set or reset, a lease that ended or moved to another
// connection, an emergency fallback that answered or failed. Events an
// admin's request caused name the admin (WithActor).
//
// The services that decide those transitions (services/resilience,
// services/leases, services/gateway) record into a Recorder they are given
// in app; a nil Recorder records nothing, so a service built without one
// (tests) works as before. Events happen only on state transitions, never
// on a normal successful request, and Record is a copy into a fixed array
// under a mutex: it never blocks on I/O and never allocates.
//
// The ring is per process. With several replicas sharing state each one
// lists the transitions it decided itself: a breaker another replica opened
// reaches this one's mirror through the change feed, not its events.
//
// The package imports the standard library and switchyard/services (for
// the clock) only; it must not import models, handlers, views or app.
package events
