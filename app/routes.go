package app

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"switchyard/services"
	"switchyard/static"
)

// routes builds the echo server: every route of the product in one place.
func (s *Server) routes() *echo.Echo {
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.HTTPErrorHandler = errorHandler(s.log, s.dashboard)
	e.Use(requestID, recoverer, s.metrics.httpMiddleware)

	// Public probes and assets.
	e.GET("/healthz", s.healthz)
	e.GET("/static/*", echo.WrapHandler(static.Handler()))

	// Client API: key auth inside the handlers (the body is read only after it).
	for _, prefix := range []string{"/v1", ""} {
		e.POST(prefix+"/chat/completions", s.v1.ChatCompletions)
		e.POST(prefix+"/messages", s.v1.Messages)
		e.POST(prefix+"/responses", s.v1.Responses)
		e.POST(prefix+"/embeddings", s.v1.Embeddings)
	}
	e.POST("/v1/session-leases", s.v1.SessionLeases)
	e.GET("/v1/models", s.v1.Models)
	e.GET("/v1/models/*", s.v1.Model)
	e.Any("/v1/*", s.v1.NotFound)
	e.Any("/v1", s.v1.NotFound)

	// Management API: admin session (with cross-origin protection) or a manage key.
	e.GET("/api/monitoring/health", s.monitoringHealth)
	e.GET("/metrics", s.metrics.handler(), apiAuth(s.auth, s.keys, s.cookies, services.ScopeManage, services.ScopeMetrics))
	api := e.Group("/api", apiAuth(s.auth, s.keys, s.cookies, services.ScopeManage))
	s.apiRoutes(api)

	// Dashboard: security headers everywhere, setup gate, admin session.
	pub := e.Group("", securityHeaders, crossOrigin())
	pub.GET("/setup", s.dashboard.SetupForm)
	pub.POST("/setup", s.dashboard.Setup)
	pub.GET("/login", s.dashboard.LoginForm)
	pub.POST("/login", s.dashboard.Login)
	pub.GET("/logout", func(c echo.Context) error {
		return echo.NewHTTPError(http.StatusMethodNotAllowed, "Sign out with the button (POST).")
	})
	dash := pub.Group("", setupGate(s.auth), requireAdmin(s.auth, s.cookies))
	dash.POST("/logout", s.dashboard.Logout)
	s.dashboardRoutes(dash)

	// Unknown /api paths are JSON 404s even without credentials being checked first.
	e.RouteNotFound("/api/*", func(c echo.Context) error { return services.ErrNotFound })
	e.RouteNotFound("/*", func(c echo.Context) error { return services.ErrNotFound })
	return e
}
