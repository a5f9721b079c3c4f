package gateway

import (
	"encoding/json"
	"time"

	"switchyard/services"
)

// WatchdogConfig is streamRecovery.throughputWatchdog (20-resilience §11).
type WatchdogConfig struct {
	Enabled                 bool
	Warmup                  time.Duration
	Window                  time.Duration
	MinUsefulBytesPerSecond int
	MinUsefulBytes          int
}

// Watchdog judges the useful-text throughput of one stream attempt. It is
// data checked against the time it is given: no timers of its own.
type Watchdog struct {
	cfg       WatchdogConfig
	headersAt time.Time
	protected bool
	protEnded time.Time
	samples   []wdSample
}

type wdSample struct {
	at    time.Time
	bytes int
}

// NewWatchdog starts judging an attempt whose headers arrived at headersAt.
func NewWatchdog(cfg WatchdogConfig, headersAt time.Time) *Watchdog {
	return &Watchdog{cfg: cfg, headersAt: headersAt}
}

// Observe records one upstream event: its useful text bytes, and whether it
// is a protected-phase event (tool calls, reasoning). Useful text ends the
// protected phase.
func (w *Watchdog) Observe(at time.Time, useful int, protected bool) {
	if w == nil {
		return
	}
	switch {
	case useful > 0:
		if w.protected {
			w.protected, w.protEnded = false, at
		}
		w.samples = append(w.samples, wdSample{at: at, bytes: useful})
	case protected:
		w.protected = true
	}
}

// Abort reports whether the attempt's throughput is too low at now.
func (w *Watchdog) Abort(now time.Time) bool {
	if w == nil || !w.cfg.Enabled || w.protected {
		return false
	}
	judgeFrom := w.headersAt.Add(w.cfg.Warmup + w.cfg.Window)
	if !w.protEnded.IsZero() {
		if t := w.protEnded.Add(w.cfg.Window); t.After(judgeFrom) {
			judgeFrom = t
		}
	}
	if now.Before(judgeFrom) {
		return false
	}
	cut := now.Add(-w.cfg.Window)
	i := 0
	for i < len(w.samples) && !w.samples[i].at.After(cut) {
		i++
	}
	w.samples = w.samples[i:]
	bytes := 0
	for _, s := range w.samples {
		bytes += s.bytes
	}
	measurable := bytes == 0 || bytes >= w.cfg.MinUsefulBytes
	rate := float64(bytes) / w.cfg.Window.Seconds()
	return measurable && rate < float64(w.cfg.MinUsefulBytesPerSecond)
}

// nativeUseful measures an upstream event in its own format: useful text
// bytes, and whether it belongs to a protected phase.
func nativeUseful(format services.WireFormat, data []byte) (useful int, protected bool) {
	if format == services.FormatAnthropic {
		var ev struct {
			Type  string `json:"type"`
			Delta struct {
				Type string `json:"type"`
				Text string `json:"text"`
			} `json:"delta"`
			ContentBlock struct {
				Type string `json:"type"`
			} `json:"content_block"`
		}
		if json.Unmarshal(data, &ev) != nil {
			return 0, false
		}
		switch {
		case ev.Type == "content_block_delta" && ev.Delta.Type == "text_delta":
			return len(ev.Delta.Text), false
		case ev.Type == "content_block_delta":
			return 0, ev.Delta.Type == "thinking_delta" || ev.Delta.Type == "signature_delta" || ev.Delta.Type == "input_json_delta"
		case ev.Type == "content_block_start":
			switch ev.ContentBlock.Type {
			case "thinking", "redacted_thinking", "tool_use", "server_tool_use":
				return 0, true
			}
		}
		return 0, false
	}
	var probe chunkProbe
	if json.Unmarshal(data, &probe) != nil {
		return 0, false
	}
	for _, c := range probe.Choices {
		d := c.Delta
		if d.Content != nil {
			useful += len(*d.Content)
		}
		if (len(d.ToolCalls) > 0 && string(d.ToolCalls) != "null") || (d.ReasoningContent != nil && *d.ReasoningContent != "") ||
			(d.Reasoning != nil && *d.Reasoning != "") {
			protected = true
		}
	}
	return useful, protected && useful == 0
}
