package handlers

import (
	"context"
	"net/http"
	"slices"
	"strings"

	"github.com/labstack/echo/v4"

	"switchyard/services"
)

// connectionStatusFilters are the values of GET /api/connections?status=.
var connectionStatusFilters = []string{
	services.StatusActive, services.StatusCooling, services.TerminalBanned,
	services.TerminalExpired, services.TerminalCreditsExhausted, services.StatusDisabled,
}

// ConnectionsAPI serves /api/connections (40-admin-api §5) and the state
// and test actions of one connection (§3.2).
type ConnectionsAPI struct {
	*API
	Conns  ConnectionService
	State  ConnectionResetter
	Tester ConnectionTester
	// Confirm checks the admin password an admin session must add to
	// keepCredentials (services.Auth); ClientIP throttles it.
	Confirm  PasswordConfirmer
	ClientIP func(r *http.Request) string
}

// List answers GET /api/connections[?provider=&status=], ordered
// by provider, priority, name.
func (h *ConnectionsAPI) List(c echo.Context) error {
	f := services.ConnectionFilter{Provider: c.QueryParam("provider"), Status: c.QueryParam("status")}
	if f.Status != "" && !slices.Contains(connectionStatusFilters, f.Status) {
		return services.Invalid("status", "must be one of "+strings.Join(connectionStatusFilters, ", "))
	}
	list, err := h.Conns.List(c.Request().Context(), f)
	if err != nil {
		return err
	}
	cat, now := h.Conns.Catalogue(), h.Clock.Now()
	out := make([]connectionJSON, len(list))
	for i, conn := range list {
		out[i] = presentConnection(conn, cat, now)
	}
	return writeAPIJSON(c, http.StatusOK, apiItems(out))
}

// Create answers POST /api/connections with 201 and a Location.
func (h *ConnectionsAPI) Create(c echo.Context) error {
	var in services.ConnectionInput
	if err := decodeJSON(c, &in); err != nil {
		return err
	}
	conn, err := h.Conns.Create(c.Request().Context(), in)
	if err != nil {
		return err
	}
	h.audit(c, "connection.create", "id", conn.ID, "provider", conn.Provider)
	return writeAPICreated(c, "/api/connections/"+conn.ID, presentConnection(conn, h.Conns.Catalogue(), h.Clock.Now()))
}

// Show answers GET /api/connections/{id}: the connection and the
// combos and keys that reference it.
func (h *ConnectionsAPI) Show(c echo.Context) error {
	ctx := c.Request().Context()
	conn, err := h.Conns.Get(ctx, c.Param("id"))
	if err != nil {
		return err
	}
	refs, err := h.Conns.References(ctx, conn.ID)
	if err != nil {
		return err
	}
	return writeAPIJSON(c, http.StatusOK, connectionDetailJSON{
		connectionJSON: presentConnection(conn, h.Conns.Catalogue(), h.Clock.Now()),
		References:     refs,
	})
}

// Update answers PATCH /api/connections/{id}; absent fields keep
// their value, null clears a nullable one.
func (h *ConnectionsAPI) Update(c echo.Context) error {
	var in services.ConnectionInput
	if err := decodeJSON(c, &in); err != nil {
		return err
	}
	if err := confirmKeep(c, h.Confirm, h.ClientIP, in); err != nil {
		return err
	}
	conn, err := h.Conns.Update(c.Request().Context(), c.Param("id"), in)
	if err != nil {
		return err
	}
	h.audit(c, "connection.update", "id", conn.ID)
	return writeAPIJSON(c, http.StatusOK, presentConnection(conn, h.Conns.Catalogue(), h.Clock.Now()))
}

// Delete answers DELETE /api/connections/{id} with 204; the
// service refuses (409) when a lease:exclusive key would lose its last
// allowed connection.
func (h *ConnectionsAPI) Delete(c echo.Context) error {
	id := c.Param("id")
	if err := h.Conns.Delete(c.Request().Context(), id); err != nil {
		return err
	}
	h.audit(c, "connection.delete", "id", id)
	return c.NoContent(http.StatusNoContent)
}

// runConnectionTest sends the connection test and records the outcome as
// lastTest: the same two calls as POST /api/connections/{id}/test, shared
// with the dashboard's Test button.
func runConnectionTest(ctx context.Context, conns ConnectionService, tester ConnectionTester, id string) (services.Connection, services.TestResult, error) {
	cn, err := conns.Get(ctx, id)
	if err != nil {
		return services.Connection{}, services.TestResult{}, err
	}
	res := tester.TestConnection(ctx, cn)
	cn, err = conns.RecordTest(ctx, cn.ID, res)
	if err != nil {
		return services.Connection{}, services.TestResult{}, err
	}
	return cn, res, nil
}

// ConnectionTester runs a connection test (the gateway implements it).
type ConnectionTester interface {
	TestConnection(ctx context.Context, c services.Connection) services.TestResult
}

// Test answers POST /api/connections/{id}/test: one minimal request, the
// outcome recorded as lastTest; a failed test is still 200. Resilience
// state never changes.
func (h *ConnectionsAPI) Test(c echo.Context) error {
	_, res, err := runConnectionTest(c.Request().Context(), h.Conns, h.Tester, c.Param("id"))
	if err != nil {
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

type resetConnBody struct {
	ModelLockouts *bool `json:"modelLockouts"`
}

// Reset answers POST /api/connections/{id}/reset: cooldown, counters and
// the terminal state cleared (BD 4), and the model lockouts and window-gate
// entry unless {"modelLockouts": false}; 200 with the connection.
func (h *ConnectionsAPI) Reset(c echo.Context) error {
	var in resetConnBody
	if c.Request().ContentLength > 0 {
		if err := decodeJSON(c, &in); err != nil {
			return err
		}
	}
	ctx := c.Request().Context()
	cn, err := h.Conns.Get(ctx, c.Param("id"))
	if err != nil {
		return err
	}
	if err := h.State.ResetConnection(ctx, cn, in.ModelLockouts == nil || *in.ModelLockouts); err != nil {
		return err
	}
	if cn, err = h.Conns.Get(ctx, cn.ID); err != nil {
		return err
	}
	h.audit(c, "connection.reset", "id", cn.ID)
	return writeAPIJSON(c, http.StatusOK, presentConnection(cn, h.Conns.Catalogue(), h.Clock.Now()))
}
