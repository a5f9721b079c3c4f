package app

import (
	"encoding/json"
	"net/http"
	"path"
	"strings"

	"github.com/labstack/echo/v4"

	"switchyard/handlers"
	"switchyard/services"
	"switchyard/services/events"
)

// auditSkip lists the unsafe-method routes that change nothing: previews
// and dry runs. Every other POST, PUT, PATCH and DELETE that succeeds is an
// admin action.
var auditSkip = map[string]bool{
	"/api/resilience/classify":                   true,
	"/combos/builder":                            true,
	"/settings/resilience/error-rules/builder":   true,
	"/settings/resilience/model-lockout/preview": true,
}

// maxAuditUserAgent bounds the user agent kept per entry.
const maxAuditUserAgent = 200

// auditTrail records every successful mutation of the management API and
// the dashboard in the audit log (40-admin-api §1 Audit): who (the admin
// session's internal id or the key), when, from where, what (method,
// route, target id, the handler's action name) and, when the settings
// documents changed, every changed field before and after, secrets
// redacted. The entry goes to the audit batch writer; the request never
// waits on the database for it.
func (s *Server) auditTrail(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		switch r.Method {
		case http.MethodGet, http.MethodHead, http.MethodOptions:
			return next(c)
		}
		if auditSkip[c.Path()] {
			return next(c)
		}
		e := services.AuditEntry{ID: handlers.RequestID(c), ClientIP: clientIP(r),
			UserAgent: truncateRunes(r.UserAgent(), maxAuditUserAgent), RequestID: handlers.RequestID(c),
			Method: r.Method, Route: c.Path(), Path: r.URL.Path}
		actor := "admin session"
		if k, ok := handlers.APIKeyOf(c); ok {
			e.ActorKind, e.ActorID, e.ActorName, e.KeyPrefix = services.AuditActorKey, k.ID, k.Name, k.Prefix
			actor = "key " + k.Name + " " + k.Prefix
		} else {
			e.ActorKind = services.AuditActorSession
			if id := handlers.SessionID(c); id != "" {
				e.ActorID = services.SHA256Hex(id)[:12]
				actor += " " + e.ActorID
			}
		}
		// The resilience events this request causes name the same actor.
		c.SetRequest(r.WithContext(events.WithActor(r.Context(), actor)))
		resBefore, genBefore := s.settingsSvc.ResilienceSnapshot(), s.settingDocs.General.Current()
		err := next(c)
		status := c.Response().Status
		if err != nil || status >= http.StatusBadRequest {
			return err
		}
		e.CreatedAt, e.Status = s.clock.Now(), status
		var noted string
		e.Action, noted = handlers.AuditNote(c)
		switch {
		case noted != "":
			e.TargetID = noted
		case len(c.ParamValues()) > 0:
			e.TargetID = c.ParamValues()[0]
		default:
			if loc := c.Response().Header().Get("Location"); loc != "" {
				e.TargetID = path.Base(loc)
			}
		}
		if after := s.settingsSvc.ResilienceSnapshot(); after != resBefore {
			e.Changes = append(e.Changes, docChanges(resBefore.Doc, after.Doc)...)
		}
		if after := s.settingDocs.General.Current(); after != genBefore {
			e.Changes = append(e.Changes, docChanges(genBefore.Doc, after.Doc)...)
		}
		s.auditWriter.Add(e)
		return nil
	}
}

// docChanges diffs two published settings documents by field.
func docChanges(before, after any) []services.AuditChange {
	b, _ := json.Marshal(before)
	a, _ := json.Marshal(after)
	return services.AuditDiff(b, a)
}

func truncateRunes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return strings.ToValidUTF8(string(r[:n]), "")
}
