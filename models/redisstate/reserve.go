package redisstate

import (
	"sync"
	"time"
)

// A reserve is what one replica holds of one fleet-wide limit beyond the
// requests it runs, so that most admissions of a limit with plenty of room
// need no round trip to Redis, and most releases none either:
//
//   - a block of tokens of a token bucket (a key's requestsPerMinute, a
//     request queue's rate), taken from the bucket by the admission that
//     asked for it and spent locally until it runs out or lapses. The
//     bucket counts a live block as reserved, so the tokens in it plus the
//     blocks outstanding never exceed the bucket's size: a limit of N per
//     minute still admits a burst of at most N across the fleet;
//   - spare grants: the grant of a request that ended (a connection's
//     max_concurrent slot, a key's concurrency, a queue's running count),
//     kept in Redis — and renewed there like a running one — for the next
//     request of this replica instead of being released. Every admitted
//     request still holds a grant of its own in Redis, so no more than the
//     limit ever run fleet-wide.
//
// Reserves are kept only while the limit has room: a limit below
// reserveMinLimit never has any (every admission is decided in Redis, as a
// subscription account with max_concurrent 1 or 2 needs); a block is
// granted only while the bucket stays at least half full after it; spares
// only while the fleet held at most half the limit at this replica's last
// admission, and at most an eighth of the limit per replica. When a request
// anywhere has to wait or is refused, the script that decided so publishes
// a "need" notice: every replica gives its reserve of that limit back at
// once and keeps none for reserveHoldOff, so a waiter's FIFO order and a
// refusal's truth are those of Redis again within one message. The price,
// near the limit only: a request can be refused or wait while another
// replica still holds an idle reserve, for at most the time that notice
// takes (and a token block at most reserveBlockTTL).
//
// While Redis is unavailable no reserve is used: the local fallback answers.
type reserve struct {
	// name is the limit's key (a client key id, a connection id, a queue
	// key); grantKey, waitKey and channel cache the Redis keys a release
	// of its grants names (set once, under mu).
	name, grantKey, waitKey, channel string

	mu sync.Mutex
	// tokens are the unspent tokens of the current block, spendable until
	// blockEnd; blocking is set while one admission asks for a new block
	// (one at a time, so the bucket's record of this replica's block is
	// always the block held here).
	tokens   int
	blockEnd time.Time
	blocking bool
	// spares are idle grant ids held in Redis, taken under limit; low is the
	// fewest idle since the last sweep (the ones nobody needed).
	spares []string
	low    int
	limit  int
	// calm says the last admission in Redis left room for spares;
	// holdUntil is the end of a need notice's hold-off.
	calm      bool
	holdUntil time.Time
}

const (
	// reserveMinLimit is the smallest limit that keeps reserves.
	reserveMinLimit = 16
	// reserveBlockMax bounds a token block; a block is also at most a
	// sixteenth of the bucket.
	reserveBlockMax = 64
	// reserveBlockTTL is how long a block may be spent; Redis forgets it
	// at twice that.
	reserveBlockTTL = time.Second
	// reserveHoldOff is how long a need notice stops reserves of its limit.
	reserveHoldOff = 5 * time.Second
	// reserveSweep is how often idle spares are given back.
	reserveSweep = time.Second
)

// blockSize is the block an admission asks for under a bucket of rpm
// (0: none — the bucket is too small for blocks to pay).
func blockSize(rpm int) int {
	n := min(reserveBlockMax, rpm/16)
	if rpm < reserveMinLimit || n < 2 {
		return 0
	}
	return n
}

// reserves are the reserves of one mechanism by limit key.
type reserves struct{ m sync.Map } // string → *reserve

func (rs *reserves) get(key string) *reserve {
	if r, ok := rs.m.Load(key); ok {
		return r.(*reserve)
	}
	r, _ := rs.m.LoadOrStore(key, &reserve{name: key})
	return r.(*reserve)
}

func (rs *reserves) peek(key string) *reserve {
	if r, ok := rs.m.Load(key); ok {
		return r.(*reserve)
	}
	return nil
}

// giveBackFunc hands a reserve's spare grants and unspent tokens back to
// Redis for the limit key.
type giveBackFunc func(key string, spares []string, unused int)

// needed ends the reserve of key, if any, on a need notice (reserve.need).
func (rs *reserves) needed(key string, now time.Time, giveBack giveBackFunc) {
	r := rs.peek(key)
	if r == nil {
		return
	}
	r.mu.Lock()
	spares, unused := r.need(now)
	r.mu.Unlock()
	giveBack(key, spares, unused)
}

// sweepAll gives back what every reserve holds idle (reserve.sweep).
func (rs *reserves) sweepAll(now time.Time, giveBack giveBackFunc) {
	rs.each(func(key string, r *reserve) {
		r.mu.Lock()
		spares, unused := r.sweep(now)
		r.mu.Unlock()
		giveBack(key, spares, unused)
	})
}

// each calls fn for every reserve.
func (rs *reserves) each(fn func(key string, r *reserve)) {
	rs.m.Range(func(k, v any) bool {
		fn(k.(string), v.(*reserve))
		return true
	})
}

// takeToken spends a token of the current block.
func (r *reserve) takeToken(now time.Time) bool {
	if r.tokens > 0 && now.Before(r.blockEnd) {
		r.tokens--
		return true
	}
	return false
}

