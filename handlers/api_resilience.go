package handlers

import (
	"context"
	"errors"
	"net/http"
	"sort"

	"github.com/labstack/echo/v4"

	"switchyard/services"
	"switchyard/services/gateway"
	"switchyard/services/resilience"
)

// ResilienceAPI serves the resilience state routes (40-admin-api §3).
type ResilienceAPI struct {
	*API
	Engine    *resilience.Engine
	Tester    ConnectionTester
	Explainer ComboExplainer
}

type resetBody struct {
	Include []string `json:"include"`
}

// Reset clears breakers, model lockouts and window-gate entries (default),
// never connection cooldowns or terminal states.
func (h *ResilienceAPI) Reset(c echo.Context) error {
	var in resetBody
	if c.Request().ContentLength > 0 {
		if err := decodeJSON(c, &in); err != nil {
			return err
		}
	}
	include := map[string]bool{"breakers": true, "modelLockouts": true, "windowGate": true}
	if in.Include != nil {
		include = map[string]bool{}
		for _, k := range in.Include {
			switch k {
			case "breakers", "modelLockouts", "windowGate", "toolLimits", "learnedRateLimits":
				include[k] = true
			default:
				return services.Invalid("include", "Use breakers, modelLockouts, windowGate, toolLimits or learnedRateLimits.")
			}
		}
	}
	ctx := c.Request().Context()
	out := map[string]int{"breakersReset": 0, "modelLockoutsCleared": 0, "windowGateCleared": 0, "toolLimitsCleared": 0, "learnedRateLimitsCleared": 0}
	if include["breakers"] {
		n, err := h.Engine.Breakers.ResetAll(ctx)
		if err != nil {
			return err
		}
		out["breakersReset"] = n
	}
	if include["modelLockouts"] {
		n, err := h.Engine.Lockouts.Clear(ctx, resilience.LockFilter{})
		if err != nil {
			return err
		}
		out["modelLockoutsCleared"] = n
	}
	if include["windowGate"] {
		out["windowGateCleared"] = h.Engine.Gate.Clear()
	}
	h.audit(c, "resilience.reset")
	return writeAPIJSON(c, http.StatusOK, out)
}

// ResetBreakers closes every breaker.
func (h *ResilienceAPI) ResetBreakers(c echo.Context) error {
	n, err := h.Engine.Breakers.ResetAll(c.Request().Context())
	if err != nil {
		return err
	}
	h.audit(c, "breakers.reset")
	return writeAPIJSON(c, http.StatusOK, map[string]int{"breakersReset": n})
}

// ResetBreaker closes one provider's breaker; idempotent.
func (h *ResilienceAPI) ResetBreaker(c echo.Context) error {
	p, ok := h.Conns.Catalogue().Get(c.Param("provider"))
	if !ok {
		return services.ErrNotFound
	}
	if err := h.Engine.Breakers.Reset(c.Request().Context(), p.ID); err != nil {
		return err
	}
	h.audit(c, "breaker.reset", "provider", p.ID)
	return writeAPIJSON(c, http.StatusOK, map[string]string{"provider": p.ID, "state": "CLOSED"})
}

type lockoutJSON struct {
	Provider       string `json:"provider"`
	ConnectionID   string `json:"connectionId"`
	ConnectionName string `json:"connectionName"`
	Model          string `json:"model"`
	KeyShape       string `json:"keyShape"`
	LockKey        string `json:"lockKey"`
	Reason         string `json:"reason"`
	LastStatus     int    `json:"lastStatus"`
	FailureCount   int    `json:"failureCount"`
	LockedAt       string `json:"lockedAt"`
	Until          string `json:"until"`
	RemainingMs    int64  `json:"remainingMs"`
}

// connNames maps connection ids to names for display.
func (h *ResilienceAPI) connNames(c echo.Context) (map[string]services.Connection, error) {
	list, err := h.Conns.List(c.Request().Context(), services.ConnectionFilter{})
	if err != nil {
		return nil, err
	}
	m := make(map[string]services.Connection, len(list))
	for _, cn := range list {
		m[cn.ID] = cn
	}
	return m, nil
}

