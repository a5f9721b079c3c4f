package handlers

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"switchyard/services"
	"switchyard/services/resilience"
)

// ResilienceAPI serves the resilience state routes (40-admin-api §3). It
// renders the read model and calls the engine's admin actions, the same as
// the Runtime page.
type ResilienceAPI struct {
	*API
	Status    StatusReader
	Engine    ResilienceActions
	Catalogue Catalogue
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
		n, err := h.Engine.ResetBreakers(ctx)
		if err != nil {
			return err
		}
		out["breakersReset"] = n
	}
	if include["modelLockouts"] {
		n, err := h.Engine.ClearLockouts(ctx, resilience.LockFilter{})
		if err != nil {
			return err
		}
		out["modelLockoutsCleared"] = n
	}
	if include["windowGate"] {
		n, err := h.Engine.ClearWindowGate(ctx)
		if err != nil {
			return err
		}
		out["windowGateCleared"] = n
	}
	h.audit(c, "resilience.reset")
	return writeAPIJSON(c, http.StatusOK, out)
}

// ResetBreakers closes every breaker.
func (h *ResilienceAPI) ResetBreakers(c echo.Context) error {
	n, err := h.Engine.ResetBreakers(c.Request().Context())
	if err != nil {
		return err
	}
	h.audit(c, "breakers.reset")
	return writeAPIJSON(c, http.StatusOK, map[string]int{"breakersReset": n})
}

