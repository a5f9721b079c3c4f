package gateway

import (
	"time"

	"switchyard/services"
)

// ComboConfig is the effective configuration of one combo (30-routing §3):
// built-in defaults ← routing.comboDefaults ← combo.config, merged per key.
// A direct provider/model request runs as an anonymous combo with the
// defaults ← routing.comboDefaults.
type ComboConfig struct {
	MaxRetries            int
	RetryDelay            time.Duration
	TargetTimeout         time.Duration // 0 = the gateway's setting
	MaxComboDepth         int
	SessionSticky         bool
	StickyRoundRobinLimit int
	StickyWeightedLimit   int
	QueueConcurrency      int // queue.concurrencyPerTarget; 0 = unlimited
	QueueDepth            int
	QueueTimeout          time.Duration
	CacheMinPrefixBytes   int
}

// DefaultComboConfig holds the built-in defaults of 30-routing §3.
func DefaultComboConfig() ComboConfig {
	return ComboConfig{MaxRetries: 1, RetryDelay: 2 * time.Second, MaxComboDepth: 3, SessionSticky: true,
		StickyRoundRobinLimit: 1, StickyWeightedLimit: 1, QueueDepth: 20, QueueTimeout: 30 * time.Second,
		CacheMinPrefixBytes: 1024}
}

// apply overlays one config layer; values were validated on save
// (services.ValidateComboConfig), so only their types are checked here.
func (c *ComboConfig) apply(cfg map[string]any) {
	if len(cfg) == 0 {
		return
	}
	num := func(m map[string]any, k string) (float64, bool) {
		v, ok := m[k].(float64)
		return v, ok
	}
	ms := func(v float64) time.Duration { return time.Duration(v) * time.Millisecond }
	if v, ok := num(cfg, "maxRetries"); ok {
		c.MaxRetries = int(v)
	}
	if v, ok := num(cfg, "retryDelayMs"); ok {
		c.RetryDelay = ms(v)
	}
	if v, ok := num(cfg, "targetTimeoutMs"); ok {
		c.TargetTimeout = ms(v)
	}
	if v, ok := num(cfg, "maxComboDepth"); ok && v >= 1 {
		c.MaxComboDepth = int(v)
	}
	if v, ok := cfg["sessionSticky"].(bool); ok {
		c.SessionSticky = v
	}
	if v, ok := num(cfg, "stickyRoundRobinLimit"); ok && v >= 1 {
		c.StickyRoundRobinLimit = int(v)
	}
	if v, ok := num(cfg, "stickyWeightedLimit"); ok && v >= 1 {
		c.StickyWeightedLimit = int(v)
	}
	if q, ok := cfg["queue"].(map[string]any); ok {
		if v, ok := num(q, "concurrencyPerTarget"); ok {
			c.QueueConcurrency = int(v)
		}
		if v, ok := num(q, "depth"); ok {
			c.QueueDepth = int(v)
		}
		if v, ok := num(q, "timeoutMs"); ok {
			c.QueueTimeout = ms(v)
		}
	}
	if q, ok := cfg["cache"].(map[string]any); ok {
		if v, ok := num(q, "minPrefixBytes"); ok {
			c.CacheMinPrefixBytes = int(v)
		}
	}
}

// comboConfig is the effective config of combo (nil = a direct request).
// It reads two small maps and allocates nothing.
func comboConfig(set *Settings, combo *services.Combo) ComboConfig {
	c := set.DirectCombo
	if combo != nil {
		c.apply(combo.Config)
	}
	return c
}

// ComboDefaults derives the anonymous-combo config from the setting
// routing.comboDefaults (called once per settings revision).
func ComboDefaults(defaults map[string]any) ComboConfig {
	c := DefaultComboConfig()
	c.apply(defaults)
	return c
}
