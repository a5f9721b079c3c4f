package redisstate

import (
	"context"
	"time"
)

// KeyLimits counts client keys' requestsPerMinute and maxConcurrentRequests
// fleet-wide (10-gateway-api §3.4; scale-out §3.4 row 10): one script per
// admission, the bucket and the in-flight grants in Redis, time from the
// Redis server. A grant is renewed while its request runs.
type KeyLimits struct {
	c      *Client
	prefix string
	g      *grants
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
}

// NewKeyLimits returns the shared per-key limiter.
func NewKeyLimits(c *Client, prefix, replica string, grantTTL time.Duration) *KeyLimits {
	if prefix == "" {
		prefix = "sy"
	}
	if grantTTL <= 0 {
		grantTTL = 30 * time.Second
	}
	return &KeyLimits{c: c, prefix: prefix, g: newGrants(c, replica, grantTTL)}
}

// Run renews live grants until ctx ends.
func (k *KeyLimits) Run(ctx context.Context) { k.g.run(ctx) }

// Admit decides one request of keyID. An error (wrapping ErrDegraded) means
// Redis could not decide: the caller answers from its local limiter.
func (k *KeyLimits) Admit(ctx context.Context, keyID string, rpm, maxConcurrent int) (KeyDecision, error) {
	bucket := k.prefix + ":krpm:{" + keyID + "}"
	conc := k.prefix + ":kconc:{" + keyID + "}"
	id := ""
	if maxConcurrent > 0 {
		id = k.g.newID()
	}
	res, err := k.c.run(ctx, keyAdmit, []string{bucket, conc}, rpm, maxConcurrent, id, k.g.ttl.Milliseconds())
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
		d.Grant, d.key = id, conc
	}
	return d, nil
}

// Release returns a decision's concurrency grant (idempotent per grant).
func (k *KeyLimits) Release(d KeyDecision) {
	if d.Grant == "" {
		return
	}
	k.g.drop(d.Grant)
	k.c.release(releaseGrant, []string{d.key}, d.Grant)
}

// Forget drops a revoked key's bucket and grants.
func (k *KeyLimits) Forget(ctx context.Context, keyID string) error {
	return k.c.call(ctx, func(ctx context.Context) error {
		return k.c.rdb.Del(ctx, k.prefix+":krpm:{"+keyID+"}", k.prefix+":kconc:{"+keyID+"}").Err()
	})
}
