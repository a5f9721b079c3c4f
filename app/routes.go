package app

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"switchyard/services"
	"switchyard/static"
)

// routes builds the echo server. Every route of the product is registered
// in this file, in the order of the specs: the client API (10-gateway-api),
// the management API (40-admin-api), the dashboard (50-dashboard), one
// function per group. Handlers are built once, in handlers.go.
func (s *Server) routes() *echo.Echo {
	h := s.newHandlers()
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.HTTPErrorHandler = errorHandler(s.log, h.layout)
	e.Use(requestID, recoverer, s.metrics.httpMiddleware)

	// Public probes and assets. /healthz answers any Host (load balancers
	// and orchestrators probe by address); everything a browser renders
	// answers only the gateway's own names (hostGuard).
	e.GET("/healthz", s.healthz)
	assets := echo.WrapHandler(static.Handler())
	e.GET("/static/*", func(c echo.Context) error {
		if !static.Known(c.Request().URL.Path) {
			return services.ErrNotFound // the error page, with the security headers
		}
		return assets(c)
	}, s.hostGuard)

	clientRoutes(e, h)
	s.apiRoutes(e, h)
	dash := s.dashboardRoutes(e, h)
	runtimeRoutes(dash, h)
	settingsRoutes(dash, h)

	// Unknown /api paths are JSON 404s even without credentials being checked first.
	e.RouteNotFound("/api/*", func(c echo.Context) error { return services.ErrNotFound })
	e.RouteNotFound("/*", func(c echo.Context) error { return services.ErrNotFound })
	return e
}

// clientRoutes registers the client API (10-gateway-api).
func clientRoutes(e *echo.Echo, h *handlerSet) {
	// ---- Client API (10-gateway-api): key auth inside the handlers, so the
	// body is read only after it. Both route groups mark their requests as
	// the gateway's audience, so every error is gateway JSON (§9) and the
	// unprefixed aliases behave exactly like /v1, whatever the outcome. The
	// aliases' group takes the middleware per route: a group-wide Use on the
	// root prefix would also claim the dashboard's unmatched paths.
	v1 := e.Group("/v1", gatewayAudience)
	aliases := e.Group("")
	for _, g := range []struct {
		g  *echo.Group
		mw []echo.MiddlewareFunc
	}{{v1, nil}, {aliases, []echo.MiddlewareFunc{gatewayAudience}}} {
		g.g.POST("/chat/completions", h.v1.ChatCompletions, g.mw...)
		g.g.POST("/messages", h.v1.Messages, g.mw...)
		g.g.POST("/responses", h.v1.Responses, g.mw...)
		g.g.POST("/embeddings", h.v1.Embeddings, g.mw...)
	}
	v1.POST("/messages/count_tokens", h.v1.CountTokens)
	v1.POST("/session-leases", h.v1.SessionLeases)
	v1.GET("/models", h.v1.Models)
	v1.GET("/models/*", h.v1.Model)
	v1.Any("/*", h.v1.NotFound)
	v1.Any("", h.v1.NotFound)
	// The aliases' other methods: 405 from the gateway, not the dashboard's
	// page (the dashboard serves nothing on these paths).
	for _, p := range []string{"/chat/completions", "/messages", "/responses", "/embeddings"} {
		aliases.Match(aliasOtherMethods, p, methodNotAllowed(http.MethodPost), gatewayAudience)
	}
}

