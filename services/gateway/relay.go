package gateway

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"switchyard/services"
	"switchyard/services/affinity"
)

// Context relay (30-routing §10.4): when a session's connection nears the
// end of its quota, a summary of the conversation is made in the
// background; when the session later lands on another connection, the
// summary travels with it as system context, once per destination.
//
// Records live in memory with their TTL (contextRelay.handoffTtlMs); after
// a restart a session simply starts without carried-over context.

const relaySummaryPrompt = `Summarise the conversation below so another assistant can continue it. ` +
	`Answer with one JSON object with the keys "summary" (string), "keyDecisions" (array of strings), ` +
	`"taskProgress" (string) and "activeEntities" (array of strings), and nothing else.`

// relayConfig is the contextRelay.* part of a combo's effective config.
type relayConfig struct {
	threshold   float64
	model       string
	providers   []string
	maxMessages int
	ttl         time.Duration
}

func relayConfigOf(set *Settings, c *services.Combo) relayConfig {
	rc := relayConfig{threshold: 0.85, maxMessages: 30, ttl: 5 * time.Hour}
	for _, layer := range [2]*services.ComboConfig{&set.ComboDefaults, &c.Config} {
		m := layer.ContextRelay
		if m == nil {
			continue
		}
		if m.HandoffThreshold != nil {
			rc.threshold = *m.HandoffThreshold
		}
		if m.HandoffModel != nil && *m.HandoffModel != "" {
			rc.model = *m.HandoffModel
		}
		if m.HandoffProviders != nil {
			rc.providers = m.HandoffProviders
		}
		if v := m.MaxMessagesForSummary; v != nil && *v >= 1 {
			rc.maxMessages = *v
		}
		if v := m.HandoffTtlMs; v != nil && *v >= 1 {
			rc.ttl = time.Duration(*v) * time.Millisecond
		}
	}
	return rc
}

// HandoffSummary is the structured summary the handoff model returns.
type HandoffSummary struct {
	Summary        string   `json:"summary"`
	KeyDecisions   []string `json:"keyDecisions"`
	TaskProgress   string   `json:"taskProgress"`
	ActiveEntities []string `json:"activeEntities"`
}

// Handoff is one stored context-relay record, as persisted.
type Handoff struct {
	ID        string // hash of (client key, session key, combo)
	Source    string // the connection the summary was made on
	Summary   HandoffSummary
	Injected  []string // destination connections already given it
	ExpiresAt time.Time
}

// HandoffStore persists handoff records (30-routing §9: persisted, TTL).
type HandoffStore interface {
	LoadHandoffs(ctx context.Context, now time.Time) ([]Handoff, error)
	SaveHandoff(ctx context.Context, h Handoff) error
	DeleteExpiredHandoffs(ctx context.Context, now time.Time) (int, error)
}

// handoff is one record in memory.
type handoff struct {
	HandoffSummary
	source   string
	expires  time.Time
	injected map[string]bool
}

func (h *handoff) persisted(id string) Handoff {
	out := Handoff{ID: id, Source: h.source, Summary: h.HandoffSummary, ExpiresAt: h.expires, Injected: []string{}}
	for c := range h.injected {
		out.Injected = append(out.Injected, c)
	}
	return out
}

// relayStore holds the handoff records per (key, session, combo).
type relayStore struct {
	mu     sync.Mutex
	recs   map[string]*handoff
	busy   map[string]bool // a summary is being made
	wg     sync.WaitGroup  // summaries and writes in progress
	writes sync.WaitGroup  // writes in progress
	store  HandoffStore

	// shared is set when replicas share the store (ShareHandoffs,
	// relay_shared.go); nil in a single process.
	shared *relayFleet
}

