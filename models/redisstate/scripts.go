package redisstate

import "github.com/redis/go-redis/v9"

// Every script starts from the server's clock, in milliseconds, so all
// replicas count against one time line whatever their own clocks say.
const nowLua = `local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
`

// purgeLua drops lapsed grants (score = expiry) from KEYS[g] and lapsed
// waiters (KEYS[e] = expiry by waiter, KEYS[q] = arrival order).
const purgeLua = `local function purge(grants, waitq, waitexp)
  if grants then redis.call('ZREMRANGEBYSCORE', grants, '-inf', now) end
  if waitq then
    local gone = redis.call('ZRANGEBYSCORE', waitexp, '-inf', now)
    for _, w in ipairs(gone) do
      redis.call('ZREM', waitq, w)
      redis.call('ZREM', waitexp, w)
    end
  end
end
`

// slotAcquire takes a max_concurrent slot of one connection, with a FIFO of
// waiters shared by every replica.
//
// KEYS: 1 grants (member grant id, score expiry), 2 waiter order (score
// arrival), 3 waiter expiry, 4 arrival counter.
// ARGV: 1 grant id, 2 limit, 3 grant TTL ms, 4 waiter id ("" on the first
// try), 5 queue depth, 6 waiter TTL ms.
// Returns {status, in flight, waiting}: status 1 granted, 0 queued (wait for
// a release and try again with the waiter id), -1 queue full, -2 the waiter
// lapsed (it waited without asking for longer than its TTL).
var slotAcquire = redis.NewScript(nowLua + purgeLua + slotAcquireLua)

// slotAcquireLua is slotAcquire's body, also run by dispatchAdmit.
const slotAcquireLua = `
purge(KEYS[1], KEYS[2], KEYS[3])
local limit, ttl = tonumber(ARGV[2]), tonumber(ARGV[3])
local depth, wttl = tonumber(ARGV[5]), tonumber(ARGV[6])
local held = redis.call('ZCARD', KEYS[1])
local waiting = redis.call('ZCARD', KEYS[2])
local free = limit - held
local function grant()
  redis.call('ZADD', KEYS[1], now + ttl, ARGV[1])
  redis.call('PEXPIRE', KEYS[1], ttl * 2)
end
if ARGV[4] == '' then
  if free > 0 and waiting == 0 then
    grant()
    return {1, held + 1, 0}
  end
  if waiting >= depth then return {-1, held, waiting} end
  local seq = redis.call('INCR', KEYS[4])
  redis.call('ZADD', KEYS[2], seq, ARGV[1])
  redis.call('ZADD', KEYS[3], now + wttl, ARGV[1])
  redis.call('PEXPIRE', KEYS[2], wttl * 2)
  redis.call('PEXPIRE', KEYS[3], wttl * 2)
  redis.call('PEXPIRE', KEYS[4], wttl * 2)
  return {0, held, waiting + 1}
end
local rank = redis.call('ZRANK', KEYS[2], ARGV[4])
if not rank then return {-2, held, waiting} end
if rank < free then
  redis.call('ZREM', KEYS[2], ARGV[4])
  redis.call('ZREM', KEYS[3], ARGV[4])
  grant()
  return {1, held + 1, waiting - 1}
end
redis.call('ZADD', KEYS[3], now + wttl, ARGV[4])
return {0, held, waiting}
`

// slotRelease gives a slot back and wakes the waiters of every replica.
// KEYS: 1 grants, 2 waiter order, 3 the release channel. ARGV: 1 grant id.
var slotRelease = redis.NewScript(`
redis.call('ZREM', KEYS[1], ARGV[1])
if redis.call('ZCARD', KEYS[2]) > 0 then redis.call('PUBLISH', KEYS[3], '1') end
return 1
`)

