// Package handlers holds the echo adapters: bind the request, call a service,
// pick a component or JSON shape, write it. Handlers hold no business rule and
// never choose a status for an error: they return it, and the error handler in
// app maps it.
package handlers

import (
	"github.com/labstack/echo/v4"

	"switchyard/services"
)

// Context keys set by the app middleware.
const (
	ctxSessionID = "sy.session-id"
	ctxAPIKey    = "sy.api-key"
	ctxRequestID = "sy.request-id"
)

// SetSessionID records the signed-in admin session id on the request.
func SetSessionID(c echo.Context, id string) { c.Set(ctxSessionID, id) }

// SessionID is the admin session id of the request, or "".
func SessionID(c echo.Context) string {
	id, _ := c.Get(ctxSessionID).(string)
	return id
}

// SetAPIKey records the client key that authenticated the request.
func SetAPIKey(c echo.Context, k services.APIKey) { c.Set(ctxAPIKey, k) }

// APIKeyOf returns the client key of the request, if any.
func APIKeyOf(c echo.Context) (services.APIKey, bool) {
	k, ok := c.Get(ctxAPIKey).(services.APIKey)
	return k, ok
}

// SetRequestID records the request id.
func SetRequestID(c echo.Context, id string) { c.Set(ctxRequestID, id) }

// RequestID returns the request id.
func RequestID(c echo.Context) string {
	id, _ := c.Get(ctxRequestID).(string)
	return id
}

// Actor names who made a change, for audit lines: the session's internal
// id hash prefix (never the cookie value) or the key id.
func Actor(c echo.Context) string {
	if k, ok := APIKeyOf(c); ok {
		return "key:" + k.ID
	}
	if id := SessionID(c); id != "" {
		return "admin:" + services.SHA256Hex(id)[:12]
	}
	return "anonymous"
}

// SessionCookies issues and clears the admin session cookie; app implements it.
type SessionCookies interface {
	Issue(c echo.Context, sessionID string) error
	Clear(c echo.Context) error
}