// apiRoutes registers the management API (40-admin-api).
func (s *Server) apiRoutes(e *echo.Echo, h *handlerSet) {
	// ---- Management API (40-admin-api): an admin session (with cross-origin
	// protection) or a key with scope manage. The Host check runs first on
	// every route from here on (DNS rebinding).
	e.GET("/api/monitoring/health", h.health.Show, s.hostGuard, adminIfPresent(s.auth, s.keys, s.cookies)) // §4.1, public in its minimal form
	e.GET("/metrics", s.metrics.handler(), s.hostGuard, apiAuth(s.auth, s.keys, s.cookies, services.ScopeManage, services.ScopeMetrics))
	api := e.Group("/api", s.hostGuard, apiAuth(s.auth, s.keys, s.cookies, services.ScopeManage), s.auditTrail)

	// Settings documents and feature flags (§2, §2.5, §9).
	api.GET("/resilience", h.settingsAPI.ShowResilience)
	api.PATCH("/resilience", h.settingsAPI.UpdateResilience)
	api.GET("/settings", h.settingsAPI.Show)
	api.PATCH("/settings", h.settingsAPI.Update)
	api.GET("/feature-flags", h.settingsAPI.ListFeatureFlags)
	api.PATCH("/feature-flags", h.settingsAPI.UpdateFeatureFlags)
	api.GET("/resilience/error-rules", h.rulesAPI.List) // §2.4, rule tooling
	api.POST("/resilience/classify", h.rulesAPI.Classify)

	// Resilience state (§3).
	api.POST("/resilience/reset", h.resilienceAPI.Reset)
	api.POST("/resilience/breakers/reset", h.resilienceAPI.ResetBreakers)
	api.POST("/resilience/breakers/:provider/reset", h.resilienceAPI.ResetBreaker)
	api.GET("/resilience/model-cooldowns", h.resilienceAPI.ListModelCooldowns)
	api.DELETE("/resilience/model-cooldowns", h.resilienceAPI.ClearModelCooldowns)
	api.GET("/resilience/cooldowns", h.resilienceAPI.ListCooldowns)
	api.POST("/resilience/cooldowns", h.resilienceAPI.ClearCooldowns)
	api.GET("/resilience/leases", h.trafficAPI.ListLeases)
	api.DELETE("/resilience/leases/:id", h.trafficAPI.DeleteLease)
	api.DELETE("/resilience/affinity", h.trafficAPI.ClearAffinity)
	api.GET("/resilience/events", h.eventsAPI.List)

	// Request queues and connection slots (§4.2), the traffic summary (§4.3).
	api.GET("/concurrency", h.trafficAPI.ShowConcurrency)
	api.POST("/concurrency/reset", h.trafficAPI.ResetConcurrency)
	api.GET("/metrics/summary", h.metricsAPI.ShowSummary)

	// Connections (§5).
	api.GET("/connections", h.connectionsAPI.List)
	api.POST("/connections", h.connectionsAPI.Create)
	api.GET("/connections/:id", h.connectionsAPI.Show)
	api.PATCH("/connections/:id", h.connectionsAPI.Update)
	api.DELETE("/connections/:id", h.connectionsAPI.Delete)
	api.POST("/connections/:id/reset", h.connectionsAPI.Reset)
	api.POST("/connections/:id/test", h.connectionsAPI.Test)

	// Combos (§6).
	api.GET("/combos", h.combosAPI.List)
	api.POST("/combos", h.combosAPI.Create)
	api.POST("/combos/reorder", h.combosAPI.Reorder)
	api.GET("/combos/:id", h.combosAPI.Show)
	api.PUT("/combos/:id", h.combosAPI.Replace)
	api.PATCH("/combos/:id", h.combosAPI.Update)
	api.DELETE("/combos/:id", h.combosAPI.Delete)
	api.POST("/combos/:id/test", h.combosAPI.Test)
	api.GET("/combos/:id/explain", h.combosAPI.Explain)

	// Client API keys (§7).
	api.GET("/keys", h.keysAPI.List)
	api.POST("/keys", h.keysAPI.Create)
	api.GET("/keys/:id", h.keysAPI.Show)
	api.PATCH("/keys/:id", h.keysAPI.Update)
	api.POST("/keys/:id/revoke", h.keysAPI.Revoke)
	api.DELETE("/keys/:id", h.keysAPI.Delete)

	// Request logs (§8) and the audit log of admin actions (§1 Audit).
	api.GET("/logs", h.logsAPI.List)
	api.GET("/logs/:id", h.logsAPI.Show)
	api.GET("/audit", h.auditAPI.List)
}

