package app

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"switchyard/handlers"
	"switchyard/services"
)

// MountSettingsRoutes registers the settings routes of documents opened
// outside Build on a built server, under /api with the API's
// authentication, replacing the server's own (tests that need their own
// environment, store or logger for the settings documents).
func (s *Server) MountSettingsRoutes(docs SettingsDocs) {
	auth := apiAuth(s.auth, s.keys, s.cookies, services.ScopeManage)
	h := &handlers.SettingsAPI{API: &handlers.API{Clock: s.clock, Log: s.log.With("component", "api")},
		Resilience: docs.Resilience.Document(), General: docs.General, Flags: docs.Flags}
	for _, r := range []struct {
		method, path string
		h            echo.HandlerFunc
	}{
		{http.MethodGet, "/api/resilience", h.ShowResilience},
		{http.MethodPatch, "/api/resilience", h.UpdateResilience},
		{http.MethodGet, "/api/settings", h.ShowSettings},
		{http.MethodPatch, "/api/settings", h.UpdateSettings},
		{http.MethodGet, "/api/feature-flags", h.ListFeatureFlags},
		{http.MethodPatch, "/api/feature-flags", h.UpdateFeatureFlags},
	} {
		s.echo.Add(r.method, r.path, r.h, auth)
	}
}
