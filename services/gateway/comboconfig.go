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

func msPtr(v *int64) time.Duration { return time.Duration(*v) * time.Millisecond }

// apply overlays one config layer: every key it sets (validated on save by
// services.DecodeComboConfig) replaces the one below.
func (c *ComboConfig) apply(cfg *services.ComboConfig) {
	if cfg.MaxRetries != nil {
		c.MaxRetries = *cfg.MaxRetries
	}
	if cfg.RetryDelayMs != nil {
		c.RetryDelay = msPtr(cfg.RetryDelayMs)
	}
	if cfg.TargetTimeoutMs != nil {
		c.TargetTimeout = msPtr(cfg.TargetTimeoutMs)
	}
	if v := cfg.MaxComboDepth; v != nil && *v >= 1 {
		c.MaxComboDepth = *v
	}
	if cfg.SessionSticky != nil {
		c.SessionSticky = *cfg.SessionSticky
	}
	if v := cfg.StickyRoundRobinLimit; v != nil && *v >= 1 {
		c.StickyRoundRobinLimit = *v
	}
	if v := cfg.StickyWeightedLimit; v != nil && *v >= 1 {
		c.StickyWeightedLimit = *v
	}
	if q := cfg.Queue; q != nil {
		if q.ConcurrencyPerTarget != nil {
			c.QueueConcurrency = *q.ConcurrencyPerTarget
		}
		if q.Depth != nil {
			c.QueueDepth = *q.Depth
		}
		if q.TimeoutMs != nil {
			c.QueueTimeout = msPtr(q.TimeoutMs)
		}
	}
	if k := cfg.Cache; k != nil && k.MinPrefixBytes != nil {
		c.CacheMinPrefixBytes = *k.MinPrefixBytes
	}
}

// comboConfig is the effective config of combo (nil = a direct request).
// It reads typed fields and allocates nothing.
func comboConfig(set *Settings, combo *services.Combo) ComboConfig {
	c := set.DirectCombo
	if combo != nil {
		c.apply(&combo.Config)
	}
	return c
}

// ComboDefaults derives the anonymous-combo config from the setting
// routing.comboDefaults (called once per settings revision).
func ComboDefaults(defaults *services.ComboConfig) ComboConfig {
	c := DefaultComboConfig()
	c.apply(defaults)
	return c
}
