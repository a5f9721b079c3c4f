package gateway

import (
	"time"

	"switchyard/services/settings"
)

// Configured is what the general settings document sets in the gateway: the
// per-request Settings and the body Limits of the /v1 handlers.
type Configured struct {
	Settings Settings
	Limits   Limits
}

// FromGeneral translates the general settings document (40-admin-api §2.5)
// into the gateway's settings, starting from the documented defaults. Wire
// it through settings.NewDerived so it runs once per document version: a
// PATCH /api/settings applies to the next request and costs nothing per
// request.
func FromGeneral(doc *settings.General) Configured {
	set, lim := DefaultSettings(), DefaultLimits()
	ms := func(v int64) time.Duration { return time.Duration(v) * time.Millisecond }
	set.KeepaliveIdle = ms(doc.Stream.KeepaliveIdleMs)
	set.WriteTimeout = ms(doc.Stream.WriteTimeoutMs)
	set.StreamIdleTimeout = ms(doc.Upstream.StreamIdleTimeoutMs)
	r := &doc.Routing
	if r.MaxAttemptsPerRequest > 0 {
		set.MaxAttempts = r.MaxAttemptsPerRequest
	}
	if r.RequestDeadlineMs > 0 {
		set.RequestDeadline = ms(r.RequestDeadlineMs)
	}
	set.EchoRequestedModel = r.EchoRequestedModel
	set.DirectCombo = ComboDefaults(&r.ComboDefaults)
	set.ComboDefaults, set.TaskFitness = r.ComboDefaults, r.AutoTaskFitness
	if r.FallbackStrategy != "" {
		set.FallbackStrategy = r.FallbackStrategy
	}
	if r.StickyRoundRobinLimit > 0 {
		set.StickyLimit = r.StickyRoundRobinLimit
	}
	set.ProviderStrategy = make(map[string]ProviderStrategy, len(r.ProviderStrategies))
	for p, ps := range r.ProviderStrategies {
		var v ProviderStrategy
		if ps.FallbackStrategy != nil {
			v.FallbackStrategy = *ps.FallbackStrategy
		}
		if ps.StickyRoundRobinLimit != nil {
			v.StickyLimit = *ps.StickyRoundRobinLimit
		}
		set.ProviderStrategy[p] = v
	}
	if doc.Limits.MaxBodyBytes > 0 {
		lim.MaxBodyBytes = doc.Limits.MaxBodyBytes
	}
	if doc.Limits.MaxJSONDepth > 0 {
		lim.MaxJSONDepth = doc.Limits.MaxJSONDepth
	}
	if doc.Limits.MaxMessages > 0 {
		lim.MaxMessages = doc.Limits.MaxMessages
	}
	return Configured{Settings: set, Limits: lim}
}
