package app

import "github.com/labstack/echo/v4"

// apiRoutes registers the management API under /api (40-admin-api).
func (s *Server) apiRoutes(g *echo.Group) {}