// loadHandoffs loads the live handoff records and writes every later
// change through store.
func (g *Gateway) loadHandoffs(ctx context.Context, store HandoffStore) error {
	now := g.clock.Now()
	if _, err := store.DeleteExpiredHandoffs(ctx, now); err != nil {
		return err
	}
	hs, err := store.LoadHandoffs(ctx, now)
	if err != nil {
		return err
	}
	g.relay.mu.Lock()
	defer g.relay.mu.Unlock()
	g.relay.store = store
	if g.relay.recs == nil {
		g.relay.busy, g.relay.recs = map[string]bool{}, map[string]*handoff{}
	}
	for _, h := range hs {
		rec := &handoff{HandoffSummary: h.Summary, source: h.Source, expires: h.ExpiresAt, injected: map[string]bool{}}
		for _, c := range h.Injected {
			rec.injected[c] = true
		}
		g.relay.recs[h.ID] = rec
	}
	return nil
}

// saveHandoff writes a record in the background (never on the response path).
func (g *Gateway) saveHandoff(h Handoff) {
	store := g.relay.store
	if store == nil {
		return
	}
	g.relay.wg.Add(1)
	g.relay.writes.Add(1)
	go func() {
		defer g.relay.wg.Done()
		defer g.relay.writes.Done()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := store.SaveHandoff(ctx, h); err != nil {
			g.log.Load().Error("save context handoff", "err", err)
			return
		}
		g.announceHandoff(ctx, h.ID)
	}()
}

func relayID(req *Request, comboID string) string {
	return affinity.PinID(req.Key.ID, "relay:"+comboID, req.SessionKey)
}

// RelayRecords reports the live handoff records (tests, dashboard).
func (g *Gateway) RelayRecords() int {
	g.relay.mu.Lock()
	defer g.relay.mu.Unlock()
	now := g.clock.Now()
	n := 0
	for _, h := range g.relay.recs {
		if now.Before(h.expires) {
			n++
		}
	}
	return n
}

// WaitRelay waits for summaries and record writes in progress (tests).
func (g *Gateway) WaitRelay() { g.relay.wg.Wait() }

// WaitRelayWrites waits for handoff record writes (before the store closes).
func (g *Gateway) WaitRelayWrites() { g.relay.writes.Wait() }

// relayAfterSuccess starts a summary when the served connection's known
// long-window utilisation reached the threshold.
func (g *Gateway) relayAfterSuccess(t target, conn *services.Connection, req *Request, set *Settings) {
	if !explicitSession(req.SessionKey) || req.Route.Combo == nil || g.quota == nil {
		return // a session named by a header or body field, not a prompt hash
	}
	c, ok := g.reg.Snapshot().ComboByID(t.comboID)
	if !ok || c.Strategy != "context-relay" {
		return
	}
	rc := relayConfigOf(set, c)
	if len(rc.providers) > 0 && !slices.Contains(rc.providers, t.provider.ID) {
		return
	}
	now := g.clock.Now()
	v := g.quota.Windows(conn.ID, now)
	used := 0.0
	for _, w := range []float64{known(v.FiveHour.Known, v.FiveHour.Used), known(v.Daily.Known, v.Daily.Used),
		known(v.Weekly.Known, v.Weekly.Used), known(v.Monthly.Known, v.Monthly.Used)} {
		used = max(used, w)
	}
	if used < rc.threshold {
		return
	}
	id := relayID(req, c.ID)
	g.relay.mu.Lock()
	if g.relay.busy[id] {
		g.relay.mu.Unlock()
		return
	}
	if g.relay.busy == nil {
		g.relay.busy, g.relay.recs = map[string]bool{}, map[string]*handoff{}
	}
	g.relay.busy[id] = true
	g.relay.wg.Add(1)
	g.relay.mu.Unlock()

	lines := relayLines(req, rc.maxMessages)
	model := rc.model
	if model == "" {
		model = t.name()
	}
	sr := &Request{ID: req.ID + "-relay", Key: req.Key, Endpoint: "/v1/chat/completions", Inbound: InboundChat, Model: model,
		Received: now, Header: http.Header{}}
	go func() {
		defer g.relay.wg.Done()
		defer func() {
			g.relay.mu.Lock()
			delete(g.relay.busy, id)
			g.relay.mu.Unlock()
		}()
		// In a fleet one replica makes the summary (best effort).
		release, claimed := g.claimSummary(id)
		if !claimed {
			return
		}
		defer release()
		h, ok := g.summarise(sr, lines)
		if !ok {
			return
		}
		h.source, h.expires, h.injected = conn.ID, g.clock.Now().Add(rc.ttl), map[string]bool{}
		g.relay.mu.Lock()
		g.relay.recs[id] = h
		p := h.persisted(id)
		g.relay.mu.Unlock()
		g.saveHandoff(p)
	}()
}

