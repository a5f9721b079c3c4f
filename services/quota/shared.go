package quota

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"switchyard/services"
)

// Quota windows in a fleet (scale-out §3.4 row 11). Each replica learns the
// windows of the responses it proxies; with Options.Feed set it publishes
// every write of a connection's windows (the rows are upserted only over
// older observations, so replicas never write an older reading over a newer
// one), and applies the others' writes to its own tracker. A change that
// can move the quota gate is written at once, so a gate closed through A
// holds on B within the notification latency; the scoring values
// (headroom, auto) follow with the debounced writes, ≤ WriteInterval late.
// Observe and Gate are unchanged: they never touch the store or the feed.

// windowPayload is one window as a ChangeQuota carries it.
type windowPayload struct {
	Window     string  `json:"w"`
	Used       float64 `json:"u"`
	Limit      int64   `json:"l,omitempty"`
	Remaining  int64   `json:"r,omitempty"`
	ResetAt    int64   `json:"ra,omitempty"` // Unix ms; 0 unknown
	Source     string  `json:"s,omitempty"`
	ObservedAt int64   `json:"o"` // Unix ms
}

func encodeWindows(recs []Record) string {
	out := make([]windowPayload, len(recs))
	for i, r := range recs {
		out[i] = windowPayload{Window: r.Window, Used: r.Used, Limit: r.Limit, Remaining: r.Remaining,
			Source: r.Source, ObservedAt: r.ObservedAt.UnixMilli()}
		if !r.ResetAt.IsZero() {
			out[i].ResetAt = r.ResetAt.UnixMilli()
		}
	}
	b, _ := json.Marshal(out)
	return string(b)
}

func decodeWindows(connID, payload string) ([]Record, error) {
	var in []windowPayload
	if err := json.Unmarshal([]byte(payload), &in); err != nil {
		return nil, fmt.Errorf("quota: unreadable window change %q: %w", payload, err)
	}
	out := make([]Record, len(in))
	for i, w := range in {
		out[i] = Record{ConnectionID: connID, Window: w.Window, Used: w.Used, Limit: w.Limit, Remaining: w.Remaining,
			Source: w.Source, ObservedAt: time.UnixMilli(w.ObservedAt).UTC()}
		if w.ResetAt != 0 {
			out[i].ResetAt = time.UnixMilli(w.ResetAt).UTC()
		}
	}
	return out, nil
}

// announce publishes a connection's windows as written (fleet only).
func (t *Tracker) announce(ctx context.Context, connID string, recs []Record) {
	if t.feed == nil || len(recs) == 0 {
		return
	}
	c := services.Change{Kind: services.ChangeQuota, Key: connID, Payload: encodeWindows(recs)}
	if err := t.feed.Publish(ctx, c); err != nil {
		t.log.Warn("quota windows not published", "connection", connID, "err", err)
	}
}

// follow applies another replica's windows; a resync reloads the stored
// ones (newer observations in memory win either way).
func (t *Tracker) follow(ctx context.Context, c services.Change) error {
	switch {
	case c.Key == "":
		return t.Load(ctx)
	case c.Origin == "":
		return nil // written from this tracker's own windows
	}
	recs, err := decodeWindows(c.Key, c.Payload)
	if err != nil {
		return err
	}
	t.Apply(c.Key, recs)
	return nil
}

// Apply installs windows another replica observed, in memory only (they are
// stored already): per window the newer observation wins, as in Observe,
// and a change that can move the gate bumps Version.
func (t *Tracker) Apply(connID string, recs []Record) {
	if connID == "" || len(recs) == 0 {
		return
	}
	c := t.connFor(connID)
	for _, r := range recs {
		if windowIndex(r.Window) < 0 {
			continue
		}
		w := []Window{{Name: r.Window, Used: r.Used, ResetAt: r.ResetAt, Limit: r.Limit, Remaining: r.Remaining, Source: r.Source}}
		for {
			old := c.snap.Load()
			n := old.with(w, r.ObservedAt)
			if n == old {
				break
			}
			if c.snap.CompareAndSwap(old, n) {
				if gateChange(old, n) {
					t.version.Add(1)
				}
				break
			}
		}
	}
}