// ResetBreaker closes one provider's breaker; idempotent.
func (h *ResilienceAPI) ResetBreaker(c echo.Context) error {
	p, ok := h.Catalogue.Catalogue().Get(c.Param("provider"))
	if !ok {
		return services.ErrNotFound
	}
	if err := h.Engine.ResetBreaker(c.Request().Context(), p.ID); err != nil {
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

// ListModelCooldowns lists active lockouts, longest remaining first
// (GET /api/resilience/model-cooldowns[?provider=&connectionId=]).
func (h *ResilienceAPI) ListModelCooldowns(c echo.Context) error {
	snap := h.Status.Snapshot()
	names := snap.Names()
	f := resilience.LockFilter{Provider: c.QueryParam("provider"), ConnectionID: c.QueryParam("connectionId")}
	items := []lockoutJSON{}
	for _, l := range snap.Lockouts {
		if (f.Provider != "" && l.Provider != f.Provider) || (f.ConnectionID != "" && l.ConnectionID != f.ConnectionID) {
			continue
		}
		items = append(items, lockoutJSON{Provider: l.Provider, ConnectionID: l.ConnectionID, ConnectionName: names[l.ConnectionID],
			Model: l.Model, KeyShape: string(l.Shape), LockKey: l.LockKey, Reason: string(l.Reason), LastStatus: l.LastStatus,
			FailureCount: l.FailureCount, LockedAt: apiInstant(l.LockedAt), Until: apiInstant(l.Until), RemainingMs: l.RemainingMs})
	}
	return writeAPIJSON(c, http.StatusOK, map[string]any{"enabled": snap.LockoutsEnabled,
		"generatedAt": apiInstant(h.Clock.Now()), "items": items})
}

type reEnableBody struct {
	Provider     string `json:"provider"`
	ConnectionID string `json:"connectionId"`
	Model        string `json:"model"`
	All          bool   `json:"all"`
}

// ClearModelCooldowns clears the lockouts of one model (every key shape),
// or all (DELETE /api/resilience/model-cooldowns).
func (h *ResilienceAPI) ClearModelCooldowns(c echo.Context) error {
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
		if _, ok := h.Catalogue.Catalogue().Get(in.Provider); !ok {
			return services.ErrNotFound
		}
		f = resilience.LockFilter{Provider: in.Provider, ConnectionID: in.ConnectionID, Model: in.Model}
	}
	n, err := h.Engine.ClearLockouts(c.Request().Context(), f)
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

// maxCooldownItems bounds GET /api/resilience/cooldowns (40-admin-api §3.2).
const maxCooldownItems = 1000

// ListCooldowns lists every connection's live routing state, status
// precedence terminal > cooling > model_locked > healthy
// (GET /api/resilience/cooldowns[?provider=]).
func (h *ResilienceAPI) ListCooldowns(c echo.Context) error {
	snap := h.Status.Snapshot()
	provider := c.QueryParam("provider")
	items := []cooldownItemJSON{}
	for _, cs := range snap.Connections {
		if provider != "" && cs.Conn.Provider != provider {
			continue
		}
		if len(items) >= maxCooldownItems {
			break
		}
		cn, st := cs.Conn, cs.Conn.State
		it := cooldownItemJSON{ID: cn.ID, Provider: cn.Provider, Name: cn.Name, AuthClass: string(cn.AuthClass), Enabled: cn.Enabled,
			Priority: cn.Priority, Status: string(cs.Condition), BackoffLevel: st.BackoffLevel, AuthFailCount: st.AuthFailCount,
			RejectStreak: st.RejectStreak, TerminalStatus: nullIfZero(st.TerminalStatus), LastErrorReason: nullIfZero(st.LastErrorReason),
			LastErrorStatus: nullIfZero(st.LastErrorStatus), LastErrorAt: apiInstantPtr(st.LastErrorAt), Lockouts: []cooldownLockJSON{}}
		for _, l := range cs.Lockouts {
			it.Lockouts = append(it.Lockouts, cooldownLockJSON{Model: l.Model, KeyShape: string(l.Shape), Reason: string(l.Reason), RemainingMs: l.RemainingMs})
		}
		if cs.Cooling() {
			it.RateLimitedUntil = apiInstantPtr(cs.Until)
			it.CooldownRemainingMs = cs.Until.Sub(snap.At).Milliseconds()
		}
		items = append(items, it)
	}
	return writeAPIJSON(c, http.StatusOK, map[string]any{"generatedAt": apiInstant(snap.At), "connections": items})
}

type clearCooldownsBody struct {
	ConnectionIDs []string `json:"connectionIds"`
	All           bool     `json:"all"`
	Provider      string   `json:"provider"`
}

// ClearCooldowns bulk-clears cooldowns, skipping terminal connections, then
// the model lockouts and window-gate entries of every non-terminal one
// (POST /api/resilience/cooldowns).
func (h *ResilienceAPI) ClearCooldowns(c echo.Context) error {
	var in clearCooldownsBody
	if err := decodeJSON(c, &in); err != nil {
		return err
	}
	if in.All == (in.ConnectionIDs != nil) {
		return services.Invalid("all", `Send either {"connectionIds": [...]} or {"all": true}.`)
	}
	if in.ConnectionIDs != nil && (len(in.ConnectionIDs) == 0 || len(in.ConnectionIDs) > maxCooldownItems) {
		return services.Invalid("connectionIds", "List 1 to 1000 connection ids.")
	}
	snap := h.Status.Snapshot()
	known := map[string]services.Connection{}
	var all []services.Connection
	for _, cs := range snap.Connections {
		if in.Provider != "" && cs.Conn.Provider != in.Provider {
			continue
		}
		known[cs.Conn.ID] = cs.Conn
		all = append(all, cs.Conn)
	}
	targets, notFound := []services.Connection{}, 0
	if in.All {
		targets = all
	} else {
		for _, id := range in.ConnectionIDs {
			if cn, ok := known[id]; ok {
				targets = append(targets, cn)
			} else {
				notFound++
			}
		}
	}
	res, locks, err := h.Engine.ClearCooldowns(c.Request().Context(), targets)
	if err != nil {
		return err
	}
	h.audit(c, "cooldowns.clear", "connections", len(targets))
	return writeAPIJSON(c, http.StatusOK, map[string]int{"cleared": len(res.Cleared), "unchanged": len(res.Unchanged),
		"skippedTerminal": len(res.SkippedTerminal), "notFound": notFound, "lockoutsCleared": locks})
}