// dashboardRoutes registers sign-in and setup, and the dashboard pages up to
// the request and audit logs; it returns the signed-in group the Runtime and
// Settings pages join.
func (s *Server) dashboardRoutes(e *echo.Echo, h *handlerSet) *echo.Group {
	// ---- Dashboard (50-dashboard): security headers everywhere, the setup
	// gate, the admin session. Forms that htmx sends as PUT or DELETE also
	// answer POST, so they work without script.
	// Credential forms are read only up to a few KiB (issue 17 item 6);
	// cookie writes need Origin or Sec-Fetch-Site (item 8).
	pub := e.Group("", s.hostGuard, securityHeaders, crossOrigin())
	pub.GET("/setup", h.setup.New)
	pub.POST("/setup", h.setup.Create, limitForm(credentialFormMax))
	pub.GET("/login", h.signIn.New)
	pub.POST("/login", h.signIn.Create, limitForm(credentialFormMax))
	pub.GET("/logout", func(c echo.Context) error {
		return echo.NewHTTPError(http.StatusMethodNotAllowed, "Sign out with the button (POST).")
	})
	dash := pub.Group("", setupGate(s.auth), requireAdmin(s.auth, s.cookies), requireBrowserOrigin, s.auditTrail)
	dash.POST("/logout", h.signIn.Delete)

	// Overview (§6.3).
	dash.GET("/", h.overview.Show)
	dash.GET("/overview/stats", h.overview.Stats)

	// Connections (§6.4): the list, the panel, the live cells, the state actions.
	dash.GET("/connections", h.connections.List)
	dash.GET("/connections/new", h.connections.New)
	dash.GET("/connections/form-fields", h.connections.Fields)
	dash.POST("/connections", h.connections.Create)
	dash.GET("/connections/:id/edit", h.connections.Edit)
	dash.PUT("/connections/:id", h.connections.Update)
	dash.PUT("/connections/:id/enabled", h.connections.Enabled)
	dash.GET("/connections/:id/confirm-delete", h.connections.ConfirmDelete)
	dash.DELETE("/connections/:id", h.connections.Delete)
	dash.POST("/connections/:id/test", h.connections.Test)
	dash.GET("/connections/quota-windows", h.connections.QuotaWindows)
	dash.GET("/connections/statuses", h.connections.Statuses)
	dash.POST("/connections/:id/clear-cooldown", h.connections.ClearCooldown)
	dash.GET("/connections/:id/confirm-reset", h.connections.ConfirmReset)
	dash.POST("/connections/:id/reset", h.connections.Reset)

	// Combos (§6.5).
	dash.GET("/combos", h.combos.List)
	dash.GET("/combos/new", h.combos.New)
	dash.GET("/combos/:id/edit", h.combos.Edit)
	dash.POST("/combos/builder", h.combos.Builder)
	dash.POST("/combos", h.combos.Create)
	dash.PUT("/combos/:id", h.combos.Update)
	dash.PUT("/combos/:id/enabled", h.combos.Enabled)
	dash.POST("/combos/reorder", h.combos.Reorder)
	dash.POST("/combos/:id/duplicate", h.combos.Duplicate)
	dash.GET("/combos/:id/confirm-delete", h.combos.ConfirmDelete)
	dash.DELETE("/combos/:id", h.combos.Delete)
	dash.GET("/combos/readiness", h.combos.Readiness)
	dash.GET("/combos/:id/preview", h.combos.Preview)
	dash.POST("/combos/:id/test", h.combos.Test)

	// API keys (§6.6).
	dash.GET("/keys", h.keys.List)
	dash.GET("/keys/new", h.keys.New)
	dash.POST("/keys", h.keys.Create)
	dash.GET("/keys/:id/edit", h.keys.Edit)
	dash.PUT("/keys/:id", h.keys.Update)
	dash.GET("/keys/:id/confirm-revoke", h.keys.ConfirmRevoke)
	dash.POST("/keys/:id/revoke", h.keys.Revoke)
	dash.GET("/keys/:id/confirm-delete", h.keys.ConfirmDelete)
	dash.DELETE("/keys/:id", h.keys.Delete)

	// Request logs (§6.7).
	dash.GET("/logs", h.logs.List)
	dash.GET("/logs/rows", h.logs.Rows) // the live tail's poll
	dash.GET("/logs/:id", h.logs.Show)

	// Audit log of admin actions.
	dash.GET("/audit", h.audit.List)
	return dash
}

