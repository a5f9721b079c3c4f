package app

import (
	"github.com/labstack/echo/v4"

	"switchyard/handlers"
)

// apiRoutes registers the management API under /api (40-admin-api). The
// group already carries apiAuth (admin cookie with cross-origin protection,
// or a Bearer key with scope manage).
func (s *Server) apiRoutes(g *echo.Group) {
	s.settingsRoutes(g, s.settingsSvc)
	s.resilienceRoutes(g)
	s.concurrencyRoutes(g)
	s.leaseRoutes(g)
	api := &handlers.API{Conns: s.conns, Combos: s.combos, Keys: s.keys, Clock: s.clock, Log: s.log.With("component", "api")}

	// Connections (§5).
	g.GET("/connections", api.ListConnections)
	g.POST("/connections", api.CreateConnection)
	g.GET("/connections/:id", api.ShowConnection)
	g.PATCH("/connections/:id", api.UpdateConnection)
	g.DELETE("/connections/:id", api.DeleteConnection)

	// Combos (§6).
	g.GET("/combos", api.ListCombos)
	g.POST("/combos", api.CreateCombo)
	g.POST("/combos/reorder", api.ReorderCombos)
	g.GET("/combos/:id", api.ShowCombo)
	g.PUT("/combos/:id", api.ReplaceCombo)
	g.PATCH("/combos/:id", api.PatchCombo)
	g.DELETE("/combos/:id", api.DeleteCombo)
	g.POST("/combos/:id/test", (&handlers.ComboTestAPI{API: api, Tester: s.gateway}).TestCombo)

	// Client API keys (§7).
	g.GET("/keys", api.ListKeys)
	g.POST("/keys", api.CreateKey)
	g.GET("/keys/:id", api.ShowKey)
	g.PATCH("/keys/:id", api.UpdateKey)
	g.POST("/keys/:id/revoke", api.RevokeKey)
	g.DELETE("/keys/:id", api.DeleteKey)
}

// resilienceRoutes registers the resilience state routes (40-admin-api §3).
func (s *Server) resilienceRoutes(g *echo.Group) {
	h := &handlers.ResilienceAPI{API: &handlers.API{Conns: s.conns, Combos: s.combos, Keys: s.keys, Clock: s.clock,
		Log: s.log.With("component", "api")}, Engine: s.resilience, Tester: s.gateway, Explainer: s.gateway}
	g.POST("/resilience/reset", h.Reset)
	g.POST("/resilience/breakers/reset", h.ResetBreakers)
	g.POST("/resilience/breakers/:provider/reset", h.ResetBreaker)
	g.GET("/resilience/model-cooldowns", h.ModelCooldowns)
	g.DELETE("/resilience/model-cooldowns", h.ReEnableModels)
	g.GET("/resilience/cooldowns", h.Cooldowns)
	g.POST("/resilience/cooldowns", h.ClearCooldowns)
	g.POST("/connections/:id/reset", h.ResetConnection)
	g.POST("/connections/:id/test", h.TestConnection)
	g.GET("/combos/:id/explain", h.ExplainCombo)
}
