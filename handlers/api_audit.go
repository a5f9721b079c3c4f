package handlers

import (
	"net/http"
	"net/url"

	"github.com/labstack/echo/v4"

	"switchyard/services"
)

// AuditAPI serves GET /api/audit: the audit log of admin actions, newest
// first, filtered and keyset-paginated like GET /api/logs.
type AuditAPI struct {
	*API
	Audit services.AuditStore
}

type auditActorJSON struct {
	// Kind is "session" (the admin) or "key".
	Kind string `json:"kind"`
	// ID is the session's internal id (never the cookie) or the key id.
	ID string `json:"id"`
	// Actor is "admin:<id>" or "key:<id>" (40-admin-api §1).
	Actor  string  `json:"actor"`
	Name   *string `json:"name"`
	Prefix *string `json:"prefix"`
}

type auditJSON struct {
	ID        string                 `json:"id"`
	Time      string                 `json:"time"`
	Actor     auditActorJSON         `json:"actor"`
	ClientIP  string                 `json:"clientIp"`
	UserAgent string                 `json:"userAgent"`
	Method    string                 `json:"method"`
	Route     string                 `json:"route"`
	Path      string                 `json:"path"`
	Action    *string                `json:"action"`
	TargetID  *string                `json:"targetId"`
	Status    int                    `json:"status"`
	Changes   []services.AuditChange `json:"changes"`
}

func presentAudit(e services.AuditEntry) auditJSON {
	out := auditJSON{ID: e.ID, Time: apiInstant(e.CreatedAt), ClientIP: e.ClientIP, UserAgent: e.UserAgent, Method: e.Method,
		Route: e.Route, Path: e.Path, Action: nullIfZero(e.Action), TargetID: nullIfZero(e.TargetID), Status: e.Status, Changes: e.Changes,
		Actor: auditActorJSON{Kind: e.ActorKind, ID: e.ActorID, Actor: e.Actor(), Name: nullIfZero(e.ActorName), Prefix: nullIfZero(e.KeyPrefix)}}
	if out.Changes == nil {
		out.Changes = []services.AuditChange{}
	}
	return out
}

// auditQuery reads the filters of GET /api/audit and of the Audit log page:
// since, until, actorKind, actorId, method, route (a prefix), targetId,
// limit and cursor.
func auditQuery(v url.Values) (services.AuditQuery, error) {
	q := services.AuditQuery{ActorKind: v.Get("actorKind"), ActorID: v.Get("actorId"), Method: v.Get("method"),
		Route: v.Get("route"), TargetID: v.Get("targetId"), Cursor: v.Get("cursor")}
	var err error
	if q.Since, err = apiTimeParam(v, "since"); err != nil {
		return q, err
	}
	if q.Until, err = apiTimeParam(v, "until"); err != nil {
		return q, err
	}
	if q.Limit, err = apiLimitParam(v); err != nil {
		return q, err
	}
	return q.Normalize()
}

// List answers GET /api/audit.
func (h *AuditAPI) List(c echo.Context) error {
	q, err := auditQuery(c.QueryParams())
	if err != nil {
		return err
	}
	page, err := h.Audit.ListAuditEntries(c.Request().Context(), q)
	if err != nil {
		return err
	}
	items := make([]auditJSON, len(page.Items))
	for i, e := range page.Items {
		items[i] = presentAudit(e)
	}
	return writeAPIJSON(c, http.StatusOK, apiPage(items, page.NextCursor))
}
