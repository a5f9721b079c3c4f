// Package traffic owns Switchyard's admission gates on the request path
// (20-resilience §0.1 step 4): the per-connection concurrency slots of
// max_concurrent (§8, Slots) and the opt-in per-limiter-key request queue of
// rate-limit protection (§10, Queues), with the limits it learns from upstream
// x-ratelimit-* headers — and, one step earlier, a client key's own
// requestsPerMinute and maxConcurrentRequests (10-gateway-api §3.3,
// KeyLimiter, with KeyLimits as the in-memory default).
//
// All three sit behind an interface (SlotStore, RateStore, store.go;
// KeyLimiter, keylimits.go) so a shared implementation can hold them for
// several replicas; Slots, Queues and KeyLimits are the in-process ones and
// the default. The combo entry queue uses a Slots of its own, per process by
// spec. Everything here is memory only except the learned limits, which a
// LearnedStore keeps across restarts (learnstore.go: written off the request
// path, at most once a minute per key). The errors it returns are local
// limits (*LimitError, *KeyRefusal): they never penalise a connection,
// provider or model (BD 2).
//
// It imports the standard library, golang.org/x/time/rate and the services
// root (Clock, RateLimitOverrides) only; never an HTTP framework, ORM,
// template engine or services/resilience.
package traffic
