package handlers

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"switchyard/services"
	"switchyard/services/stats"
)

// TrafficSummaries summarises the in-memory traffic buckets (services/stats).
type TrafficSummaries interface {
	Summary(window string) stats.Summary
}

// MetricsAPI serves GET /api/metrics/summary (40-admin-api §4.3): the
// Overview's figures for the last hour or day, from memory.
type MetricsAPI struct {
	*API
	Stats TrafficSummaries
	// Names maps connection ids to names (nil = ids only).
	Names func() map[string]string
}

type summaryPointJSON struct {
	T       string `json:"t"`
	OK      int    `json:"ok"`
	Failed  int    `json:"failed"`
	Aborted int    `json:"aborted"`
}

type failingTargetJSON struct {
	Provider     string  `json:"provider"`
	Model        string  `json:"model"`
	ConnectionID *string `json:"connectionId"`
	Failures     int     `json:"failures"`
	LastError    string  `json:"lastError"`
	LastErrorAt  string  `json:"lastErrorAt"`
}

// usageJSON is the traffic and estimated cost of one key, connection or model.
type usageJSON struct {
	KeyID          string  `json:"keyId,omitempty"`
	Name           string  `json:"name,omitempty"`
	Prefix         string  `json:"prefix,omitempty"`
	ConnectionID   string  `json:"connectionId,omitempty"`
	ConnectionName string  `json:"connectionName,omitempty"`
	Model          string  `json:"model,omitempty"`
	Provider       string  `json:"provider,omitempty"`
	Requests       int     `json:"requests"`
	TokensIn       int64   `json:"tokensIn"`
	TokensOut      int64   `json:"tokensOut"`
	USD            float64 `json:"usd"`
	Unpriced       int     `json:"unpricedRequests"`
}

// costJSON is the estimated cost of the window. estimate is always true:
// the figures come from list prices (or overrides), never from a bill.
type costJSON struct {
	Estimate     bool        `json:"estimate"`
	USD          float64     `json:"usd"`
	Unpriced     int         `json:"unpricedRequests"`
	ByKey        []usageJSON `json:"byKey"`
	ByConnection []usageJSON `json:"byConnection"`
	ByModel      []usageJSON `json:"byModel"`
}

type summaryJSON struct {
	Window       string   `json:"window"`
	Since        string   `json:"since"`
	SinceStart   bool     `json:"sinceStart"`
	Requests     int      `json:"requests"`
	Succeeded    int      `json:"succeeded"`
	Failed       int      `json:"failed"`
	Aborted      int      `json:"aborted"`
	SuccessRate  *float64 `json:"successRate"`
	Failovers    int      `json:"failovers"`
	LatencyP50Ms *int64   `json:"latencyP50Ms"`
	LatencyP95Ms *int64   `json:"latencyP95Ms"`
	TTFBP50Ms    *int64   `json:"ttfbP50Ms"`
	TTFBP95Ms    *int64   `json:"ttfbP95Ms"`
	// The p95s against the upstreams' own (stats.Judgement); null until a
	// request with an attempt timeline is in the window.
	LatencyVsUpstream *judgementJSON      `json:"latencyVsUpstream"`
	TTFBVsUpstream    *judgementJSON      `json:"ttfbVsUpstream"`
	TokensIn          int64               `json:"tokensIn"`
	TokensOut         int64               `json:"tokensOut"`
	PerMinute         []summaryPointJSON  `json:"perMinute"`
	TopFailingTargets []failingTargetJSON `json:"topFailingTargets"`
	EstimatedCost     costJSON            `json:"estimatedCost"`
}

// judgementJSON is a p95 against the upstreams' own: their p95, the share of
// the time spent waiting (0–1) and whether the p95 is far above theirs.
type judgementJSON struct {
	UpstreamP95Ms int64   `json:"upstreamP95Ms"`
	WaitShare     float64 `json:"waitShare"`
	Flagged       bool    `json:"flagged"`
}

