package resilience

import (
	"context"
	"net"
	"net/url"
	"strings"
	"time"

	"switchyard/services"
	"switchyard/services/events"
)

// Egress-group lock (20-resilience §12): some providers limit by outbound IP
// rather than by account, so a 429 on one connection cools every connection
// of a listed provider that leaves through the same egress.

// EgressGroupDirect is the group of connections with neither a proxy nor a label.
const EgressGroupDirect = "direct"

// egressLockMinMs floors the failing connection's hint-less egress cooldown.
const egressLockMinMs int64 = 120_000

// egressLockDefaultProviders is the list used when
// SWITCHYARD_EGRESS_LOCK_PROVIDERS is unset: the opencode family, whose
// free tier limits by IP.
var egressLockDefaultProviders = []string{"opencode", "opencode-zen", "opencode-go", "opencode-cli"}

// EgressGroupOf returns the egress-group key of a connection (BD 11):
//
//   - "label:<label>" when an egressGroup label is set — an explicit
//     statement of which egress the connection uses, so it wins over the
//     proxy (label two proxies that share an exit IP alike to group them);
//   - else "proxy:<scheme>://<host>:<port>" when a proxy URL is set,
//     compared without credentials, path or query; scheme and host are
//     lower-cased and the port defaults by scheme (http 80, https 443,
//     socks5 1080), so "http://u:p@P2:3128/" and "http://p2:3128" match;
//   - else "direct" (the host's own egress).
//
// The key never contains credentials and is safe to log.
func EgressGroupOf(proxyURL, label string) string {
	if l := strings.TrimSpace(label); l != "" {
		return "label:" + l
	}
	raw := strings.TrimSpace(proxyURL)
	if raw == "" {
		return EgressGroupDirect
	}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		// Not a URL we can normalise: compare it as written, minus any userinfo.
		if i := strings.LastIndexByte(raw, '@'); i >= 0 {
			if j := strings.Index(raw, "://"); j >= 0 && j < i {
				raw = raw[:j+3] + raw[i+1:]
			} else {
				raw = raw[i+1:]
			}
		}
		return "proxy:" + strings.ToLower(raw)
	}
	scheme := strings.ToLower(u.Scheme)
	host, port := strings.ToLower(u.Hostname()), u.Port()
	if port == "" {
		switch scheme {
		case "https":
			port = "443"
		case "socks5", "socks5h":
			port = "1080"
		default:
			port = "80"
		}
	}
	return "proxy:" + scheme + "://" + net.JoinHostPort(host, port)
}

// ParseEgressLockProviders reads SWITCHYARD_EGRESS_LOCK_PROVIDERS: empty
// (unset) → the opencode family; none, off, false or 0 → no provider (the
// lock is off); else the comma-separated list, trimmed, lower-cased, without
// empty items or duplicates.
func ParseEgressLockProviders(env string) []string {
	v := strings.TrimSpace(env)
	switch strings.ToLower(v) {
	case "":
		return append([]string(nil), egressLockDefaultProviders...)
	case "none", "off", "false", "0":
		return []string{}
	}
	out := []string{}
	seen := map[string]bool{}
	for _, p := range strings.Split(v, ",") {
		p = strings.ToLower(strings.TrimSpace(p))
		if p == "" || seen[p] {
			continue
		}
		seen[p] = true
		out = append(out, p)
	}
	return out
}

// EgressLockTriggered reports whether a classified failure on provider
// triggers the egress-group lock (§12): the lock is enabled, the provider is
// listed, the (restated) status is 429, the reason is rate_limit or
// quota_exhausted and nothing terminal resulted.
func EgressLockTriggered(cfg EgressLockConfig, provider string, cls Classification) bool {
	if !cfg.Enabled || cls.Status != 429 || cls.Terminal != "" || cls.Ban {
		return false
	}
	if cls.Reason != ReasonRateLimit && cls.Reason != ReasonQuotaExhausted {
		return false
	}
	for _, p := range cfg.Providers {
		if p == provider {
			return true
		}
	}
	return false
}

