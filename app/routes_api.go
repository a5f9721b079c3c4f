package app

import (
	"github.com/labstack/echo/v4"

	"switchyard/handlers"
)

// apiRoutes registers the management API under /api (40-admin-api). The
// group already carries apiAuth (admin cookie with cross-origin protection,
// or a Bearer key with scope manage).
func (s *Server) apiRoutes(g *echo.Group) {
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

	// Client API keys (§7).
	g.GET("/keys", api.ListKeys)
	g.POST("/keys", api.CreateKey)
	g.GET("/keys/:id", api.ShowKey)
	g.PATCH("/keys/:id", api.UpdateKey)
	g.POST("/keys/:id/revoke", api.RevokeKey)
	g.DELETE("/keys/:id", api.DeleteKey)
}
