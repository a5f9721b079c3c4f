package app

import (
	"context"
	"net/http"

	"github.com/labstack/echo/v4"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"switchyard/handlers"
	"switchyard/services"
	"switchyard/services/tracing"
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
		{http.MethodGet, "/api/settings", h.Show},
		{http.MethodPatch, "/api/settings", h.Update},
		{http.MethodGet, "/api/feature-flags", h.ListFeatureFlags},
		{http.MethodPatch, "/api/feature-flags", h.UpdateFeatureFlags},
	} {
		s.echo.Add(r.method, r.path, r.h, auth)
	}
}

// Tracing returns the trace pipeline, nil when tracing is off.
func (s *Server) Tracing() *tracing.Provider { return s.tracing }

// FlushTraces exports the spans ended so far.
func (s *Server) FlushTraces(ctx context.Context) error {
	return s.tracing.TracerProvider().(*sdktrace.TracerProvider).ForceFlush(ctx)
}
