package gateway

import (
	"context"
	"encoding/json"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/tiktoken-go/tokenizer/codec"

	"switchyard/services"
	"switchyard/services/resilience"
	"switchyard/services/translate"
)

// countTokensTimeout bounds a forwarded count_tokens call: metadata must
// never hold a client (Claude Code asks before most turns), so a slow
// upstream falls back to the local count.
const countTokensTimeout = 10 * time.Second

// WarnTokenCountEstimated marks a count_tokens answer counted locally.
const WarnTokenCountEstimated = "token_count_estimated"

// o200k is the local tokenizer, built on first use: its vocabulary (about
// 200k entries, embedded in github.com/tiktoken-go/tokenizer) costs a few
// tens of MiB and a fraction of a second to load, which only count_tokens
// requests should pay, once.
var o200k = sync.OnceValue(func() *codec.Codec { return codec.NewO200kBase() })

// CountResult is the answer of CountTokens.
type CountResult struct {
	InputTokens int
	// Estimated is true when the count is local (warning token_count_estimated).
	Estimated bool
	// Provider and ConnectionID name the upstream that counted, when one did.
	Provider, ConnectionID string
}

// CountTokens answers POST /v1/messages/count_tokens (10-gateway-api §5.2):
// the first eligible target decides. An anthropic-format upstream counts
// (its …/v1/messages/count_tokens); any other target, no eligible target,
// or an upstream failure is counted locally with o200k_base over the
// request as it would be translated. It is metadata: no slot, no queue, no
// wait, and no outcome reaches the resilience state.
func (g *Gateway) CountTokens(ctx context.Context, req *Request) CountResult {
	s := g.reg.Snapshot()
	t, c, ok := g.countTarget(s, req.Route, req)
	if ok && t.provider.Format == services.FormatAnthropic {
		if n, ok := g.countUpstream(ctx, t, c, req); ok {
			return CountResult{InputTokens: n, Provider: t.provider.ID, ConnectionID: c.ID}
		}
	}
	return CountResult{InputTokens: CountLocal(req.Body), Estimated: true}
}

// countTarget is the first target, in configured order, with a usable
// connection: enabled, allowed to the key, not terminal and not blocked by
// a cooldown, lockout or open breaker. It reads state only.
func (g *Gateway) countTarget(s *Snapshot, r Route, req *Request) (target, *services.Connection, bool) {
	var targets []target
	if r.Combo == nil {
		targets = []target{{provider: r.Provider, model: r.Model}}
	} else {
		seen := map[string]bool{}
		var walk func(c *services.Combo, depth int)
		walk = func(c *services.Combo, depth int) {
			if seen[c.ID] || depth > 8 {
				return
			}
			seen[c.ID] = true
			for _, e := range c.Targets {
				if e.Enabled != nil && !*e.Enabled {
					continue
				}
				if e.ComboID != "" {
					if inner, ok := s.ComboByID(e.ComboID); ok && inner.Enabled {
						walk(inner, depth+1)
					}
					continue
				}
				if p, ok := s.Catalogue.Get(e.Provider); ok {
					t := target{provider: p, model: e.Model}
					if e.ConnectionID != nil {
						t.connID = *e.ConnectionID
					}
					targets = append(targets, t)
				}
			}
		}
		walk(r.Combo, 1)
	}
	for _, t := range targets {
		if g.res.Breakers.Status(t.provider.ID).State == resilience.BreakerOpen {
			continue
		}
		for _, c := range s.Connections(t.provider.ID) {
			if !c.Enabled || (t.connID != "" && c.ID != t.connID) || !req.Key.AllowsConnection(c.ID) || g.terminal(c.ID) {
				continue
			}
			if g.res.ConnectionBlocker(t.provider.ID, c.ID, t.model) != nil {
				continue
			}
			return t, c, true
		}
	}
	return target{}, nil, false
}

// countUpstream forwards the request to an anthropic-format upstream's
// count_tokens with model rewritten; ok=false on any failure.
func (g *Gateway) countUpstream(ctx context.Context, t target, c *services.Connection, req *Request) (int, bool) {
	body, err := encodeBody(req.Body, t.model)
	if err != nil {
		return 0, false
	}
	ctx, cancel := context.WithTimeout(ctx, countTokensTimeout)
	defer cancel()
	resp, err := g.send(ctx, t, c, "/messages/count_tokens", body, false, req.AnthropicBeta)
	if err != nil {
		return 0, false
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return 0, false
	}
	var out struct {
		InputTokens *int `json:"input_tokens"`
	}
	if json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&out) != nil || out.InputTokens == nil || *out.InputTokens < 0 {
		return 0, false
	}
	return *out.InputTokens, true
}

// CountLocal counts an Anthropic Messages body with o200k_base over the
// chat request it translates to: every message's text, tool calls and
// results, and the tool definitions, plus OpenAI's documented framing of
// 3 tokens per message and 3 for the reply.
func CountLocal(body map[string]json.RawMessage) int {
	chat, _, err := translate.AnthropicToChat(body, "count")
	if err != nil {
		return 0
	}
	var req struct {
		Messages []struct {
			Role      string          `json:"role"`
			Content   json.RawMessage `json:"content"`
			ToolCalls []struct {
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"messages"`
		Tools json.RawMessage `json:"tools"`
	}
	if json.Unmarshal(chat, &req) != nil {
		return 0
	}
	var b strings.Builder
	n := 3
	for _, m := range req.Messages {
		n += 3
		b.WriteString(m.Role)
		b.WriteByte('\n')
		b.WriteString(chatText(m.Content))
		for _, tc := range m.ToolCalls {
			b.WriteString(tc.Function.Name)
			b.WriteByte(' ')
			b.WriteString(tc.Function.Arguments)
		}
		b.WriteByte('\n')
	}
	if len(req.Tools) > 0 && string(req.Tools) != "null" {
		b.Write(req.Tools)
	}
	c, err := o200k().Count(b.String())
	if err != nil {
		return n
	}
	return n + c
}

// chatText flattens chat content: a string or text parts.
func chatText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &parts) != nil {
		return ""
	}
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Text)
	}
	return b.String()
}