// leaveWait removes a waiter that gave up (its wait elapsed or its client
// left), and wakes the others: the head of the queue may have changed.
// KEYS: 1 waiter order, 2 waiter expiry, 3 the release channel. ARGV: 1 id.
var leaveWait = redis.NewScript(`
redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('ZREM', KEYS[2], ARGV[1])
if redis.call('ZCARD', KEYS[1]) > 0 then redis.call('PUBLISH', KEYS[3], '1') end
return 1
`)

// renewGrants extends live grants (long streams keep their slots) and puts
// back grants a restarted Redis lost: ZADD without XX, so re-seeding and
// renewing are one operation. A grant's key is given per pair.
// KEYS: the grant sets, one per grant. ARGV: 1 TTL ms, then the grant ids in
// the order of KEYS.
var renewGrants = redis.NewScript(nowLua + `
local ttl = tonumber(ARGV[1])
for i, key in ipairs(KEYS) do
  redis.call('ZADD', key, now + ttl, ARGV[i + 1])
  redis.call('PEXPIRE', key, ttl * 2)
end
return #KEYS
`)

// keyAdmit applies a client key's requestsPerMinute (a token bucket: burst
// rpm, refilled at rpm per minute; a changed limit starts a full bucket of
// the new size) and then its maxConcurrentRequests (grants with expiry), as
// the in-memory limiter does: a request the concurrency cap refuses has
// still used its token.
// KEYS: 1 bucket hash {tokens, ts, rpm}, 2 concurrency grants.
// ARGV: 1 rpm (0 = none), 2 max concurrent (0 = none), 3 grant id, 4 grant
// TTL ms.
// Returns {1, 0, ""} admitted, or {0, retry after ms, "rpm" | "concurrency"}.
var keyAdmit = redis.NewScript(nowLua + `
local rpm, maxc, ttl = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[4])
if rpm > 0 then
  local h = redis.call('HMGET', KEYS[1], 'tokens', 'ts', 'rpm')
  local tokens, ts, was = tonumber(h[1]), tonumber(h[2]), tonumber(h[3])
  if tokens == nil or ts == nil or was ~= rpm then
    tokens = rpm
  else
    tokens = math.min(rpm, tokens + math.max(0, now - ts) * rpm / 60000)
  end
  if tokens < 1 then
    redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'ts', now, 'rpm', rpm)
    redis.call('PEXPIRE', KEYS[1], 120000)
    return {0, math.ceil((1 - tokens) * 60000 / rpm), 'rpm'}
  end
  redis.call('HSET', KEYS[1], 'tokens', tostring(tokens - 1), 'ts', now, 'rpm', rpm)
  redis.call('PEXPIRE', KEYS[1], 120000)
end
if maxc > 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
  if redis.call('ZCARD', KEYS[2]) >= maxc then return {0, 1000, 'concurrency'} end
  redis.call('ZADD', KEYS[2], now + ttl, ARGV[3])
  redis.call('PEXPIRE', KEYS[2], ttl * 2)
end
return {1, 0, ''}
`)

// releaseGrant removes one grant. KEYS: 1 grant set. ARGV: 1 grant id.
var releaseGrant = redis.NewScript(`return redis.call('ZREM', KEYS[1], ARGV[1])`)

// queueDecide is the request queue's admission (20-resilience §10, the Go
// Decide function of services/traffic in one atomic step), shared by every
// replica: FIFO of waiters, concurrentRequests cap, minimum spacing between
// send starts, token bucket, learned throttle, and maxQueueDepth.
//
// KEYS: 1 state hash {tokens, ts, last_start, learn_min, learn_until,
// learn_budget}, 2 running grants, 3 waiter order, 4 waiter expiry,
// 5 arrival counter.
// ARGV: 1 rpm, 2 min spacing ms, 3 concurrent cap (0 = none), 4 max queue
// depth (0 = unbounded), 5 grant id, 6 grant TTL ms, 7 waiter id ("" on the
// first try), 8 waiter TTL ms.
// Returns {status, delay ms, blocker, queued}: status 1 dispatched, 0 wait
// (delay 0 = until a release or the requests ahead leave; retry with the
// waiter id), -1 queue full, -2 the waiter lapsed.
var queueDecide = redis.NewScript(nowLua + purgeLua + queueDecideLua)