// runtimeRoutes registers the Runtime page (50-dashboard §6.8) and the
// incident badge.
func runtimeRoutes(dash *echo.Group, h *handlerSet) {
	// Runtime (§6.8): the page, one polled fragment per panel, the actions.
	dash.GET("/runtime", h.runtime.Show)
	dash.GET("/runtime/summary", h.runtime.Summary)
	dash.GET("/runtime/breakers", h.runtime.Breakers)
	dash.GET("/runtime/breakers/confirm-reset", h.runtime.ConfirmResetBreakers)
	dash.POST("/runtime/breakers/reset", h.runtime.ResetBreakers)
	dash.POST("/runtime/breakers/:provider/reset", h.runtime.ResetBreaker)
	dash.POST("/runtime/window-gate/clear", h.runtime.ClearWindowGate)
	dash.GET("/runtime/cooldowns", h.runtime.Cooldowns)
	dash.GET("/runtime/cooldowns/confirm-clear", h.runtime.ConfirmClearCooldowns)
	dash.POST("/runtime/cooldowns/clear", h.runtime.ClearCooldowns)
	dash.GET("/runtime/model-cooldowns", h.runtime.ModelCooldowns)
	dash.POST("/runtime/model-cooldowns/re-enable", h.runtime.ReEnableModel)
	dash.GET("/runtime/model-cooldowns/confirm-clear", h.runtime.ConfirmClearModelCooldowns)
	dash.POST("/runtime/model-cooldowns/clear", h.runtime.ClearModelCooldowns)
	dash.GET("/runtime/leases", h.runtime.Leases)
	dash.GET("/runtime/leases/:id/confirm-end", h.runtime.ConfirmEndLease)
	dash.POST("/runtime/leases/:id/end", h.runtime.EndLease)
	dash.GET("/runtime/queues", h.runtime.Queues)
	dash.GET("/runtime/waiting", h.runtime.WaitingRequests)
	dash.GET("/runtime/events", h.runtime.RecentEvents)
	dash.GET("/runtime/affinity", h.runtime.Affinity)
	dash.GET("/runtime/affinity/confirm-clear", h.runtime.ConfirmClearAffinity)
	dash.POST("/runtime/affinity/clear", h.runtime.ClearAffinity)
	dash.GET("/nav/incidents", h.runtime.Incidents) // the incident badge (§2)
}

// settingsRoutes registers the Settings pages and Health (50-dashboard
// §6.9–§6.12).
func settingsRoutes(dash *echo.Group, h *handlerSet) {
	// Settings → Resilience (§6.9).
	dash.GET("/settings/resilience", h.resilience.Show)
	dash.POST("/settings/resilience/error-rules/builder", h.resilience.RulesBuilder)
	dash.POST("/settings/resilience/model-lockout/preview", h.resilience.LockoutPreview) // views.LockoutPreviewURL
	dash.GET("/settings/resilience/:section", h.resilience.Card)
	dash.POST("/settings/resilience/:section", h.resilience.Update)
	dash.PUT("/settings/resilience/:section", h.resilience.Update)

	// Settings → Feature flags (§6.10).
	dash.GET("/settings/flags", h.flags.List)
	dash.PUT("/settings/flags/:key", h.flags.Update)
	dash.POST("/settings/flags/:key", h.flags.Update)
	dash.DELETE("/settings/flags/:key", h.flags.Delete)
	dash.POST("/settings/flags/:key/reset", h.flags.Delete)

	// Settings → Model prices: the price table of the estimated costs.
	dash.GET("/settings/prices", h.prices.List)
	dash.POST("/settings/prices", h.prices.Update)
	dash.POST("/settings/prices/remove", h.prices.Delete)

	// Settings → Account (§6.11).
	dash.GET("/settings/account", h.account.Show)
	dash.POST("/settings/account/password", h.account.UpdatePassword, limitForm(credentialFormMax))
	dash.GET("/settings/account/confirm-end-others", h.account.ConfirmDeleteOtherSessions)
	dash.POST("/settings/account/sessions/end-others", h.account.DeleteOtherSessions)
	dash.POST("/settings/account/sessions/:id/end", h.account.DeleteSession)

	// Health (§6.12).
	dash.GET("/health", h.healthPage.Show)
	dash.GET("/health/panel", h.healthPage.Panel)
}
