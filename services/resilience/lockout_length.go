package resilience

import "time"

// How long a model lockout lasts (20-resilience §7): the first applicable
// rule of a new episode, the configured ladder and its preview, the capped
// retry hint and the wait until a provider's daily reset.

// length is the lock length of a new episode, the first applicable rule of §7.
func (l *Lockouts) length(cfg LockoutConfig, provider, connectionID, model string, c Classification, n int, now time.Time) time.Duration {
	maxCool := time.Duration(cfg.MaxCooldownMs) * time.Millisecond
	if c.Reason == ReasonQuotaExhausted {
		// 1. an absolute reset: the hint, else the learned quota window.
		if c.Hint > 0 {
			return min(c.Hint, l.maxRetryHint())
		}
		if l.QuotaResetAt != nil {
			if at, ok := l.QuotaResetAt(provider, connectionID, model); ok && at.After(now) {
				return min(at.Sub(now), l.maxRetryHint())
			}
		}
		// 2. the provider's next daily reset.
		return l.untilDailyReset(provider, now)
	}
	// 3. another hint.
	if c.Hint > 0 {
		return min(c.Hint, maxCool)
	}
	// 4. a rule's cooldownMs.
	if c.CooldownMs > 0 {
		return min(time.Duration(c.CooldownMs)*time.Millisecond, maxCool)
	}
	// A retired model will not come back soon (§1.3 row 4).
	if c.Detail == DetailRetiredModel {
		return maxCool
	}
	// 5. the ladder.
	return cfg.LadderLength(n)
}

// LadderLength is the lock length of the n-th failure episode (n ≥ 1) when
// no hint or rule sets it: the base cooldown, doubled per repeat (when
// exponential backoff is on) for at most MaxBackoffSteps steps, capped at
// the maximum cooldown. The Model lockout card's preview uses it too.
func (cfg LockoutConfig) LadderLength(n int) time.Duration {
	maxCool := time.Duration(cfg.MaxCooldownMs) * time.Millisecond
	base := time.Duration(cfg.BaseCooldownMs) * time.Millisecond
	if !cfg.UseExponentialBackoff {
		return base
	}
	steps := min(n-1, cfg.MaxBackoffSteps)
	d := base
	for i := 0; i < steps && d < maxCool; i++ {
		d *= 2
	}
	return min(d, maxCool)
}

// Ladder lists the lock lengths of repeated failures until they stop
// growing (the cap or the last backoff step), at most limit entries; capped
// reports whether the last one is the maximum cooldown.
func (cfg LockoutConfig) Ladder(limit int) (lengths []time.Duration, capped bool) {
	for n := 1; n <= limit; n++ {
		d := cfg.LadderLength(n)
		if len(lengths) > 0 && d == lengths[len(lengths)-1] {
			break
		}
		lengths = append(lengths, d)
	}
	last := lengths[len(lengths)-1]
	return lengths, last == time.Duration(cfg.MaxCooldownMs)*time.Millisecond && cfg.UseExponentialBackoff
}

// hintLength is how far a hint may move a running lock's deadline.
func (l *Lockouts) hintLength(cfg LockoutConfig, c Classification) time.Duration {
	if c.Hint <= 0 {
		return 0
	}
	if c.Reason == ReasonQuotaExhausted {
		return min(c.Hint, l.maxRetryHint())
	}
	return min(c.Hint, time.Duration(cfg.MaxCooldownMs)*time.Millisecond)
}

func (l *Lockouts) maxRetryHint() time.Duration {
	if l.MaxRetryHint != nil {
		if d := l.MaxRetryHint(); d > 0 {
			return d
		}
	}
	return lockoutMaxRetryHint
}

// untilDailyReset is the time to the provider's next local midnight, ≤ 25 h.
func (l *Lockouts) untilDailyReset(provider string, now time.Time) time.Duration {
	loc := time.UTC
	if l.ResetLocation != nil {
		if z := l.ResetLocation(provider); z != nil {
			loc = z
		}
	}
	t := now.In(loc)
	next := time.Date(t.Year(), t.Month(), t.Day()+1, 0, 0, 0, 0, loc)
	d := next.Sub(now)
	if d <= 0 || d > lockoutDailyResetCap {
		d = 24 * time.Hour
	}
	return d
}
