package handlers

import (
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"switchyard/services"
	"switchyard/views"
)

// Audit serves the Audit log page: the admin actions of the audit log,
// filtered and keyset-paginated; its API twin is GET /api/audit over the
// same store.
type Audit struct {
	Layout
	Audit services.AuditStore
	Keys  KeyLister
	Clock services.Clock
}

const auditTitle, auditHref = "Audit log", "/audit"

// auditFilters reads the filter form into its view model and the store
// query, with the problems found before asking the store.
func auditFilters(v url.Values, f views.AuditFiltersVM, now time.Time) (views.AuditFiltersVM, services.AuditQuery, views.FieldErrors) {
	f.Range, f.Since, f.Until = v.Get("range"), strings.TrimSpace(v.Get("since")), strings.TrimSpace(v.Get("until"))
	f.Actor, f.Route, f.Method, f.Target = v.Get("actor"), v.Get("route"), v.Get("method"), strings.TrimSpace(v.Get("targetId"))
	var q services.AuditQuery
	q.Route, q.Method, q.TargetID, q.Cursor = f.Route, f.Method, f.Target, v.Get("cursor")
	switch {
	case f.Actor == services.AuditActorSession:
		q.ActorKind = services.AuditActorSession
	case strings.HasPrefix(f.Actor, "key:"):
		q.ActorKind, q.ActorID = services.AuditActorKey, strings.TrimPrefix(f.Actor, "key:")
	}
	errs := views.FieldErrors{}
	q.Since, q.Until = timeRange(f.Custom(), f.Range, f.Since, f.Until, now, errs)
	return f, q, errs
}

// List renders the page (htmx requests aimed at the list get the list only).
func (h *Audit) List(c echo.Context) error {
	ctx := c.Request().Context()
	keys, err := h.Keys.List(ctx, "all")
	if err != nil {
		return err
	}
	base := views.AuditFiltersVM{}
	for _, k := range keys {
		base.Keys = append(base.Keys, views.OptionVM{Value: "key:" + k.ID, Label: "Key " + k.Name + " (" + k.Prefix + "…)"})
	}
	now := h.Clock.Now()
	f, q, errs := auditFilters(c.QueryParams(), base, now)
	list := views.AuditListVM{Filtered: f.Active(), Errors: errs}
	if len(errs) == 0 {
		page, err := h.Audit.ListAuditEntries(ctx, q)
		if verr, ok := validation(err); ok {
			list.Errors = logErrors(verr.Fields)
		} else if err != nil {
			return err
		} else {
			for _, e := range page.Items {
				list.Rows = append(list.Rows, views.NewAuditRowVM(e, now))
			}
			if q.Cursor != "" {
				list.NewestURL = views.AuditURL(f.Query(), "")
			}
			if page.NextCursor != "" {
				list.OlderURL = views.AuditURL(f.Query(), page.NextCursor)
			}
		}
	}
	f.Errors = list.Errors
	status := http.StatusOK
	if len(list.Errors) > 0 {
		status = http.StatusUnprocessableEntity
	}
	var fragment templComponent = views.AuditPage(views.AuditPageVM{Filters: f, List: list})
	page := fragment
	if c.Request().Header.Get("HX-Target") == views.AuditListID {
		fragment = views.AuditList(list)
	}
	return h.pageParts(c, status, auditTitle, auditHref, fragment, page)
}