// ModelCooldowns lists active lockouts, longest remaining first.
func (h *ResilienceAPI) ModelCooldowns(c echo.Context) error {
	names, err := h.connNames(c)
	if err != nil {
		return err
	}
	items := []lockoutJSON{}
	for _, l := range h.Engine.Lockouts.List(resilience.LockFilter{Provider: c.QueryParam("provider"), ConnectionID: c.QueryParam("connectionId")}) {
		items = append(items, lockoutJSON{Provider: l.Provider, ConnectionID: l.ConnectionID, ConnectionName: names[l.ConnectionID].Name,
			Model: l.Model, KeyShape: string(l.Shape), LockKey: l.LockKey, Reason: string(l.Reason), LastStatus: l.LastStatus,
			FailureCount: l.FailureCount, LockedAt: apiInstant(l.LockedAt), Until: apiInstant(l.Until), RemainingMs: l.RemainingMs})
	}
	return writeAPIJSON(c, http.StatusOK, map[string]any{"enabled": h.Engine.Lockouts.Enabled(),
		"generatedAt": apiInstant(h.Clock.Now()), "items": items})
}

type reEnableBody struct {
	Provider     string `json:"provider"`
	ConnectionID string `json:"connectionId"`
	Model        string `json:"model"`
	All          bool   `json:"all"`
}

// ReEnableModels clears lockouts of one model (every key shape), or all.
func (h *ResilienceAPI) ReEnableModels(c echo.Context) error {
	var in reEnableBody
	if err := decodeJSON(c, &in); err != nil {
		return err
	}
	byModel := in.Provider != "" || in.Model != "" || in.ConnectionID != ""
	if in.All == byModel {
		return services.Invalid("all", `Send either {"all": true} or {"provider", "model", "connectionId"?}.`)
	}
	f := resilience.LockFilter{}
	if byModel {
		if in.Provider == "" || in.Model == "" {
			return services.Invalid("model", "Name the provider and the model.")
		}
		if _, ok := h.Conns.Catalogue().Get(in.Provider); !ok {
			return services.ErrNotFound
		}
		f = resilience.LockFilter{Provider: in.Provider, ConnectionID: in.ConnectionID, Model: in.Model}
	}
	n, err := h.Engine.Lockouts.Clear(c.Request().Context(), f)
	if err != nil {
		return err
	}
	h.audit(c, "model_lockouts.clear", "provider", in.Provider, "connection", in.ConnectionID, "removed", n)
	return writeAPIJSON(c, http.StatusOK, map[string]int{"removed": n})
}

type cooldownLockJSON struct {
	Model       string `json:"model"`
	KeyShape    string `json:"keyShape"`
	Reason      string `json:"reason"`
	RemainingMs int64  `json:"remainingMs"`
}

type cooldownItemJSON struct {
	ID                  string             `json:"id"`
	Provider            string             `json:"provider"`
	Name                string             `json:"name"`
	AuthClass           string             `json:"authClass"`
	Enabled             bool               `json:"enabled"`
	Priority            int                `json:"priority"`
	Status              string             `json:"status"`
	TerminalStatus      *string            `json:"terminalStatus"`
	RateLimitedUntil    *string            `json:"rateLimitedUntil"`
	CooldownRemainingMs int64              `json:"cooldownRemainingMs"`
	BackoffLevel        int                `json:"backoffLevel"`
	LastErrorReason     *string            `json:"lastErrorReason"`
	LastErrorStatus     *int               `json:"lastErrorStatus"`
	LastErrorAt         *string            `json:"lastErrorAt"`
	AuthFailCount       int                `json:"authFailCount"`
	RejectStreak        int                `json:"rejectStreak"`
	Lockouts            []cooldownLockJSON `json:"lockouts"`
}

