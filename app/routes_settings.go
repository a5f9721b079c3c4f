package app

import (
	"log/slog"
	"net/http"

	"github.com/labstack/echo/v4"

	"switchyard/handlers"
	"switchyard/services"
	"switchyard/services/resilience"
)

// settingsRoutes registers the settings documents and the feature flags
// (40-admin-api §2, §2.5, §9) on the /api group, which already carries
// apiAuth.
func (s *Server) settingsRoutes(g *echo.Group, svc *resilience.SettingsService) {
	registerSettingsRoutes(svc, s.log, func(method, path string, h echo.HandlerFunc) { g.Add(method, path, h) })
}

// MountSettingsRoutes registers the same routes on a built server, under
// /api with the API's authentication, for a service built outside Build
// (tests). A server whose Build wires the service needs no call.
func (s *Server) MountSettingsRoutes(svc *resilience.SettingsService) {
	auth := apiAuth(s.auth, s.keys, s.cookies, services.ScopeManage)
	registerSettingsRoutes(svc, s.log, func(method, path string, h echo.HandlerFunc) {
		s.echo.Add(method, "/api"+path, h, auth)
	})
}

func registerSettingsRoutes(svc *resilience.SettingsService, log *slog.Logger, add func(method, path string, h echo.HandlerFunc)) {
	h := &handlers.SettingsAPI{Settings: svc, Log: log.With("component", "api")}
	add(http.MethodGet, "/resilience", h.GetResilience)
	add(http.MethodPatch, "/resilience", h.PatchResilience)
	add(http.MethodGet, "/settings", h.GetSettings)
	add(http.MethodPatch, "/settings", h.PatchSettings)
	add(http.MethodGet, "/feature-flags", h.GetFeatureFlags)
	add(http.MethodPatch, "/feature-flags", h.PatchFeatureFlags)
}
