package redisstate

import (
	"context"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// KeyLimits counts client keys' requestsPerMinute and maxConcurrentRequests
// fleet-wide (10-gateway-api §3.4; scale-out §3.4 row 10): the bucket and the
// in-flight grants in Redis, time from the Redis server. A grant is renewed
// while its request runs. A key with room to spare is admitted from this
// replica's reserve of it (reserve.go) — a token block and the grants of
// ended requests — so most of its admissions and releases make no round
// trip; one script decides the others.
type KeyLimits struct {
	c      *Client
	prefix string
	g      *grants
	own    string // this replica's block field
	res    reserves
}

// KeyDecision is the outcome of one admission.
type KeyDecision struct {
	// Admitted is true when the request may go on.
	Admitted bool
	// Which limit refused: "rpm" or "concurrency".
	Which string
	// RetryAfter is when to try again (rate: the next token; concurrency 1 s).
	RetryAfter time.Duration
	// Grant is released when the request ends ("" = nothing held).
	Grant string
	key   string
	r     *reserve
	limit int
}

// NewKeyLimits returns the shared per-key limiter.
func NewKeyLimits(c *Client, prefix, replica string, grantTTL time.Duration) *KeyLimits {
	if prefix == "" {
		prefix = "sy"
	}
	if grantTTL <= 0 {
		grantTTL = 30 * time.Second
	}
	return &KeyLimits{c: c, prefix: prefix, g: newGrants(c, replica, grantTTL), own: "r:" + replica}
}

// Run renews live grants, gives idle reserves back and listens for need
// notices until ctx ends.
func (k *KeyLimits) Run(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Go(func() { k.listen(ctx) })
	wg.Go(func() { every(ctx, reserveSweep, k.sweep) })
	k.g.run(ctx)
	wg.Wait()
}

func (k *KeyLimits) keys(keyID string) (bucket, conc string) {
	return k.prefix + ":krpm:{" + keyID + "}", k.prefix + ":kconc:{" + keyID + "}"
}

func (k *KeyLimits) needChannel(keyID string) string { return k.prefix + ":kneed:" + keyID }

// Admit decides one request of keyID. An error (wrapping ErrDegraded) means
// Redis could not decide: the caller answers from its local limiter.
func (k *KeyLimits) Admit(ctx context.Context, keyID string, rpm, maxConcurrent int) (KeyDecision, error) {
	r := k.res.get(keyID)
	now := k.c.opts.ReserveNow()
	r.mu.Lock()
	if d, ok := k.fromReserve(r, rpm, maxConcurrent, now); ok {
		r.mu.Unlock()
		return d, nil
	}
	var unused, want int
	if rpm > 0 {
		unused, want = r.startBlock(rpm, now)
	}
	r.mu.Unlock()

	bucket, conc := k.keys(keyID)
	id := ""
	if maxConcurrent > 0 {
		id = k.g.newID()
	}
	settle := 0
	if unused > 0 || want > 0 {
		settle = 1
	}
	res, err := k.c.run(ctx, keyAdmit, []string{bucket, conc}, rpm, maxConcurrent, id, k.g.ttl.Milliseconds(),
		k.own, settle, unused, want, reserveBlockTTL.Milliseconds(), k.needChannel(keyID))
	r.mu.Lock()
	var got int
	if err == nil {
		got = int(asInt(res[3]))
	}
	back := r.endBlock(want, got, k.c.opts.ReserveNow())
	var giveBack []string
	if err == nil && maxConcurrent > 0 && asInt(res[0]) == 1 {
		giveBack = r.observe(maxConcurrent, int(asInt(res[4])), 0)
	}
	r.mu.Unlock()
	k.giveBack(keyID, giveBack, back)
	if err != nil {
		return KeyDecision{}, err
	}
	if asInt(res[0]) != 1 {
		which, _ := res[2].(string)
		return KeyDecision{Which: which, RetryAfter: time.Duration(asInt(res[1])) * time.Millisecond}, nil
	}
	d := KeyDecision{Admitted: true}
	if id != "" {
		k.g.hold(id, conc)
		d.Grant, d.key, d.r, d.limit = id, conc, r, maxConcurrent
	}
	return d, nil
}

// fromReserve admits from r when it holds what the request needs: a token
// (when rpm is set) and a spare grant (when maxConcurrent is). r is locked.
func (k *KeyLimits) fromReserve(r *reserve, rpm, maxConcurrent int, now time.Time) (KeyDecision, bool) {
	if k.c.Degraded() || (rpm > 0 && (r.tokens == 0 || !now.Before(r.blockEnd))) {
		return KeyDecision{}, false
	}
	d := KeyDecision{Admitted: true}
	if maxConcurrent > 0 {
		id, ok := r.takeSpare(maxConcurrent, now)
		if !ok {
			return KeyDecision{}, false
		}
		d.Grant, d.r, d.limit = id, r, maxConcurrent
		if r.grantKey == "" {
			_, r.grantKey = k.keys(r.name)
		}
		d.key = r.grantKey
	}
	if rpm > 0 {
		r.takeToken(now)
	}
	return d, true
}

// Release returns a decision's concurrency grant (idempotent per grant):
// kept as a spare while the key has room, else released in Redis.
func (k *KeyLimits) Release(d KeyDecision) {
	if d.Grant == "" {
		return
	}
	if k.c.keepSpare(d.r, d.Grant, d.limit) {
		return
	}
	k.release(d.key, []string{d.Grant})
}

func (k *KeyLimits) release(conc string, ids []string) {
	for _, id := range ids {
		k.g.drop(id)
		k.c.release(releaseGrant, []string{conc}, id)
	}
}

// giveBack hands a reserve's spares and unspent tokens back to Redis.
func (k *KeyLimits) giveBack(keyID string, spares []string, unused int) {
	if len(spares) == 0 && unused <= 0 {
		return
	}
	bucket, conc := k.keys(keyID)
	k.release(conc, spares)
	if unused > 0 {
		k.c.release(settleBlock, []string{bucket}, k.own, unused)
	}
}

func (k *KeyLimits) sweep() { k.res.sweepAll(k.c.opts.ReserveNow(), k.giveBack) }

// listen gives a key's reserve back when another admission of it was
// refused somewhere in the fleet.
func (k *KeyLimits) listen(ctx context.Context) {
	prefix := k.prefix + ":kneed:"
	listen(ctx, func(ctx context.Context) *redis.PubSub { return k.c.rdb.PSubscribe(ctx, prefix+"*") },
		func(msg *redis.Message) { k.res.needed(msg.Channel[len(prefix):], k.c.opts.ReserveNow(), k.giveBack) })
}

// Forget drops a revoked key's bucket, grants and reserve.
func (k *KeyLimits) Forget(ctx context.Context, keyID string) error {
	if r := k.res.peek(keyID); r != nil {
		r.mu.Lock()
		for _, id := range r.forget() {
			k.g.drop(id)
		}
		r.mu.Unlock()
	}
	bucket, conc := k.keys(keyID)
	return k.c.call(ctx, func(ctx context.Context) error {
		return k.c.rdb.Del(ctx, bucket, conc).Err()
	})
}
