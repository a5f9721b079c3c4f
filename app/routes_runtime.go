package app

import "github.com/labstack/echo/v4"

// runtimeRoutes registers the Runtime and Health pages, the incident badge
// and the live connection statuses (50-dashboard §6.4, §6.8, §6.12).
func (s *Server) runtimeRoutes(g *echo.Group) {
	d := s.dashboard

	// Runtime (§6.8): the page, one polled fragment per panel, the actions.
	g.GET("/runtime", d.RuntimePage)
	g.GET("/runtime/summary", d.RuntimeSummary)
	g.GET("/runtime/breakers", d.RuntimeBreakers)
	g.GET("/runtime/breakers/confirm-reset", d.BreakersConfirmReset)
	g.POST("/runtime/breakers/reset", d.BreakersResetAll)
	g.POST("/runtime/breakers/:provider/reset", d.BreakerReset)
	g.POST("/runtime/window-gate/clear", d.WindowGateClear)
	g.GET("/runtime/cooldowns", d.RuntimeCooldowns)
	g.GET("/runtime/cooldowns/confirm-clear", d.CooldownsConfirmClear)
	g.POST("/runtime/cooldowns/clear", d.CooldownsClear)
	g.GET("/runtime/model-cooldowns", d.RuntimeModelCooldowns)
	g.POST("/runtime/model-cooldowns/re-enable", d.ModelReEnable)
	g.GET("/runtime/model-cooldowns/confirm-clear", d.ModelCooldownsConfirmClear)
	g.POST("/runtime/model-cooldowns/clear", d.ModelCooldownsClear)
	g.GET("/runtime/leases", d.RuntimeLeases)
	g.GET("/runtime/leases/:id/confirm-end", d.LeaseConfirmEnd)
	g.POST("/runtime/leases/:id/end", d.LeaseEnd)
	g.GET("/runtime/queues", d.RuntimeQueues)

	// Connections (§6.4): live status cells and the state actions.
	g.GET("/connections/statuses", d.ConnectionStatuses)
	g.POST("/connections/:id/clear-cooldown", d.ConnectionClearCooldown)
	g.GET("/connections/:id/confirm-reset", d.ConnectionConfirmReset)
	g.POST("/connections/:id/reset", d.ConnectionReset)

	// Incident badge (§2) and Health (§6.12).
	g.GET("/nav/incidents", d.Incidents)
	g.GET("/health", d.HealthPage)
	g.GET("/health/panel", d.HealthPanel)
}