// startBlock is called by an admission going to Redis: it returns the
// unspent tokens of the block it settles (whatever is left, lapsed or not)
// and the size of the block to ask for (0 when another admission already
// asks, or while a hold-off runs).
func (r *reserve) startBlock(rpm int, now time.Time) (unused, want int) {
	if r.blocking {
		return 0, 0
	}
	want = blockSize(rpm)
	if want == 0 || now.Before(r.holdUntil) {
		if r.tokens > 0 && !now.Before(r.blockEnd) {
			unused, r.tokens = r.tokens, 0
		}
		return unused, 0
	}
	r.blocking = true
	unused, r.tokens = r.tokens, 0
	return unused, want
}

// endBlock records the block the admission's answer granted (0: none).
// asked is the want startBlock returned: only that admission ends the
// asking. A block granted while a need notice's hold-off began meanwhile
// is not spent: its tokens are returned for the caller to give back.
func (r *reserve) endBlock(asked, granted int, now time.Time) (giveBack int) {
	if asked == 0 {
		return 0
	}
	r.blocking = false
	if now.Before(r.holdUntil) {
		r.tokens = 0
		return granted
	}
	r.tokens, r.blockEnd = granted, now.Add(reserveBlockTTL)
	return 0
}

// takeSpare hands out an idle grant taken under limit.
func (r *reserve) takeSpare(limit int, now time.Time) (string, bool) {
	n := len(r.spares)
	if n == 0 || limit != r.limit || now.Before(r.holdUntil) {
		return "", false
	}
	id := r.spares[n-1]
	r.spares = r.spares[:n-1]
	r.low = min(r.low, n-1)
	return id, true
}

// observe records what an admission in Redis saw: held grants of limit
// after it. A changed limit gives every spare back (returned).
func (r *reserve) observe(limit, held, waiting int) (giveBack []string) {
	if limit != r.limit {
		giveBack, r.spares, r.low = r.spares, nil, 0
		r.limit = limit
	}
	r.calm = limit >= reserveMinLimit && waiting == 0 && held <= limit/2
	return giveBack
}

// keep takes back the grant of an ended request as a spare; false: the
// caller releases it.
func (r *reserve) keep(id string, limit int, now time.Time) bool {
	if !r.calm || limit != r.limit || now.Before(r.holdUntil) || len(r.spares) >= limit/8 {
		return false
	}
	r.spares = append(r.spares, id)
	return true
}

// keepSpare offers the grant id of an ended request to r (nil: none): true
// when r keeps it as a spare, false when the caller releases it. Nothing is
// kept while Redis is unavailable.
func (c *Client) keepSpare(r *reserve, id string, limit int) bool {
	if r == nil || c.Degraded() {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.keep(id, limit, c.opts.ReserveNow())
}

// need starts a hold-off and returns everything to give back: the spares
// and the unspent tokens (the block is over).
func (r *reserve) need(now time.Time) (spares []string, unused int) {
	r.holdUntil = now.Add(reserveHoldOff)
	r.calm = false
	spares, r.spares, r.low = r.spares, nil, 0
	if !r.blocking {
		unused, r.tokens = r.tokens, 0
	}
	return spares, unused
}

// sweep returns the spares nobody took since the last sweep, and the
// unspent tokens of a lapsed block.
func (r *reserve) sweep(now time.Time) (spares []string, unused int) {
	if n := r.low; n > 0 {
		spares = append([]string(nil), r.spares[:n]...)
		r.spares = append(r.spares[:0], r.spares[n:]...)
	}
	r.low = len(r.spares)
	if !r.blocking && r.tokens > 0 && !now.Before(r.blockEnd) {
		unused, r.tokens = r.tokens, 0
	}
	return spares, unused
}

// forget drops everything without giving it back (Redis lost it: a reset).
func (r *reserve) forget() []string {
	spares := r.spares
	r.spares, r.low, r.tokens = nil, 0, 0
	return spares
}

// ReserveStats is what one replica holds in reserve right now (health
// report): idle grants kept for its next requests and unspent tokens of
// live blocks, over every limit of a mechanism.
type ReserveStats struct {
	SpareGrants int
	BlockTokens int
}

// Add sums two mechanisms' reserves.
func (a ReserveStats) Add(b ReserveStats) ReserveStats {
	return ReserveStats{SpareGrants: a.SpareGrants + b.SpareGrants, BlockTokens: a.BlockTokens + b.BlockTokens}
}

// stats sums the reserves at now.
func (rs *reserves) stats(now time.Time) ReserveStats {
	var st ReserveStats
	rs.each(func(_ string, r *reserve) {
		r.mu.Lock()
		st.SpareGrants += len(r.spares)
		if now.Before(r.blockEnd) {
			st.BlockTokens += r.tokens
		}
		r.mu.Unlock()
	})
	return st
}

// Reserved reports the spare slots this replica holds.
func (s *Slots) Reserved() ReserveStats { return s.res.stats(s.c.opts.ReserveNow()) }

// Reserved reports this replica's reserves of request queues.
func (q *Queues) Reserved() ReserveStats { return q.res.stats(q.c.opts.ReserveNow()) }

// Reserved reports this replica's reserves of client keys.
func (k *KeyLimits) Reserved() ReserveStats { return k.res.stats(k.c.opts.ReserveNow()) }

// Reserved reports this replica's reserves of client keys.
func (k *KeyLimiter) Reserved() ReserveStats { return k.shared.Reserved() }
