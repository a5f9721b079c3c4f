package handlers

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"switchyard/services"
	"switchyard/services/health"
)

// HealthAPI serves GET /api/monitoring/health (40-admin-api §4.1): public
// in its minimal form, the full report for an admin credential (a session
// or a key with scope manage, recognised by the app's middleware without
// refusing anyone).
type HealthAPI struct {
	Reports HealthReporter
}

// Show answers the report: 503 with Retry-After while the replica cannot
// serve (embedded mode: the database is down; shared mode: the database is
// down and no snapshot was ever loaded). A shared-mode replica serving from
// its mirrors through a database outage answers 200 "degraded".
func (h *HealthAPI) Show(c echo.Context) error {
	c.Response().Header().Set("Cache-Control", "no-store")
	r := h.Reports.HealthReport(c.Request().Context())
	status := http.StatusOK
	if r.Status == health.StatusDown {
		status = http.StatusServiceUnavailable
		c.Response().Header().Set("Retry-After", "5")
	}
	if !isAdmin(c) {
		return c.JSON(status, r.Public())
	}
	return c.JSON(status, r)
}

// isAdmin reports an admin session or a key with scope manage on the request.
func isAdmin(c echo.Context) bool {
	if k, ok := APIKeyOf(c); ok {
		return k.HasScope(services.ScopeManage)
	}
	return SessionID(c) != ""
}
