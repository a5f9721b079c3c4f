package gateway

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"time"

	"switchyard/services"
)

// TestConnection sends one minimal request on a connection — list models
// when the provider supports it, else a one-token chat to its default model —
// within 15 s. It never changes cooldown, breaker, lockout, affinity or
// terminal state (40-admin-api §5).
func (g *Gateway) TestConnection(ctx context.Context, c services.Connection) services.TestResult {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	snap := g.reg.Snapshot()
	p, ok := snap.Catalogue.Get(c.Provider)
	res := services.TestResult{At: g.clock.Now().UTC()}
	if !ok {
		res.Message = "Unknown provider."
		return res
	}
	start := time.Now()
	cl, err := g.up.client(&c)
	if err != nil {
		res.Message = "The connection's proxy URL is invalid."
		return res
	}
	var req *http.Request
	if p.ListsModels && p.Format == services.FormatOpenAI {
		base := c.EffectiveBaseURL(p)
		req, err = http.NewRequestWithContext(context.WithValue(ctx, egressKey{}, egressPolicy{local: p.AuthClass == services.AuthLocal}),
			http.MethodGet, base+"/models", nil)
		if err == nil {
			req.Header.Set("Accept", "application/json")
			req.Header.Set("User-Agent", g.up.userAgent)
			setAuth(req.Header, p, &c)
		}
	} else {
		model := c.DefaultModel
		if model == "" && len(p.Models) > 0 {
			model = p.Models[0]
		}
		path := "/chat/completions"
		body, _ := json.Marshal(map[string]any{"model": model, "max_tokens": 1, "messages": []map[string]string{{"role": "user", "content": "Reply with OK"}}})
		if p.Format == services.FormatAnthropic {
			path = "/messages"
		}
		req, err = g.up.newRequest(ctx, p, &c, path, body, false)
	}
	if err != nil {
		res.Message = "The request could not be built: " + err.Error()
		return res
	}
	resp, err := cl.Do(req)
	res.LatencyMs = time.Since(start).Milliseconds()
	if err != nil {
		r := transportResult(ctx, err)
		res.Reason, res.Message = "transient", r.message
		return res
	}
	defer resp.Body.Close()
	if g.quota != nil {
		g.quota.Observe(c.ID, resp.Header, g.clock.Now()) // a test refreshes the quota windows (30-routing §12 case 4)
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	b = services.NewCredentialRedactor(services.ConnectionSecrets(&c)...).Bytes(b)
	res.Status = resp.StatusCode
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		res.OK = true
		var list struct {
			Data []struct {
				ID string `json:"id"`
			} `json:"data"`
		}
		if json.Unmarshal(b, &list) == nil {
			for _, m := range list.Data {
				res.Models = append(res.Models, m.ID)
			}
		}
		res.Message = "OK"
		return res
	}
	_, _, msg := parseUpstreamError(b)
	res.Message = strconv.Itoa(resp.StatusCode) + " " + http.StatusText(resp.StatusCode)
	switch resp.StatusCode {
	case 401, 403:
		res.Reason = "auth_error"
		res.Message += " — check the API key"
	case 429:
		res.Reason = "rate_limit"
	default:
		if resp.StatusCode >= 500 {
			res.Reason = "server_error"
		}
	}
	if msg != "" && resp.StatusCode != 401 && resp.StatusCode != 403 {
		res.Message += ": " + msg
	}
	return res
}

// ExplainTarget is one element of a combo's routing preview.
type ExplainTarget struct {
	Index        int                 `json:"index"`
	Target       string              `json:"target"`
	Eligible     bool                `json:"eligible"`
	Reason       string              `json:"reason,omitempty"`
	RetryAfterMs *int64              `json:"retryAfterMs,omitempty"`
	Connections  []ExplainConnection `json:"connections,omitempty"`
}

// ExplainConnection is one connection of an explained target.
type ExplainConnection struct {
	ID       string `json:"id"`
	Eligible bool   `json:"eligible"`
	Reason   string `json:"reason,omitempty"`
}

// Explain returns the order a combo's strategy would use right now, with
// each target's eligibility (read-only; random strategies show one draw).
func (g *Gateway) Explain(c *services.Combo) (strategy string, sample bool, out []ExplainTarget) {
	snap := g.reg.Snapshot()
	req := &Request{Route: Route{Combo: c}, Key: services.APIKey{}}
	switch c.Strategy {
	case "weighted", "random", "strict-random", "p2c", "round-robin":
		sample = true
	}
	for i, t := range g.expand(snap, req.Route, req) {
		et := ExplainTarget{Index: i, Target: t.name(), Eligible: false}
		if adm, blk := g.res.AllowProvider(t.provider.ID, t.provider.AuthClass, t.connID); blk != nil {
			et.Reason = blk.Reason
			ms := blk.RetryAfter.Milliseconds()
			et.RetryAfterMs = &ms
			out = append(out, et)
			continue
		} else {
			g.res.Release(adm)
		}
		for _, cn := range snap.Connections(t.provider.ID) {
			if t.connID != "" && cn.ID != t.connID {
				continue
			}
			ec := ExplainConnection{ID: cn.ID, Eligible: cn.Enabled}
			if !cn.Enabled {
				ec.Reason = "disabled"
			} else if b := g.res.ConnectionBlocker(t.provider.ID, cn.ID, t.model); b != nil {
				ec.Eligible, ec.Reason = false, b.Reason
			}
			et.Eligible = et.Eligible || ec.Eligible
			et.Connections = append(et.Connections, ec)
		}
		if !et.Eligible && et.Reason == "" {
			et.Reason = "unavailable"
		}
		out = append(out, et)
	}
	return c.Strategy, sample, out
}