func presentJudgement(j stats.Judgement) *judgementJSON {
	if j.Upstream.Count == 0 {
		return nil
	}
	return &judgementJSON{UpstreamP95Ms: j.Upstream.P95, WaitShare: j.WaitShare, Flagged: j.Flagged}
}

func presentSummary(s stats.Summary, names map[string]string) summaryJSON {
	out := summaryJSON{Window: s.Window, Since: apiInstant(s.Since), SinceStart: s.SinceStart, Requests: s.Requests,
		Succeeded: s.Succeeded, Failed: s.Failed, Aborted: s.Aborted, Failovers: s.Failovers, TokensIn: s.TokensIn, TokensOut: s.TokensOut,
		PerMinute: make([]summaryPointJSON, len(s.PerMinute)), TopFailingTargets: []failingTargetJSON{},
		EstimatedCost: costJSON{Estimate: true, USD: s.Cost.USD(), Unpriced: s.Unpriced}}
	if rate, ok := s.SuccessRate(); ok {
		out.SuccessRate = &rate
	}
	if s.Latency.Count > 0 {
		out.LatencyP50Ms, out.LatencyP95Ms = &s.Latency.P50, &s.Latency.P95
	}
	if s.TTFB.Count > 0 {
		out.TTFBP50Ms, out.TTFBP95Ms = &s.TTFB.P50, &s.TTFB.P95
	}
	out.LatencyVsUpstream, out.TTFBVsUpstream = presentJudgement(s.LatencyJudgement), presentJudgement(s.TTFBJudgement)
	for i, p := range s.PerMinute {
		out.PerMinute[i] = summaryPointJSON{T: apiInstant(p.T), OK: p.OK, Failed: p.Failed, Aborted: p.Aborted}
	}
	for _, f := range s.Failing {
		out.TopFailingTargets = append(out.TopFailingTargets, failingTargetJSON{Provider: f.Provider, Model: f.Model,
			ConnectionID: nullIfZero(f.ConnectionID), Failures: f.Failures, LastError: f.LastError(), LastErrorAt: apiInstant(f.Last.At)})
	}
	usage := func(u stats.Usage) usageJSON {
		return usageJSON{Provider: u.Provider, Requests: u.Requests, TokensIn: u.TokensIn, TokensOut: u.TokensOut, USD: u.Cost.USD(), Unpriced: u.Unpriced}
	}
	out.EstimatedCost.ByKey = make([]usageJSON, 0, len(s.ByKey))
	for _, u := range s.ByKey {
		j := usage(u)
		j.KeyID, j.Name, j.Prefix, j.Provider = u.ID, u.Name, u.Prefix, ""
		out.EstimatedCost.ByKey = append(out.EstimatedCost.ByKey, j)
	}
	out.EstimatedCost.ByConnection = make([]usageJSON, 0, len(s.ByConnection))
	for _, u := range s.ByConnection {
		j := usage(u)
		j.ConnectionID, j.ConnectionName = u.ID, names[u.ID]
		out.EstimatedCost.ByConnection = append(out.EstimatedCost.ByConnection, j)
	}
	out.EstimatedCost.ByModel = make([]usageJSON, 0, len(s.ByModel))
	for _, u := range s.ByModel {
		j := usage(u)
		j.Model = u.ID
		out.EstimatedCost.ByModel = append(out.EstimatedCost.ByModel, j)
	}
	return out
}

// ShowSummary answers GET /api/metrics/summary?window=1h|24h (default 1h);
// any other window is a 400.
func (h *MetricsAPI) ShowSummary(c echo.Context) error {
	w := c.QueryParam("window")
	if w == "" {
		w = stats.Window1h
	}
	if _, ok := stats.ParseWindow(w); !ok {
		return services.Invalid("window", "must be 1h or 24h")
	}
	var names map[string]string
	if h.Names != nil {
		names = h.Names()
	}
	return writeAPIJSON(c, http.StatusOK, presentSummary(h.Stats.Summary(w), names))
}