// queueDecideLua is queueDecide's body, also run by dispatchAdmit.
const queueDecideLua = `
purge(KEYS[2], KEYS[3], KEYS[4])
local rpm, spacing, conc = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local depth, ttl, wttl = tonumber(ARGV[4]), tonumber(ARGV[6]), tonumber(ARGV[8])
local waiter = ARGV[7]
local queued = redis.call('ZCARD', KEYS[3])
local ahead = queued
if waiter ~= '' then
  local rank = redis.call('ZRANK', KEYS[3], waiter)
  if not rank then return {-2, 0, '', queued} end
  ahead = rank
elseif depth > 0 and queued >= depth then
  return {-1, 0, '', queued}
end
local function wait(delay, blocker)
  local id = waiter
  if id == '' then
    id = ARGV[5]
    local seq = redis.call('INCR', KEYS[5])
    redis.call('ZADD', KEYS[3], seq, id)
    redis.call('PEXPIRE', KEYS[3], wttl * 2)
    redis.call('PEXPIRE', KEYS[5], wttl * 2)
    queued = queued + 1
  end
  redis.call('ZADD', KEYS[4], now + wttl, id)
  redis.call('PEXPIRE', KEYS[4], wttl * 2)
  return {0, delay, blocker, queued}
end
if ahead > 0 then return wait(0, 'queue') end
if conc > 0 and redis.call('ZCARD', KEYS[2]) >= conc then return wait(0, 'concurrency') end
local h = redis.call('HMGET', KEYS[1], 'tokens', 'ts', 'last_start', 'learn_min', 'learn_until', 'learn_budget')
local tokens, ts, last = tonumber(h[1]), tonumber(h[2]), tonumber(h[3])
local lmin, luntil, lbudget = tonumber(h[4]) or 0, tonumber(h[5]) or 0, tonumber(h[6])
if rpm > 0 then
  if tokens == nil or ts == nil then tokens = rpm
  else tokens = math.min(rpm, tokens + math.max(0, now - ts) * rpm / 60000) end
end
local delay, blocker = 0, ''
local function later(d, b) if d > delay then delay, blocker = d, b end end
if last then later(last + math.max(spacing, lmin) - now, 'spacing') end
if rpm > 0 and tokens < 1 - 1e-9 then later(math.ceil((1 - tokens) * 60000 / rpm), 'rate') end
local throttled = lbudget ~= nil and now < luntil
if throttled and lbudget <= 0 then later(luntil - now, 'learned') end
if delay > 0 then return wait(delay, blocker) end
if waiter ~= '' then
  redis.call('ZREM', KEYS[3], waiter)
  redis.call('ZREM', KEYS[4], waiter)
end
local fields = {'last_start', now}
if rpm > 0 then
  table.insert(fields, 'tokens'); table.insert(fields, tostring(tokens - 1))
  table.insert(fields, 'ts'); table.insert(fields, now)
end
if throttled then table.insert(fields, 'learn_budget'); table.insert(fields, lbudget - 1) end
redis.call('HSET', KEYS[1], unpack(fields))
redis.call('PEXPIRE', KEYS[1], 600000)
redis.call('ZADD', KEYS[2], now + ttl, ARGV[5])
redis.call('PEXPIRE', KEYS[2], ttl * 2)
return {1, 0, '', queued}
`

