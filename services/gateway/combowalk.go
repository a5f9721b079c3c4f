package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"strings"

	"switchyard/services"
	"switchyard/services/affinity"
	"switchyard/services/resilience"
	"switchyard/services/routing"
	"switchyard/services/traffic"
)

// candidateLevel names the strategies that order (entry, connection)
// candidates instead of entries (30-routing §1).
var candidateLevel = map[string]bool{
	"reset-aware": true, "reset-window": true, "headroom": true, "auto": true,
	"cache-optimized": true, "quota-share": true,
}

// spreadStrategies are the orderings that only spread load, so the session
// preference pass may keep a conversation on one entry (30-routing §6.4).
var spreadStrategies = map[string]bool{
	"weighted": true, "round-robin": true, "p2c": true, "random": true, "least-used": true, "strict-random": true,
}

// prefPinPrefix namespaces the session preference records in the affinity
// pin store: a record is a pin whose "provider" is prefPinPrefix + combo id
// and whose "connection" is the entry id. It shares the pin TTL
// (sessionAffinity.ttlMs), persistence and sweeping.
const prefPinPrefix = "combo:"

// expand lists the targets of a route in the order its combo strategy
// picks (30-routing §10); nested combos run with their own strategy as one
// step of the outer walk, depth-limited and cycle-safe. It advances the
// strategies' state, so it runs once per pass.
func (g *Gateway) expand(s *Snapshot, r Route, req *Request) []target {
	return g.expandFor(s, r, req, g.current(), nil)
}

// expandFor is expand recording skipped references (depth_exceeded, cycle,
// not_found, disabled) in st's diagnostics when st is not nil.
func (g *Gateway) expandFor(s *Snapshot, r Route, req *Request, set *Settings, st *attemptState) []target {
	if r.Combo == nil {
		return []target{{provider: r.Provider, model: r.Model}}
	}
	maxDepth := comboConfig(set, r.Combo).MaxComboDepth
	var out []target
	skip := func(e routing.Entry, reason string) {
		if st == nil {
			return
		}
		name := e.ComboRef
		if inner, ok := s.ComboByID(e.ComboRef); ok {
			name = inner.Name
		}
		st.noTimer = true
		ex := Exclusion{Target: "combo:" + name, Reason: reason}
		if len(st.diag) < 64 {
			st.diag = append(st.diag, ex)
		}
		if st.log != nil {
			st.log.skipped(ex, g.clock.Now())
		}
	}
	var walk func(c *services.Combo, depth int, path map[string]bool)
	walk = func(c *services.Combo, depth int, path map[string]bool) {
		path[c.ID] = true
		defer delete(path, c.ID)
		cfg := comboConfig(set, c)
		strat, _ := routing.Lookup(g.strategies, c.Strategy)
		name := strat.Name()
		entries := g.comboEntries(s, c, req, candidateLevel[name])
		rq := routing.Request{ComboID: c.ID, Now: g.clock.Now(), StickyRoundRobinLimit: cfg.StickyRoundRobinLimit,
			StickyWeightedLimit: cfg.StickyWeightedLimit}
		switch name {
		case "p2c", "auto":
			es := &entryStats{g: g, snap: s, entries: make(map[string]routing.Entry, len(entries))}
			for _, e := range entries {
				es.entries[e.ID] = e
			}
			rq.Stats = es
		case "cache-optimized":
			rq.CacheKey = routing.CacheAffinityKey(promptCacheKey(req), req.SessionKey, cachePrefix(req), cfg.CacheMinPrefixBytes)
		case "cost-optimized", "context-optimized":
			rq.Prices, rq.Context = g.prices, modelContext
			rq.PromptTokens = routing.EstimateTokens(promptBytes(req))
			rq.MaxOutputTokens = maxOutputTokens(req)
		case "quota-share":
			rq.InFlight = func(connID string) int { return g.reg.Runtime(connID).InFlight() }
			rq.MaxConcurrent = func(connID string) int {
				if cn, ok := s.Connection(connID); ok && cn.MaxConcurrent != nil {
					return *cn.MaxConcurrent
				}
				return 0
			}
		}
		if candidateLevel[name] {
			g.quotaSignals(&rq, s, c, name, set, req, entries)
		}
		ordered := strat.Order(rq, entries)
		prefPin := g.preferSession(c, name, cfg, req, ordered)
		pref, _ := strat.(routing.ConnectionPreferrer)
		for _, e := range ordered {
			if e.ComboRef != "" {
				inner, ok := s.ComboByID(e.ComboRef)
				switch {
				case !ok:
					skip(e, "not_found")
				case !inner.Enabled:
					skip(e, "disabled")
				case path[inner.ID]:
					skip(e, "cycle")
				case depth+1 > maxDepth:
					skip(e, "depth_exceeded")
				default:
					walk(inner, depth+1, path)
				}
				continue
			}
			p, ok := s.Catalogue.Get(e.Provider)
			if !ok {
				continue
			}
			tg := target{provider: p, model: e.Model, id: e.ID, connID: e.ConnectionID, comboID: c.ID, prefPin: prefPin,
				relay: c.Strategy == "context-relay"}
			if pref != nil {
				if id, ok := pref.PreferredConnection(c.ID, e.ID); ok {
					tg.prefConn = id
				}
			}
			out = append(out, tg)
		}
	}
	walk(r.Combo, 1, map[string]bool{})
	return out
}