// ApplyEgressLock applies the egress-group lock after a triggering failure
// of failing (see EgressLockTriggered). Call Apply for the failure first: it
// records the error and runs the connection ladder; this call then makes
// sure the failing connection has a connection cooldown (never a model
// lockout, even when Apply scoped the failure to the model) and gives the
// siblings the same deadline:
//
//   - with a hint: now + hint;
//   - without, when the connection is cooling: max(its deadline, episode
//     start + 120 000 ms) — for the episode Apply just opened that is
//     now + max(its backoff, 120 000 ms), and a repeat failure inside the
//     episode moves nothing (BD 3);
//   - without, when it is not cooling: now + max(the §4.1 step at its
//     current level, 120 000 ms).
//
// Deadlines are only ever extended; no level, counter or last_error* moves.
// A deadline it sets or extends belongs to reason (the triggering failure's:
// rate_limit or quota_exhausted), which decides its waitability (§9).
// A disableCooling failing connection is not written; its siblings still
// are. A sibling (same group, listed provider: the caller filters) is
// skipped when terminal, disableCooling, or already cooling until that
// deadline or later. Never terminal. It returns the ids of the siblings
// whose deadline it set or extended.
func (c *Cooldowns) ApplyEgressLock(ctx context.Context, failing ConnInfo, siblings []ConnInfo, hint time.Duration, reason Reason) []string {
	now := c.now()
	prof, cfg := c.profile(failing.Profile)
	hint = clampHint(hint, cfg)

	floor := time.Duration(egressLockMinMs) * time.Millisecond
	e := c.entry(failing.ID)
	e.mu.Lock()
	old := e.snapshot()
	var deadline time.Time
	switch {
	case hint > 0:
		deadline = now.Add(hint)
	case coolingAt(old, now):
		// Its backoff is the running cooldown (Apply's, usually just now);
		// the floor counts from the episode's start, so a repeat failure
		// inside the episode does not move the deadline (BD 3).
		deadline = *old.RateLimitedUntil
		if !e.episodeAt.IsZero() {
			deadline = egressLaterOf(deadline, e.episodeAt.Add(floor))
		}
	default:
		level := old.BackoffLevel
		if old.LastErrorAt != nil && now.Sub(*old.LastErrorAt) > time.Duration(backoffRestartMs)*time.Millisecond {
			level = 0
		}
		deadline = now.Add(max(time.Duration(backoffMs(prof.BaseCooldownMs, level, prof))*time.Millisecond, floor))
	}
	if !failing.DisableCooling {
		c.extendDeadline(ctx, e, failing, deadline, reason)
	}
	e.mu.Unlock()

	var cooled []string
	seen := map[string]bool{failing.ID: true}
	for _, s := range siblings {
		if seen[s.ID] || s.DisableCooling {
			continue
		}
		seen[s.ID] = true
		se := c.entry(s.ID)
		se.mu.Lock()
		if c.extendDeadline(ctx, se, s, deadline, reason) {
			cooled = append(cooled, s.ID)
			c.record(events.CooldownSet, s.Provider, s.ID, events.CauseEgressLock, 0)
		}
		se.mu.Unlock()
	}
	return cooled
}

// extendDeadline moves a non-terminal connection's deadline to deadline
// (written by reason) when it ends earlier (or is unset), leaving
// everything else; it reports whether it wrote. The decision is made on
// the mirror and written with a compare-and-set like every other, so a
// sibling that another replica cooled longer meanwhile is left alone.
// Called with e.mu held.
func (c *Cooldowns) extendDeadline(ctx context.Context, e *cooldownEntry, info ConnInfo, deadline time.Time, reason Reason) bool {
	now := c.now()
	wasCooling := false
	_, _, changed, _ := c.decide(ctx, e, info.ID, now, false, func(old services.ConnectionState) services.ConnectionState {
		if old.TerminalStatus != "" || old.RateLimitedUntil != nil && !deadline.After(*old.RateLimitedUntil) {
			return old
		}
		wasCooling = coolingAt(old, now)
		st := old
		until := deadline
		st.RateLimitedUntil = &until
		st.CooldownReason = string(reason)
		return st
	})
	if changed && !wasCooling {
		e.episodeAt = now
	}
	return changed
}

func egressLaterOf(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