// Cooldowns lists every connection's live routing state.
func (h *ResilienceAPI) Cooldowns(c echo.Context) error {
	list, err := h.Conns.List(c.Request().Context(), services.ConnectionFilter{Provider: c.QueryParam("provider")})
	if err != nil {
		return err
	}
	now := h.Clock.Now()
	items := []cooldownItemJSON{}
	for i, cn := range list {
		if i >= 1000 {
			break
		}
		st := h.Engine.Cooldowns.State(cn.ID)
		it := cooldownItemJSON{ID: cn.ID, Provider: cn.Provider, Name: cn.Name, AuthClass: string(cn.AuthClass), Enabled: cn.Enabled,
			Priority: cn.Priority, BackoffLevel: st.BackoffLevel, AuthFailCount: st.AuthFailCount, RejectStreak: st.RejectStreak,
			TerminalStatus: nullIfZero(st.TerminalStatus), LastErrorReason: nullIfZero(st.LastErrorReason),
			LastErrorStatus: nullIfZero(st.LastErrorStatus), LastErrorAt: apiInstantPtr(st.LastErrorAt), Lockouts: []cooldownLockJSON{}}
		for _, l := range h.Engine.Lockouts.List(resilience.LockFilter{ConnectionID: cn.ID}) {
			it.Lockouts = append(it.Lockouts, cooldownLockJSON{Model: l.Model, KeyShape: string(l.Shape), Reason: string(l.Reason), RemainingMs: l.RemainingMs})
		}
		switch {
		case st.TerminalStatus != "":
			it.Status = "terminal"
		case st.RateLimitedUntil != nil && st.RateLimitedUntil.After(now):
			it.Status = "cooling"
			it.RateLimitedUntil = apiInstantPtr(st.RateLimitedUntil)
			it.CooldownRemainingMs = st.RateLimitedUntil.Sub(now).Milliseconds()
		case len(it.Lockouts) > 0:
			it.Status = "model_locked"
		default:
			it.Status = "healthy"
		}
		items = append(items, it)
	}
	return writeAPIJSON(c, http.StatusOK, map[string]any{"generatedAt": apiInstant(now), "connections": items})
}

type clearCooldownsBody struct {
	ConnectionIDs []string `json:"connectionIds"`
	All           bool     `json:"all"`
	Provider      string   `json:"provider"`
}

// ClearCooldowns bulk-clears cooldowns, skipping terminal connections.
func (h *ResilienceAPI) ClearCooldowns(c echo.Context) error {
	var in clearCooldownsBody
	if err := decodeJSON(c, &in); err != nil {
		return err
	}
	if in.All == (in.ConnectionIDs != nil) {
		return services.Invalid("all", `Send either {"connectionIds": [...]} or {"all": true}.`)
	}
	if in.ConnectionIDs != nil && (len(in.ConnectionIDs) == 0 || len(in.ConnectionIDs) > 1000) {
		return services.Invalid("connectionIds", "List 1 to 1000 connection ids.")
	}
	ctx := c.Request().Context()
	list, err := h.Conns.List(ctx, services.ConnectionFilter{Provider: in.Provider})
	if err != nil {
		return err
	}
	known := map[string]bool{}
	for _, cn := range list {
		known[cn.ID] = true
	}
	ids, notFound := []string{}, 0
	if in.All {
		for _, cn := range list {
			ids = append(ids, cn.ID)
		}
	} else {
		for _, id := range in.ConnectionIDs {
			if known[id] {
				ids = append(ids, id)
			} else {
				notFound++
			}
		}
	}
	res, err := h.Engine.Cooldowns.ClearCooldownsDetailed(ctx, ids)
	if err != nil {
		return err
	}
	terminal := map[string]bool{}
	for _, id := range res.SkippedTerminal {
		terminal[id] = true
	}
	locks := 0
	for _, id := range ids {
		if terminal[id] {
			continue
		}
		n, err := h.Engine.Lockouts.Clear(ctx, resilience.LockFilter{ConnectionID: id})
		if err != nil {
			return err
		}
		locks += n
	}
	h.audit(c, "cooldowns.clear", "connections", len(ids))
	return writeAPIJSON(c, http.StatusOK, map[string]int{"cleared": len(res.Cleared), "unchanged": len(res.Unchanged),
		"skippedTerminal": len(res.SkippedTerminal), "notFound": notFound, "lockoutsCleared": locks})
}

