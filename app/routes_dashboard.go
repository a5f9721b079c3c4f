package app

import "github.com/labstack/echo/v4"

// dashboardRoutes registers the signed-in dashboard pages (50-dashboard §6).
func (s *Server) dashboardRoutes(g *echo.Group) {}