func known(ok bool, u float64) float64 {
	if !ok {
		return 0
	}
	return u
}

// summarise routes the summary call as an internal request of the same
// key (60 s timeout) and parses its answer.
func (g *Gateway) summarise(sr *Request, lines string) (*handoff, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	route, gerr := Resolve(g.reg.Snapshot(), sr.Key, sr.Model)
	if gerr != nil {
		return nil, false
	}
	sr.Route = route
	body := map[string]any{"model": sr.Model, "messages": []map[string]string{
		{"role": "system", "content": relaySummaryPrompt}, {"role": "user", "content": lines}}}
	raw, _ := json.Marshal(body)
	_ = json.Unmarshal(raw, &sr.Body)
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, "/v1/chat/completions", nil)
	if err != nil {
		return nil, false
	}
	mw := newMemWriter()
	rec := g.serve(mw, hr, sr)
	rec.Endpoint = "internal:context-relay"
	g.logs.Record(rec)
	if mw.status != http.StatusOK {
		return nil, false
	}
	text := strings.TrimSpace(answerText(InboundChat, mw.buf.Bytes()))
	if text == "" {
		return nil, false
	}
	var h handoff
	trimmed := strings.TrimSuffix(strings.TrimPrefix(strings.TrimPrefix(text, "```json"), "```"), "```")
	if json.Unmarshal([]byte(strings.TrimSpace(trimmed)), &h.HandoffSummary) != nil || h.Summary == "" {
		h = handoff{HandoffSummary: HandoffSummary{Summary: text}} // not the JSON asked for: keep the raw text
	}
	return &h, true
}

// relayLines renders the last n messages as "role: text" lines.
func relayLines(req *Request, n int) string {
	var msgs []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	}
	_ = json.Unmarshal(req.Body["messages"], &msgs)
	if len(msgs) > n {
		msgs = msgs[len(msgs)-n:]
	}
	var sb strings.Builder
	for _, m := range msgs {
		var s string
		if json.Unmarshal(m.Content, &s) != nil {
			var parts []struct{ Text string }
			_ = json.Unmarshal(m.Content, &parts)
			for _, p := range parts {
				s += p.Text
			}
		}
		sb.WriteString(m.Role)
		sb.WriteString(": ")
		sb.WriteString(s)
		sb.WriteByte('\n')
	}
	return sb.String()
}

// relayInjection returns the request with the carried-over context
// inserted before the first non-system message, when the session has a
// record made on another connection not yet given to conn; nil otherwise.
// The record is marked as given to conn.
func (g *Gateway) relayInjection(t target, conn *services.Connection, req *Request) *Request {
	if !explicitSession(req.SessionKey) || t.comboID == "" || req.Inbound != InboundChat {
		return nil
	}
	id := relayID(req, t.comboID)
	h := g.lockRecord(id)
	defer g.relay.mu.Unlock()
	if h == nil || h.source == conn.ID || h.injected[conn.ID] {
		return nil
	}
	if !g.clock.Now().Before(h.expires) {
		delete(g.relay.recs, id)
		return nil
	}
	h.injected[conn.ID] = true
	g.saveHandoff(h.persisted(id))
	var sb strings.Builder
	sb.WriteString("Context carried over from an earlier session:\nSummary: ")
	sb.WriteString(h.Summary)
	if len(h.KeyDecisions) > 0 {
		sb.WriteString("\nKey decisions: " + strings.Join(h.KeyDecisions, "; "))
	}
	if h.TaskProgress != "" {
		sb.WriteString("\nProgress: " + h.TaskProgress)
	}
	if len(h.ActiveEntities) > 0 {
		sb.WriteString("\nActive entities: " + strings.Join(h.ActiveEntities, "; "))
	}
	out := *req
	out.Body = copyBody(req.Body)
	out.Body["messages"] = insertSystem(req.Body["messages"], sb.String(), true)
	return &out
}