type resetConnBody struct {
	ModelLockouts *bool `json:"modelLockouts"`
}

// ResetConnection clears cooldown, counters and the terminal state of one
// connection (BD 4), and its lockouts unless told not to.
func (h *ResilienceAPI) ResetConnection(c echo.Context) error {
	var in resetConnBody
	if c.Request().ContentLength > 0 {
		if err := decodeJSON(c, &in); err != nil {
			return err
		}
	}
	ctx := c.Request().Context()
	id := c.Param("id")
	if _, err := h.Conns.Get(ctx, id); err != nil {
		return err
	}
	if err := h.Engine.Cooldowns.Reset(ctx, id); err != nil && !errors.Is(err, services.ErrNotFound) {
		return err
	}
	if in.ModelLockouts == nil || *in.ModelLockouts {
		if _, err := h.Engine.Lockouts.Clear(ctx, resilience.LockFilter{ConnectionID: id}); err != nil {
			return err
		}
		cn, _ := h.Conns.Get(ctx, id)
		h.Engine.Gate.Success(cn.Provider, id)
	}
	cn, err := h.Conns.Get(ctx, id)
	if err != nil {
		return err
	}
	h.audit(c, "connection.reset", "id", id)
	return writeAPIJSON(c, http.StatusOK, presentConnection(cn, h.Conns.Catalogue(), h.Clock.Now()))
}

// BreakerStatuses lists breakers with state, sorted by provider (health report).
func BreakerStatuses(e *resilience.Engine) []resilience.BreakerStatus {
	all := e.Breakers.All()
	sort.Slice(all, func(i, j int) bool { return all[i].Provider < all[j].Provider })
	return all
}

// ConnectionTester runs a connection test (the gateway implements it).
type ConnectionTester interface {
	TestConnection(ctx context.Context, c services.Connection) services.TestResult
}

// TestConnection sends one minimal request and records the outcome as
// lastTest; a failed test is still 200. Resilience state never changes.
func (h *ResilienceAPI) TestConnection(c echo.Context) error {
	ctx := c.Request().Context()
	cn, err := h.Conns.Get(ctx, c.Param("id"))
	if err != nil {
		return err
	}
	res := h.Tester.TestConnection(ctx, cn)
	if _, err := h.Conns.RecordTest(ctx, cn.ID, res); err != nil {
		return err
	}
	out := map[string]any{"ok": res.OK, "status": res.Status, "latencyMs": res.LatencyMs, "models": res.Models, "message": res.Message}
	if res.Reason != "" {
		out["reason"] = res.Reason
	} else {
		out["reason"] = nil
	}
	if res.Models == nil {
		out["models"] = nil
	}
	return writeAPIJSON(c, http.StatusOK, out)
}

// ComboExplainer previews a combo's routing (the gateway implements it).
type ComboExplainer interface {
	Explain(c *services.Combo) (strategy string, sample bool, targets []gateway.ExplainTarget)
}

// ExplainCombo serves GET /api/combos/{id}/explain (read-only).
func (h *ResilienceAPI) ExplainCombo(c echo.Context) error {
	cb, err := h.Combos.Get(c.Request().Context(), c.Param("id"))
	if err != nil {
		return err
	}
	strategy, sample, targets := h.Explainer.Explain(&cb)
	if targets == nil {
		targets = []gateway.ExplainTarget{}
	}
	return writeAPIJSON(c, http.StatusOK, map[string]any{"strategy": strategy, "sample": sample, "targets": targets})
}