// comboEntries builds the strategy input of one combo in configured order:
// its enabled entries, or for a candidate-level strategy one candidate per
// usable connection of each unpinned model entry (priority, then id).
func (g *Gateway) comboEntries(s *Snapshot, c *services.Combo, req *Request, candidates bool) []routing.Entry {
	entries := make([]routing.Entry, 0, len(c.Targets))
	for i, t := range c.Targets {
		if !t.IsEnabled() {
			continue
		}
		e := routing.Entry{Index: i, ID: t.ID, Provider: t.Provider, Model: t.Model, Weight: t.WeightValue(), Available: true}
		if t.ConnectionID != nil {
			e.ConnectionID = *t.ConnectionID
		}
		if t.Kind == services.KindCombo {
			inner, ok := s.ComboByID(t.ComboID)
			e.ComboRef = t.ComboID
			e.Available = ok && inner.Enabled
			entries = append(entries, e)
			continue
		}
		if !candidates || e.ConnectionID != "" {
			e.Available = g.entryAvailable(s, t.Provider, e.ConnectionID, t.Model, req)
			entries = append(entries, e)
			continue
		}
		for _, cn := range s.Connections(t.Provider) { // already in configured order
			if !cn.Enabled || !req.Key.AllowsConnection(cn.ID) || g.terminal(cn.ID) {
				continue
			}
			ce := e
			ce.ConnectionID = cn.ID
			ce.Available = g.entryAvailable(s, t.Provider, cn.ID, t.Model, req)
			entries = append(entries, ce)
		}
	}
	return entries
}

// terminal reports a banned, expired or credits-exhausted connection.
func (g *Gateway) terminal(connID string) bool {
	term, _ := g.res.Cooldowns.Flags(connID)
	return term != ""
}

// entryAvailable is the availability snapshot strategies order on (30-routing
// §5): the provider's breaker is not open and some enabled connection (the
// pinned one when given) is not blocked by a cooldown, lockout or quota gate.
func (g *Gateway) entryAvailable(s *Snapshot, provider, connID, model string, req *Request) bool {
	if g.res.Breakers.Status(provider).State == resilience.BreakerOpen {
		return false
	}
	for _, c := range s.Connections(provider) {
		if !c.Enabled || (connID != "" && c.ID != connID) || !req.Key.AllowsConnection(c.ID) {
			continue
		}
		if g.res.ConnectionBlocker(provider, c.ID, model) == nil && g.quotaBlocker(c, g.clock.Now()) == nil {
			return true
		}
	}
	return false
}

// preferSession applies the session preference pass of 30-routing §6.4 to
// an ordering in place and returns the record's pin id ("" when the pass
// does not apply to this request and combo).
func (g *Gateway) preferSession(c *services.Combo, strategy string, cfg ComboConfig, req *Request, ordered []routing.Entry) string {
	if !cfg.SessionSticky || !spreadStrategies[strategy] {
		return ""
	}
	pin := g.sessionPin(c, req)
	if pin == "" {
		return ""
	}
	entryID, ok := g.traffic.Pins.Lookup(pin)
	if !ok {
		return pin
	}
	for i, e := range ordered {
		if e.ID == entryID && e.Available {
			copy(ordered[1:i+1], ordered[:i])
			ordered[0] = e
			break
		}
	}
	return pin
}