// dispatchAdmit is slotAcquire's first try followed, only when it granted
// the slot, by queueDecide's first try: the two admissions of one dispatch
// of a connection with both maxConcurrent and rate-limit protection in one
// round trip, in the order and with the outcomes of the two scripts run
// one after the other. Each body runs unchanged, its KEYS and ARGV being
// its own part of this script's.
//
// KEYS: 1–4 slotAcquire's, 5–9 queueDecide's. ARGV: 1–6 slotAcquire's
// (waiter id ""), 7–14 queueDecide's (waiter id "").
// Returns slotAcquire's {status, in flight, waiting} when the slot was not
// granted (the queue untouched), else those three followed by
// queueDecide's {status, delay ms, blocker, queued}.
//
// The slot's keys hash on the connection and the queue's on the limiter
// key, so on a Redis Cluster they could live on different nodes; the
// client is a single-server one (New).
var dispatchAdmit = redis.NewScript(nowLua + purgeLua +
	"local function slot(KEYS, ARGV)" + slotAcquireLua + "end\n" +
	"local function queue(KEYS, ARGV)" + queueDecideLua + "end\n" + `
local s = slot({KEYS[1], KEYS[2], KEYS[3], KEYS[4]}, {ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6]})
if s[1] ~= 1 then return s end
local q = queue({KEYS[5], KEYS[6], KEYS[7], KEYS[8], KEYS[9]},
  {ARGV[7], ARGV[8], ARGV[9], ARGV[10], ARGV[11], ARGV[12], ARGV[13], ARGV[14]})
return {s[1], s[2], s[3], q[1], q[2], q[3], q[4]}
`)

// queueLearn stores what an upstream's rate-limit headers taught about a
// key, unless a newer observation is already there.
// KEYS: 1 state hash. ARGV: 1 observed at (ms), 2 min time ms, 3 throttle
// until ms (0 = no throttle), 4 throttle budget.
var queueLearn = redis.NewScript(`
local seen = tonumber(redis.call('HGET', KEYS[1], 'learn_seen') or '0')
if tonumber(ARGV[1]) < seen then return 0 end
redis.call('HSET', KEYS[1], 'learn_seen', ARGV[1], 'learn_min', ARGV[2], 'learn_until', ARGV[3], 'learn_budget', ARGV[4])
redis.call('PEXPIRE', KEYS[1], 600000)
return 1
`)

// windowFailure counts a combo target's final failure in the provider's
// window gate (20-resilience §3) and closes the gate at the threshold.
// KEYS: 1 failure instants (member unique id, score ms), 2 gate deadline.
// ARGV: 1 member, 2 threshold, 3 window ms, 4 cooldown ms, 5 waitable 0/1.
// Returns {1, until ms, waitable} when this failure closed the gate, else
// {0, failures in the window}.
var windowFailure = redis.NewScript(nowLua + `
local threshold, window, cooldown = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
redis.call('ZADD', KEYS[1], now, ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
local n = redis.call('ZCARD', KEYS[1])
if n >= threshold then
  redis.call('DEL', KEYS[1])
  redis.call('SET', KEYS[2], (now + cooldown) .. ':' .. ARGV[5], 'PX', cooldown)
  return {1, now + cooldown, tonumber(ARGV[5])}
end
redis.call('PEXPIRE', KEYS[1], window)
return {0, n}
`)

// windowClose closes a provider's gate at once (a rule with scope
// provider), never shortening a later deadline.
// KEYS: 1 gate deadline. ARGV: 1 cooldown ms, 2 waitable 0/1.
var windowClose = redis.NewScript(nowLua + `
local cur = redis.call('GET', KEYS[1])
local untilMs = now + tonumber(ARGV[1])
if cur then
  local prev = tonumber(string.match(cur, '^(%d+)'))
  if prev and prev >= untilMs then return {0, prev} end
end
redis.call('SET', KEYS[1], untilMs .. ':' .. ARGV[2], 'PX', ARGV[1])
return {1, untilMs}
`)

// liveCount is the number of unexpired grants. KEYS: 1 grant set.
var liveCount = redis.NewScript(nowLua + `
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
return redis.call('ZCARD', KEYS[1])
`)
