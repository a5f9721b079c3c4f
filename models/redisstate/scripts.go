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
// try), 5 queue depth, 6 waiter TTL ms, 7 the need channel.
// Returns {status, in flight, waiting}: status 1 granted, 0 queued (wait for
// a release and try again with the waiter id), -1 queue full, -2 the waiter
// lapsed (it waited without asking for longer than its TTL). Queuing and
// refusing publish on the need channel: replicas give their spare grants of
// the connection back (reserve.go).
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
  redis.call('PUBLISH', ARGV[7], '1')
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

// bucketLua reads a token bucket's hash with the token blocks replicas
// hold of it (reserve.go): fields 'r:<replica>' = "<tokens>:<expiry ms>".
// read returns the other fields by name and the tokens of the live blocks
// other than own (own too unless settling), dropping lapsed ones. settle
// ends own's block: its unspent tokens go back, and take may grant a new
// one. Tokens in the bucket plus the live blocks never exceed its size.
const bucketLua = `local function read(key, own, settling)
  local flat = redis.call('HGETALL', key)
  local f, out, dead = {}, 0, {}
  for i = 1, #flat, 2 do
    local k, v = flat[i], flat[i + 1]
    if string.sub(k, 1, 2) == 'r:' then
      local n, e = string.match(v, '^(%d+):(%d+)$')
      if not n or tonumber(e) <= now then table.insert(dead, k)
      elseif k ~= own or not settling then out = out + tonumber(n) end
    else f[k] = v end
  end
  if settling then table.insert(dead, own) end
  if #dead > 0 then redis.call('HDEL', key, unpack(dead)) end
  return f, out
end
local function block(key, own, tokens, size, want, bttl)
  if want > 0 and tokens - want >= size / 2 then
    redis.call('HSET', key, own, want .. ':' .. (now + 2 * bttl))
    return tokens - want, want
  end
  return tokens, 0
end
`

// keyAdmit applies a client key's requestsPerMinute (a token bucket: burst
// rpm, refilled at rpm per minute; a changed limit starts a full bucket of
// the new size) and then its maxConcurrentRequests (grants with expiry), as
// the in-memory limiter does: a request the concurrency cap refuses has
// still used its token. It may also grant a token block (bucketLua).
// KEYS: 1 bucket hash {tokens, ts, rpm, r:*}, 2 concurrency grants.
// ARGV: 1 rpm (0 = none), 2 max concurrent (0 = none), 3 grant id, 4 grant
// TTL ms, 5 own block field, 6 settle own block 0/1, 7 its unspent tokens,
// 8 block wanted, 9 block TTL ms, 10 the need channel.
// Returns {1, 0, "", block, held} admitted, or {0, retry after ms, "rpm" |
// "concurrency", block, held}; a refusal publishes on the need channel.
var keyAdmit = redis.NewScript(nowLua + bucketLua + `
local rpm, maxc, ttl = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[4])
local own, settling = ARGV[5], ARGV[6] == '1'
local got, held = 0, 0
if rpm > 0 then
  local f, out = read(KEYS[1], own, settling)
  local tokens, ts, was = tonumber(f.tokens), tonumber(f.ts), tonumber(f.rpm)
  local cap = math.max(0, rpm - out)
  if tokens == nil or ts == nil or was ~= rpm then
    tokens = cap
  else
    tokens = math.min(cap, tokens + math.max(0, now - ts) * rpm / 60000)
  end
  if settling then tokens = math.min(cap, tokens + tonumber(ARGV[7])) end
  if tokens < 1 then
    redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'ts', now, 'rpm', rpm)
    redis.call('PEXPIRE', KEYS[1], 120000)
    redis.call('PUBLISH', ARGV[10], '1')
    return {0, math.ceil((1 - tokens) * 60000 / rpm), 'rpm', 0, 0}
  end
  tokens, got = block(KEYS[1], own, tokens - 1, rpm, tonumber(ARGV[8]), tonumber(ARGV[9]))
  redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'ts', now, 'rpm', rpm)
  redis.call('PEXPIRE', KEYS[1], 120000)
end
if maxc > 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
  held = redis.call('ZCARD', KEYS[2])
  if held >= maxc then
    redis.call('PUBLISH', ARGV[10], '1')
    return {0, 1000, 'concurrency', got, held}
  end
  redis.call('ZADD', KEYS[2], now + ttl, ARGV[3])
  redis.call('PEXPIRE', KEYS[2], ttl * 2)
  held = held + 1
end
return {1, 0, '', got, held}
`)

