package app

import "github.com/labstack/echo/v4"

// runtimeRoutes registers the Runtime and Health pages, the incident badge
// and the live connection statuses (50-dashboard §6.4, §6.8, §6.12).
func (s *Server) runtimeRoutes(g *echo.Group) {}
