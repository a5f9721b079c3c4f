package app

import (
	"github.com/labstack/echo/v4"

	"switchyard/handlers"
)

// dashboardRoutes registers the signed-in dashboard pages (50-dashboard §6).
// The group already applies the setup gate, the admin session, cross-origin
// protection and the security headers.
func (s *Server) dashboardRoutes(g *echo.Group) {
	d := s.dashboard
	// The quota windows and the gateway's dispatch metrics and quota gate
	// feed the Connections and Combos pages (their live cells included).
	if s.quota != nil {
		d.Quota = s.quota
	}
	d.Dispatch = s.gateway
	// Probes: the controls that go through the gateway, as their /api twins do.
	p := &handlers.Probes{Dashboard: d, Tester: s.gateway, ComboTester: s.gateway, Explainer: s.gateway}
	g.GET("/", d.OverviewPage)
	g.GET("/overview/stats", d.OverviewStats)
	s.runtimeRoutes(g)
	s.settingsPageRoutes(g)

	// Connections (§6.4).
	g.GET("/connections", d.ConnectionsPage)
	g.GET("/connections/new", d.ConnectionNew)
	g.GET("/connections/form-fields", d.ConnectionFormFields)
	g.POST("/connections", d.ConnectionCreate)
	g.GET("/connections/:id/edit", d.ConnectionEdit)
	g.PUT("/connections/:id", d.ConnectionUpdate)
	g.PUT("/connections/:id/enabled", d.ConnectionEnabled)
	g.GET("/connections/:id/confirm-delete", d.ConnectionConfirmDelete)
	g.DELETE("/connections/:id", d.ConnectionDelete)
	g.POST("/connections/:id/test", p.ConnectionTest)
	g.GET("/connections/quota-windows", d.ConnectionQuotaWindows)

	// Combos (§6.5).
	g.GET("/combos", d.CombosPage)
	g.GET("/combos/new", d.ComboNew)
	g.GET("/combos/:id/edit", d.ComboEdit)
	g.POST("/combos/builder", d.ComboBuilder)
	g.POST("/combos", d.ComboCreate)
	g.PUT("/combos/:id", d.ComboUpdate)
	g.PUT("/combos/:id/enabled", d.ComboEnabled)
	g.POST("/combos/reorder", d.CombosReorder)
	g.POST("/combos/:id/duplicate", d.ComboDuplicate)
	g.GET("/combos/:id/confirm-delete", d.ComboConfirmDelete)
	g.DELETE("/combos/:id", d.ComboDelete)
	g.GET("/combos/readiness", d.CombosReadiness)
	g.GET("/combos/:id/preview", p.ComboPreview)
	g.POST("/combos/:id/test", p.ComboTest)

	// API keys (§6.6).
	g.GET("/keys", d.KeysPage)
	g.GET("/keys/new", d.KeyNew)
	g.POST("/keys", d.KeyCreate)
	g.GET("/keys/:id/edit", d.KeyEdit)
	g.PUT("/keys/:id", d.KeyUpdate)
	g.GET("/keys/:id/confirm-revoke", d.KeyConfirmRevoke)
	g.POST("/keys/:id/revoke", d.KeyRevoke)
	g.GET("/keys/:id/confirm-delete", d.KeyConfirmDelete)
	g.DELETE("/keys/:id", d.KeyDelete)
}
