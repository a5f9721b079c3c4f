// Package redisstate keeps the live counters that several replicas must
// share in Redis (or Valkey, same protocol): max_concurrent slot grants,
// per-key requests-per-minute buckets and concurrency grants, the request
// queue's pacing state, and the provider window gate (scale-out design
// §3.4 rows 3, 8, 9, 10).
//
// Every decision is one Lua script, loaded once and run with EVALSHA, that
// reads the clock of the Redis server (TIME), never a replica's: replicas
// with skewed clocks still share one bucket. Nothing here must survive a
// Redis restart — durable decisions live in PostgreSQL — so Redis may run
// without persistence; after a restart every replica re-seeds the grants it
// holds (Reseed) and buckets start full.
//
// Redis is never fatal. Calls on the request path have short timeouts and no
// retries, and a process-wide breaker (Client) stops calling Redis after a
// few consecutive failures for a couple of seconds, then lets one probe
// through. While it is open every method returns ErrDegraded at once, and
// the caller answers from its local, per-replica fallback.
//
// The package imports go-redis; services never does (the interfaces it
// implements are declared there).
package redisstate
