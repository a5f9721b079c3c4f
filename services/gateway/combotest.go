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

// Combo test outcomes (40-admin-api §6).
const (
	ComboTestOK      = "ok"
	ComboTestError   = "error"
	ComboTestSkipped = "skipped"
)

// ComboTestTimeout bounds the probe of one combo target.
const ComboTestTimeout = 20 * time.Second

// ComboTestResult is the outcome of one target of a combo test.
type ComboTestResult struct {
	Index          int    `json:"index"`
	Target         string `json:"target"`
	Provider       string `json:"provider,omitempty"`
	Model          string `json:"model,omitempty"`
	ConnectionID   string `json:"connectionId,omitempty"`
	ConnectionName string `json:"connectionName,omitempty"`
	Outcome        string `json:"outcome"`
	OK             bool   `json:"ok"`
	Status         int    `json:"status,omitempty"`
	LatencyMs      *int64 `json:"latencyMs,omitempty"`
	Reason         string `json:"reason,omitempty"`
	Message        string `json:"message,omitempty"`
	SkipReason     string `json:"skipReason,omitempty"`
	RetryAfterMs   *int64 `json:"retryAfterMs,omitempty"`
}

// TestCombo probes every target of a combo in listed order with one small
// real request ("Reply with OK", max_tokens 1) to the target's model, within
// ComboTestTimeout each (40-admin-api §6, 50-dashboard §6.5). Each model
// target uses its pinned connection, else the first connection of the
// provider that routing could use right now. A target the resilience gates
// hold back (breaker open, window gate, every connection cooling, locked,
// terminal or out of quota) is reported as skipped with the reason, unless force is set, in
// which case the probe goes to the first enabled connection anyway. Combo
// references and disabled targets are skipped. The probe is the connection
// test's chat probe (probe.go): it never changes cooldown, breaker, lockout,
// affinity or terminal state, and it is not counted as traffic.
func (g *Gateway) TestCombo(ctx context.Context, c *services.Combo, force bool) []ComboTestResult {
	out := make([]ComboTestResult, 0, len(c.Targets))
	for i, t := range c.Targets {
		if ctx.Err() != nil {
			break
		}
		out = append(out, g.testTarget(ctx, i, t, force))
	}
	return out
}

func (g *Gateway) testTarget(ctx context.Context, index int, t services.Target, force bool) ComboTestResult {
	snap := g.reg.Snapshot()
	r := ComboTestResult{Index: index, Target: t.Name(), Provider: t.Provider, Model: t.Model, Outcome: ComboTestSkipped}
	skip := func(reason string, retryAfter time.Duration) ComboTestResult {
		r.SkipReason = reason
		if retryAfter > 0 {
			ms := retryAfter.Milliseconds()
			r.RetryAfterMs = &ms
		}
		return r
	}
	switch {
	case t.Kind == services.KindCombo:
		if inner, ok := snap.ComboByID(t.ComboID); ok {
			r.Target = "combo " + inner.Name
		}
		return skip("combo_reference", 0)
	case !t.IsEnabled():
		return skip("disabled", 0)
	}
	p, ok := snap.Catalogue.Get(t.Provider)
	if !ok {
		return skip("unknown_provider", 0)
	}
	pin := ""
	if t.ConnectionID != nil {
		pin = *t.ConnectionID
	}
	if adm, blk := g.res.AllowProvider(p.ID, p.AuthClass, pin); blk != nil {
		if !force {
			return skip(blk.Reason, blk.RetryAfter)
		}
	} else {
		g.res.Release(adm) // a test never gives the breaker a verdict
	}
	var chosen, fallback *services.Connection
	var blocker string
	var retry time.Duration
	for _, cn := range snap.Connections(p.ID) {
		if (pin != "" && cn.ID != pin) || !cn.Enabled {
			continue
		}
		if fallback == nil {
			fallback = cn
		}
		b := g.res.ConnectionBlocker(p.ID, cn.ID, t.Model)
		if b == nil {
			b = g.quotaBlocker(cn, g.clock.Now())
		}
		if b == nil {
			chosen = cn
			break
		}
		if blocker == "" || (b.RetryAfter > 0 && (retry == 0 || b.RetryAfter < retry)) {
			blocker, retry = b.Reason, b.RetryAfter
		}
	}
	switch {
	case chosen != nil:
	case fallback == nil && pin != "":
		if _, exists := snap.Connection(pin); exists {
			return skip("connection_disabled", 0)
		}
		return skip("connection_missing", 0)
	case fallback == nil:
		return skip("no_enabled_connection", 0)
	case !force:
		return skip(blocker, retry)
	default:
		chosen = fallback
	}
	r.ConnectionID, r.ConnectionName = chosen.ID, chosen.Name
	res := g.probeModel(ctx, p, chosen, t.Model, ComboTestTimeout)
	r.OK, r.Status, r.Reason, r.Message = res.OK, res.Status, res.Reason, res.Message
	lat := res.LatencyMs
	r.LatencyMs = &lat
	r.Outcome = ComboTestError
	if res.OK {
		r.Outcome = ComboTestOK
	}
	return r
}

// probeModel sends the connection test's one-token chat ("Reply with OK") to
// model on connection c and classifies the answer as TestConnection does.
func (g *Gateway) probeModel(ctx context.Context, p services.Provider, c *services.Connection, model string, timeout time.Duration) services.TestResult {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	res := services.TestResult{At: g.clock.Now().UTC()}
	cl, err := g.up.client(c)
	if err != nil {
		res.Message = "The connection's proxy URL is invalid."
		return res
	}
	path := "/chat/completions"
	if p.Format == services.FormatAnthropic {
		path = "/messages"
	}
	body, _ := json.Marshal(map[string]any{"model": model, "max_tokens": 1, "messages": []map[string]string{{"role": "user", "content": "Reply with OK"}}})
	req, err := g.up.newRequest(ctx, p, c, path, body, false)
	if err != nil {
		res.Message = "The request could not be built: " + err.Error()
		return res
	}
	start := time.Now()
	resp, err := cl.Do(req)
	res.LatencyMs = time.Since(start).Milliseconds()
	if err != nil {
		res.Reason, res.Message = "transient", transportResult(ctx, err).message
		return res
	}
	defer resp.Body.Close()
	if g.quota != nil {
		g.quota.Observe(c.ID, resp.Header, g.clock.Now()) // like a connection test, it refreshes the quota windows
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	b = services.NewCredentialRedactor(services.ConnectionSecrets(c)...).Bytes(b)
	res.Status = resp.StatusCode
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		res.OK, res.Message = true, "OK"
		return res
	}
	_, _, msg := parseUpstreamError(b)
	res.Message = strconv.Itoa(resp.StatusCode) + " " + http.StatusText(resp.StatusCode)
	switch {
	case resp.StatusCode == 401 || resp.StatusCode == 403:
		res.Reason = "auth_error"
		res.Message += " — check the API key"
	case resp.StatusCode == 404:
		res.Reason = "not_found"
	case resp.StatusCode == 429:
		res.Reason = "rate_limit"
	case resp.StatusCode >= 500:
		res.Reason = "server_error"
	}
	if msg != "" && resp.StatusCode != 401 && resp.StatusCode != 403 {
		res.Message += ": " + msg
	}
	return res
}
