package redisstate

import (
	"context"

	"switchyard/services/traffic"
)

// KeyLimiter is the fleet-wide traffic.KeyLimiter: every replica admits a
// client key's requests against one bucket and one set of in-flight grants
// in Redis (KeyLimits), so a key limited to N per minute gets N per minute
// from the whole fleet, not N per replica. While Redis cannot decide, the
// replica's in-memory limiter answers (limits per replica, each such
// decision counted as mechanism "key_limits").
type KeyLimiter struct {
	shared     *KeyLimits
	local      *traffic.KeyLimits
	onFallback func(mechanism string)
}

var _ traffic.KeyLimiter = (*KeyLimiter)(nil)

// NewKeyLimiter returns the shared limiter over local; onFallback may be nil.
func NewKeyLimiter(shared *KeyLimits, local *traffic.KeyLimits, onFallback func(mechanism string)) *KeyLimiter {
	if onFallback == nil {
		onFallback = func(string) {}
	}
	return &KeyLimiter{shared: shared, local: local, onFallback: onFallback}
}

// sharedGrant marks a grant held in Redis (Release goes there, not to the
// local limiter).
type sharedGrant struct{ d KeyDecision }

// Admit implements traffic.KeyLimiter: one script per admission; a refusal
// is a *traffic.KeyRefusal with the Retry-After Redis computed.
func (k *KeyLimiter) Admit(ctx context.Context, keyID string, lim traffic.KeyLimit) (traffic.KeyGrant, error) {
	if lim.Unlimited() {
		return traffic.KeyGrant{}, nil
	}
	if !k.shared.c.Degraded() {
		d, err := k.shared.Admit(ctx, keyID, lim.RequestsPerMinute, lim.MaxConcurrent)
		if err == nil {
			if !d.Admitted {
				return traffic.KeyGrant{}, refusal(d, lim)
			}
			if d.Grant == "" {
				return traffic.KeyGrant{KeyID: keyID}, nil
			}
			return traffic.KeyGrant{KeyID: keyID, Ref: &sharedGrant{d: d}}, nil
		}
		if ctx.Err() != nil {
			return traffic.KeyGrant{}, ctx.Err()
		}
	}
	k.onFallback("key_limits")
	return k.local.Admit(ctx, keyID, lim)
}

func refusal(d KeyDecision, lim traffic.KeyLimit) *traffic.KeyRefusal {
	if d.Which == "concurrency" {
		return &traffic.KeyRefusal{Kind: traffic.KeyLimitConcurrency, Limit: lim.MaxConcurrent, RetryAfter: d.RetryAfter}
	}
	return &traffic.KeyRefusal{Kind: traffic.KeyLimitRate, Limit: lim.RequestsPerMinute, RetryAfter: d.RetryAfter}
}

// Release implements traffic.KeyLimiter: a shared grant is released in
// Redis (a failed release lapses with the grant TTL), a local one locally.
func (k *KeyLimiter) Release(g traffic.KeyGrant) {
	if s, ok := g.Ref.(*sharedGrant); ok {
		k.shared.Release(s.d)
		return
	}
	if g.Ref != nil {
		k.local.Release(g)
	}
}

// Forget implements traffic.KeyLimiter: the key's local state and its
// bucket and grants in Redis are dropped (a failed delete leaves a bucket
// nobody admits through any more; it expires with its TTL).
func (k *KeyLimiter) Forget(keyID string) {
	k.local.Forget(keyID)
	ctx, cancel := context.WithTimeout(context.Background(), k.shared.c.opts.CallTimeout)
	defer cancel()
	_ = k.shared.Forget(ctx, keyID)
}

// Run renews the live grants until ctx ends.
func (k *KeyLimiter) Run(ctx context.Context) { k.shared.Run(ctx) }
