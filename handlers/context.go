package handlers

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"switchyard/services"
)

// Context keys set by the app middleware.
const (
	ctxSessionID = "sy.session-id"
	ctxAPIKey    = "sy.api-key"
	ctxRequestID = "sy.request-id"
	ctxGateway   = "sy.gateway-audience"
	ctxAuditAct  = "sy.audit-action"
	ctxAuditID   = "sy.audit-target"
)

// SetGatewayAudience marks the request as the client API's: its errors are
// written in the gateway's JSON shapes (10-gateway-api §9), never as a
// dashboard page or redirect. The route groups of /v1 and of the unprefixed
// aliases set it, so the audience follows the route, not the URL prefix.
func SetGatewayAudience(c echo.Context) { c.Set(ctxGateway, true) }

// GatewayAudience reports whether the request's route belongs to the client API.
func GatewayAudience(c echo.Context) bool {
	v, _ := c.Get(ctxGateway).(bool)
	return v
}

// NoteAudit names a mutation for the audit log ("combo.create") and, when
// targetID is not "", the id it made or changed where the path does not
// carry one (a create). The app's audit middleware reads both.
func NoteAudit(c echo.Context, action, targetID string) {
	if action != "" {
		c.Set(ctxAuditAct, action)
	}
	if targetID != "" {
		c.Set(ctxAuditID, targetID)
	}
}

// AuditNote returns what NoteAudit recorded.
func AuditNote(c echo.Context) (action, targetID string) {
	action, _ = c.Get(ctxAuditAct).(string)
	targetID, _ = c.Get(ctxAuditID).(string)
	return action, targetID
}

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
	// Read returns the session id of the request's cookie, or "".
	Read(r *http.Request) string
}