// sessionPin is the id of the session preference record of (key, session,
// combo), "" when the request has no explicit session, is lease-managed, or
// session affinity is off (sessionAffinity.ttlMs = 0).
func (g *Gateway) sessionPin(c *services.Combo, req *Request) string {
	if req.LeaseConnID != "" || !explicitSession(req.SessionKey) || g.traffic.Pins == nil ||
		g.traffic.Doc().SessionAffinity.TTLMs <= 0 {
		return ""
	}
	return affinity.PinID(req.Key.ID, prefPinPrefix+c.ID, req.SessionKey)
}

// explicitSession reports a session key from a header or an explicit body
// session field; the prompt-cache and first-input fallbacks do not count,
// so identical stateless prompts still spread (30-routing §6.4).
func explicitSession(key string) bool {
	src, _, ok := strings.Cut(key, ":")
	if !ok {
		return false
	}
	switch src {
	case affinity.SourceHeader, affinity.SourceMetadata, affinity.SourceConversation, affinity.SourceSession, affinity.SourceMetadataUser:
		return true
	}
	return false
}

// rememberSession writes (success) or drops (failure) the session
// preference record of a combo entry.
func (g *Gateway) rememberSession(ctx context.Context, t target, req *Request, ok bool) {
	if t.prefPin == "" {
		return
	}
	if ok {
		g.storeError(StoreAffinityPin, g.traffic.Pins.Pin(context.WithoutCancel(ctx), t.prefPin, req.Key.ID, prefPinPrefix+t.comboID, t.id))
		return
	}
	if id, found := g.traffic.Pins.Lookup(t.prefPin); found && id == t.id {
		g.storeError(StoreAffinityPin, g.traffic.Pins.Drop(context.WithoutCancel(ctx), t.prefPin))
	}
}

// promptCacheKey is the body's prompt_cache_key string, "" when absent.
func promptCacheKey(req *Request) string {
	raw, ok := req.Body["prompt_cache_key"]
	if !ok {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return ""
	}
	return s
}

// cachePrefix is the canonical JSON of (system text, tools, first user
// message content) that keys cache-optimized routing without an explicit
// key (30-routing §10.17).
func cachePrefix(req *Request) []byte {
	var msgs []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	}
	if raw, ok := req.Body["messages"]; ok {
		_ = json.Unmarshal(raw, &msgs)
	}
	var system []json.RawMessage
	if raw, ok := req.Body["system"]; ok { // Anthropic messages
		system = append(system, raw)
	}
	var first json.RawMessage
	for _, m := range msgs {
		switch {
		case m.Role == "system" || m.Role == "developer":
			system = append(system, m.Content)
		case m.Role == "user" && first == nil:
			first = m.Content
		}
	}
	if first == nil && len(system) == 0 {
		return nil
	}
	var b bytes.Buffer
	_ = json.NewEncoder(&b).Encode([]any{system, req.Body["tools"], first})
	return b.Bytes()
}

// entryKey keys the combo entry queue (30-routing §6.5).
func entryKey(t target) string { return t.comboID + "\x00" + t.id }

// entrySlotConfig is the entry queue of one combo: always fail-open.
func entrySlotConfig(cfg ComboConfig) traffic.SlotConfig {
	return traffic.SlotConfig{Enabled: true, QueueDepth: cfg.QueueDepth, SlotWaitMs: cfg.QueueTimeout.Milliseconds(), FailOpen: true}
}

// priceLookup reads the price table with the admin's overrides, or the
// built-in list prices alone when there is none.
func priceLookup(p *services.Prices) func(provider, model string) (routing.Price, bool) {
	if p == nil {
		return modelPrice
	}
	return func(provider, model string) (routing.Price, bool) {
		m, _, ok := p.Lookup(provider, model)
		if !ok || (m.InputPerMTok == 0 && m.OutputPerMTok == 0) {
			return routing.Price{}, false
		}
		return routing.Price{InputPerMTok: m.InputPerMTok, OutputPerMTok: m.OutputPerMTok}, true
	}
}

// modelPrice and modelContext read the built-in model table (§8.2).
func modelPrice(provider, model string) (routing.Price, bool) {
	m, ok := services.LookupModelMeta(provider, model)
	if !ok || (m.InputPerMTok == 0 && m.OutputPerMTok == 0) {
		return routing.Price{}, false
	}
	return routing.Price{InputPerMTok: m.InputPerMTok, OutputPerMTok: m.OutputPerMTok}, true
}

func modelContext(provider, model string) (int, bool) {
	m, ok := services.LookupModelMeta(provider, model)
	return m.ContextTokens, ok && m.ContextTokens > 0
}

