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

// ListConnections answers GET /api/connections[?provider=&status=], ordered
// by provider, priority, name.
func (h *API) ListConnections(c echo.Context) error {
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

// CreateConnection answers POST /api/connections with 201 and a Location.
func (h *API) CreateConnection(c echo.Context) error {
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

// ShowConnection answers GET /api/connections/{id}: the connection and the
// combos and keys that reference it.
func (h *API) ShowConnection(c echo.Context) error {
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

// UpdateConnection answers PATCH /api/connections/{id}; absent fields keep
// their value, null clears a nullable one.
func (h *API) UpdateConnection(c echo.Context) error {
	var in services.ConnectionInput
	if err := decodeJSON(c, &in); err != nil {
		return err
	}
	conn, err := h.Conns.Update(c.Request().Context(), c.Param("id"), in)
	if err != nil {
		return err
	}
	h.audit(c, "connection.update", "id", conn.ID)
	return writeAPIJSON(c, http.StatusOK, presentConnection(conn, h.Conns.Catalogue(), h.Clock.Now()))
}

// DeleteConnection answers DELETE /api/connections/{id} with 204; the
// service refuses (409) when a lease:exclusive key would lose its last
// allowed connection.
func (h *API) DeleteConnection(c echo.Context) error {
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
func runConnectionTest(ctx context.Context, conns *services.Connections, tester ConnectionTester, id string) (services.Connection, services.TestResult, error) {
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
