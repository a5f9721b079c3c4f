package app

import "github.com/labstack/echo/v4"

// settingsPageRoutes registers Settings → Resilience, Feature flags and
// Account, and the Request logs pages (50-dashboard §6.7, §6.9–§6.11).
// Forms that htmx sends as PUT or DELETE also answer POST, so they work
// without script.
func (s *Server) settingsPageRoutes(g *echo.Group) {
	d := s.dashboard

	// Settings → Resilience (§6.9).
	g.GET("/settings/resilience", d.ResiliencePage)
	g.POST("/settings/resilience/error-rules/builder", d.ErrorRulesBuilder)
	g.GET("/settings/resilience/:section", d.ResilienceCard)
	g.POST("/settings/resilience/:section", d.ResilienceSave)
	g.PUT("/settings/resilience/:section", d.ResilienceSave)

	// Settings → Feature flags (§6.10).
	g.GET("/settings/flags", d.FlagsPage)
	g.PUT("/settings/flags/:key", d.FlagSave)
	g.POST("/settings/flags/:key", d.FlagSave)
	g.DELETE("/settings/flags/:key", d.FlagReset)
	g.POST("/settings/flags/:key/reset", d.FlagReset)

	// Settings → Account (§6.11).
	g.GET("/settings/account", d.AccountPage)
	g.POST("/settings/account/password", d.AccountPassword)
	g.GET("/settings/account/confirm-end-others", d.SessionsConfirmEndOthers)
	g.POST("/settings/account/sessions/end-others", d.SessionsEndOthers)
	g.POST("/settings/account/sessions/:id/end", d.SessionEnd)

	// Request logs (§6.7).
	g.GET("/logs", d.LogsPage)
	g.GET("/logs/:id", d.LogDetail)
}