// promptBytes is B of 30-routing §10.16: the UTF-8 bytes of every string in
// the system prompt, the messages (text parts, tool-call arguments, tool
// results) and the Responses input and instructions, plus the JSON of tools.
func promptBytes(req *Request) int {
	n := len(req.Body["tools"])
	for _, field := range []string{"system", "messages", "input", "instructions"} {
		raw, ok := req.Body[field]
		if !ok {
			continue
		}
		var v any
		if json.Unmarshal(raw, &v) == nil {
			n += stringBytes(v)
		}
	}
	return n
}

func stringBytes(v any) int {
	switch x := v.(type) {
	case string:
		return len(x)
	case []any:
		n := 0
		for _, e := range x {
			n += stringBytes(e)
		}
		return n
	case map[string]any:
		n := 0
		for k, e := range x {
			if k == "role" || k == "type" || k == "id" || k == "tool_call_id" || k == "name" {
				continue // structure, not text
			}
			n += stringBytes(e)
		}
		return n
	}
	return 0
}

// maxOutputTokens is max_tokens ?? max_completion_tokens ?? max_output_tokens,
// 0 when the request sets none.
func maxOutputTokens(req *Request) int {
	for _, f := range []string{"max_tokens", "max_completion_tokens", "max_output_tokens"} {
		var n int
		if raw, ok := req.Body[f]; ok && json.Unmarshal(raw, &n) == nil && n > 0 {
			return n
		}
	}
	return 0
}

// quotaSignals fills what reset-aware, reset-window, headroom and auto read
// (30-routing §8.3, §10.10–10.14).
func (g *Gateway) quotaSignals(rq *routing.Request, s *Snapshot, c *services.Combo, name string, set *Settings, req *Request, entries []routing.Entry) {
	if g.quota != nil {
		rq.Quota = g.quota.QuotaFunc(rq.Now)
	}
	cfg := routing.StrategyConfigFrom(&set.ComboDefaults, &c.Config)
	rq.Config = &cfg
	if name != "auto" {
		return
	}
	rq.Prices, rq.Context = g.prices, modelContext
	if req.Header != nil {
		rq.Mode = req.Header.Get("X-Switchyard-Mode")
		if _, ok := routing.ModePackForHeader(rq.Mode); rq.Mode != "" && !ok && !slices.Contains(req.Warnings, "mode_ignored") {
			req.Warnings = append(req.Warnings, "mode_ignored") // 10-gateway-api §8
		}
	}
	_, reasoning := req.Body["reasoning_effort"]
	if _, ok := req.Body["thinking"]; ok {
		reasoning = true
	}
	rq.Task = routing.TaskOf(lastUserText(req), req.ToolCount > 0, reasoning)
	rq.TaskFitness = set.TaskFitness
	if pin := g.sessionPin(c, req); pin != "" {
		rq.SessionEntryID, _ = g.traffic.Pins.Lookup(pin)
	}
	avail := map[string]int{}
	for _, e := range entries {
		if e.Available && e.ConnectionID != "" {
			avail[e.Provider]++
		}
	}
	rq.Signals = func(e routing.Entry) routing.CandidateSignals {
		sig := routing.CandidateSignals{ProviderConnections: avail[e.Provider],
			Breaker: routing.BreakerState(g.res.Breakers.Status(e.Provider).State)}
		if e.ConnectionID != "" {
			if cn, ok := s.Connection(e.ConnectionID); ok {
				sig.Tier = cn.Tier
			}
			ts := g.stats.Merge(e.Provider, e.Model, []string{e.ConnectionID})
			if ts.P95LatencyMs != nil {
				sig.LatencyKnown, sig.P95Ms, sig.StddevMs = true, *ts.P95LatencyMs, *ts.StddevMs
			}
		}
		return sig
	}
}

// lastUserText is the text of the request's last user message (chat or
// messages format), for auto's task classification.
func lastUserText(req *Request) string {
	var msgs []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	}
	if json.Unmarshal(req.Body["messages"], &msgs) != nil {
		return ""
	}
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role != "user" {
			continue
		}
		var s string
		if json.Unmarshal(msgs[i].Content, &s) == nil {
			return s
		}
		var parts []struct{ Text string }
		_ = json.Unmarshal(msgs[i].Content, &parts)
		var sb strings.Builder
		for _, p := range parts {
			sb.WriteString(p.Text)
		}
		return sb.String()
	}
	return ""
}
