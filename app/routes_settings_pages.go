package app

import "github.com/labstack/echo/v4"

// settingsPageRoutes registers Settings → Resilience, Feature flags and
// Account, and the Request logs pages (50-dashboard §6.7, §6.9–§6.11).
func (s *Server) settingsPageRoutes(g *echo.Group) {}