// settleBlock ends a token block off the request path: its unspent tokens
// go back to the bucket (capped at the next admission). KEYS: 1 bucket.
// ARGV: 1 own block field, 2 unspent tokens.
var settleBlock = redis.NewScript(`
if redis.call('HDEL', KEYS[1], ARGV[1]) == 1 and tonumber(ARGV[2]) > 0 and redis.call('HEXISTS', KEYS[1], 'tokens') == 1 then
  redis.call('HINCRBYFLOAT', KEYS[1], 'tokens', ARGV[2])
end
return 1
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
// first try), 8 waiter TTL ms, 9 own block field, 10 settle own block 0/1,
// 11 its unspent tokens, 12 block wanted, 13 block TTL ms, 14 the need
// channel.
// Returns {status, delay ms, blocker, queued}: status 1 dispatched, 0 wait
// (delay 0 = until a release or the requests ahead leave; retry with the
// waiter id), -1 queue full, -2 the waiter lapsed; a dispatch adds {block,
// running}. A token block (bucketLua) is granted only to a dispatch that
// nothing paces: no spacing, no learned throttle, nobody waiting. Waiting
// and refusing publish on the need channel (reserve.go).
var queueDecide = redis.NewScript(nowLua + purgeLua + bucketLua + queueDecideLua)

// queueDecideLua is queueDecide's body, also run by dispatchAdmit.
const queueDecideLua = `
purge(KEYS[2], KEYS[3], KEYS[4])
local rpm, spacing, conc = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local depth, ttl, wttl = tonumber(ARGV[4]), tonumber(ARGV[6]), tonumber(ARGV[8])
local waiter = ARGV[7]
local own, settling = ARGV[9], ARGV[10] == '1'
local queued = redis.call('ZCARD', KEYS[3])
local ahead = queued
if waiter ~= '' then
  local rank = redis.call('ZRANK', KEYS[3], waiter)
  if not rank then return {-2, 0, '', queued} end
  ahead = rank
elseif depth > 0 and queued >= depth then
  redis.call('PUBLISH', ARGV[14], '1')
  return {-1, 0, '', queued}
end
local function wait(delay, blocker)
  redis.call('PUBLISH', ARGV[14], '1')
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
local h, out = read(KEYS[1], own, settling)
local tokens, ts, last = tonumber(h.tokens), tonumber(h.ts), tonumber(h.last_start)
local lmin, luntil, lbudget = tonumber(h.learn_min) or 0, tonumber(h.learn_until) or 0, tonumber(h.learn_budget)
if rpm > 0 then
  local cap = math.max(0, rpm - out)
  if tokens == nil or ts == nil then tokens = cap
  else tokens = math.min(cap, tokens + math.max(0, now - ts) * rpm / 60000) end
  if settling then tokens = math.min(cap, tokens + tonumber(ARGV[11])) end
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
  queued = queued - 1
end
local fields = {'last_start', now}
local got = 0
if rpm > 0 then
  tokens = tokens - 1
  if spacing <= 0 and lmin <= 0 and not throttled and queued == 0 then
    tokens, got = block(KEYS[1], own, tokens, rpm, tonumber(ARGV[12]), tonumber(ARGV[13]))
  end
  table.insert(fields, 'tokens'); table.insert(fields, tostring(tokens))
  table.insert(fields, 'ts'); table.insert(fields, now)
end
if throttled then table.insert(fields, 'learn_budget'); table.insert(fields, lbudget - 1) end
redis.call('HSET', KEYS[1], unpack(fields))
redis.call('PEXPIRE', KEYS[1], 600000)
redis.call('ZADD', KEYS[2], now + ttl, ARGV[5])
redis.call('PEXPIRE', KEYS[2], ttl * 2)
return {1, 0, '', queued, got, redis.call('ZCARD', KEYS[2])}
`

// dispatchAdmit is slotAcquire's first try followed, only when it granted
// the slot, by queueDecide's first try: the two admissions of one dispatch
// of a connection with both maxConcurrent and rate-limit protection in one
// round trip, in the order and with the outcomes of the two scripts run
// one after the other. Each body runs unchanged, its KEYS and ARGV being
// its own part of this script's.
//
// KEYS: 1–4 slotAcquire's, 5–9 queueDecide's. ARGV: 1–7 slotAcquire's
// (waiter id ""), 8–21 queueDecide's (waiter id "").
// Returns slotAcquire's {status, in flight, waiting} when the slot was not
// granted (the queue untouched), else those three followed by
// queueDecide's answer.
//
// The slot's keys hash on the connection and the queue's on the limiter
// key, so on a Redis Cluster they could live on different nodes; the
// client is a single-server one (New).
var dispatchAdmit = redis.NewScript(nowLua + purgeLua + bucketLua +
	"local function slot(KEYS, ARGV)" + slotAcquireLua + "end\n" +
	"local function queue(KEYS, ARGV)" + queueDecideLua + "end\n" + `
local s = slot({KEYS[1], KEYS[2], KEYS[3], KEYS[4]}, {unpack(ARGV, 1, 7)})
if s[1] ~= 1 then return s end
local q = queue({KEYS[5], KEYS[6], KEYS[7], KEYS[8], KEYS[9]}, {unpack(ARGV, 8, 21)})
local r = {s[1], s[2], s[3]}
for _, v in ipairs(q) do table.insert(r, v) end
return r
`)

// queueLearn stores what an upstream's rate-limit headers taught about a
// key, unless a newer observation is already there.
// KEYS: 1 state hash. ARGV: 1 observed at (ms), 2 min time ms, 3 throttle
// until ms (0 = no throttle), 4 throttle budget, 5 the need channel (a new
// spacing or throttle ends every replica's reserve of the key).
var queueLearn = redis.NewScript(`
local seen = tonumber(redis.call('HGET', KEYS[1], 'learn_seen') or '0')
if tonumber(ARGV[1]) < seen then return 0 end
redis.call('HSET', KEYS[1], 'learn_seen', ARGV[1], 'learn_min', ARGV[2], 'learn_until', ARGV[3], 'learn_budget', ARGV[4])
redis.call('PEXPIRE', KEYS[1], 600000)
if tonumber(ARGV[2]) > 0 or tonumber(ARGV[3]) > 0 then redis.call('PUBLISH', ARGV[5], '1') end
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
