package handlers

import (
	"context"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"switchyard/services"
	"switchyard/views"
)

// Request logs (50-dashboard §6.7): a filtered, keyset-paginated list and
// the detail of one request with its attempt timeline. The store is the
// same as GET /api/logs and GET /api/logs/{id}.

const logsTitle, logsHref = "Request logs", "/logs"

// Logs serves the request log pages.
type Logs struct {
	Layout
	Logs  services.RequestLogStore
	Conns ConnectionLister
	Keys  KeyLister
	Clock services.Clock
}

// Filter messages.
const (
	msgLogWhen       = "Enter a date and time, such as 2026-03-01T09:30."
	msgLogOrder      = "The start must be before the end."
	msgLogCursor     = "This page link no longer works. Start again from the newest requests."
	msgChooseOptions = "Choose one of the options."
)

// logTimeLayouts are what the from/to fields accept (datetime-local, RFC 3339).
var logTimeLayouts = []string{"2006-01-02T15:04", "2006-01-02T15:04:05", time.RFC3339, time.RFC3339Nano, "2006-01-02"}

func parseLogTime(s string) (time.Time, bool) {
	for _, l := range logTimeLayouts {
		if t, err := time.Parse(l, s); err == nil {
			return t.UTC(), true
		}
	}
	return time.Time{}, false
}

// timeRange reads the time fields of a filter form (Request logs, Audit
// log): the from/to fields when custom, else the range choice ending now.
// Unreadable fields are reported in errs.
func timeRange(custom bool, rng, since, until string, now time.Time, errs views.FieldErrors) (from, to time.Time) {
	if !custom {
		if d := views.LogRangeDuration(rng); d > 0 {
			from = now.Add(-d)
		}
		return from, to
	}
	for _, f := range []struct {
		name, value string
		dst         *time.Time
	}{{"since", since, &from}, {"until", until, &to}} {
		if f.value == "" {
			continue
		}
		if t, ok := parseLogTime(f.value); ok {
			*f.dst = t
		} else {
			errs[f.name] = msgLogWhen
		}
	}
	return from, to
}

// logFilters reads the filter form (the query) into its view model, the
// store query and the problems found before asking the store.
func logFilters(v url.Values, now time.Time) (views.LogFiltersVM, services.RequestLogQuery, views.FieldErrors) {
	f := views.LogFiltersVM{Range: v.Get("range"), Since: strings.TrimSpace(v.Get("since")), Until: strings.TrimSpace(v.Get("until")),
		Outcome: v.Get("outcome"), Model: strings.TrimSpace(v.Get("model")), Provider: strings.TrimSpace(v.Get("provider")),
		Connection: v.Get("connectionId"), Key: v.Get("keyId"), Stream: v.Get("stream"), RequestID: strings.TrimSpace(v.Get("requestId")),
		Tail: v.Get(views.LogTailParam) == "on"}
	q := services.RequestLogQuery{Outcome: f.Outcome, Model: f.Model, Provider: f.Provider, ConnectionID: f.Connection,
		KeyID: f.Key, RequestID: f.RequestID, Cursor: v.Get("cursor")}
	errs := views.FieldErrors{}
	q.Since, q.Until = timeRange(f.Custom(), f.Range, f.Since, f.Until, now, errs)
	switch f.Stream {
	case "yes", "true":
		on := true
		q.Stream = &on
	case "no", "false":
		off := false
		q.Stream = &off
	}
	return f, q, errs
}

// logErrors words the store's problems with a query.
func logErrors(fields map[string]string) views.FieldErrors {
	out := views.FieldErrors{}
	for k, msg := range fields {
		switch k {
		case "since", "until":
			out["since"] = msgLogOrder
		case "cursor":
			out["cursor"] = msgLogCursor
		case "outcome":
			out["outcome"] = msgChooseOptions
		default:
			out[k] = views.NewFieldErrors(map[string]string{k: msg}, nil)[k]
		}
	}
	return out
}

// logNames maps connection ids to names and fills the filter choices.
func (h *Logs) logNames(ctx context.Context, f *views.LogFiltersVM) (map[string]string, error) {
	conns, err := h.Conns.List(ctx, services.ConnectionFilter{})
	if err != nil {
		return nil, err
	}
	keys, err := h.Keys.List(ctx, "")
	if err != nil {
		return nil, err
	}
	names := map[string]string{}
	providers := map[string]bool{}
	for _, c := range conns {
		names[c.ID] = c.Name
		providers[c.Provider] = true
		if f != nil {
			f.Conns = append(f.Conns, views.OptionVM{Value: c.ID, Label: c.Provider + " / " + c.Name})
		}
	}
	if f != nil {
		for _, k := range keys {
			f.Keys = append(f.Keys, views.OptionVM{Value: k.ID, Label: k.Name + " (" + k.Prefix + "…)"})
		}
		for p := range providers {
			f.Providers = append(f.Providers, p)
		}
		sort.Strings(f.Providers)
	}
	return names, nil
}

// logsList loads one page of the list for the filters. On the first page
// with the live tail on, it polls for what is newer than the newest row.
func (h *Logs) logsList(ctx context.Context, f views.LogFiltersVM, q services.RequestLogQuery, names map[string]string) (views.LogsListVM, error) {
	list := views.LogsListVM{Filtered: f.Active(), Tail: f.Tail}
	page, err := h.Logs.ListRequestLogs(ctx, q)
	if verr, ok := validation(err); ok {
		list.Errors = logErrors(verr.Fields)
		return list, nil
	}
	if err != nil {
		return list, err
	}
	now := h.Clock.Now()
	for _, e := range page.Items {
		list.Rows = append(list.Rows, views.NewLogRowVM(e, names, now))
	}
	base := f.Query()
	if q.Cursor != "" {
		list.NewestURL = logsURL(base, "")
	}
	if page.NextCursor != "" {
		list.OlderURL = logsURL(base, page.NextCursor)
	}
	if f.Tail && q.Cursor == "" {
		list.TailURL = f.TailRowsURL(services.TailCursor(page.Items))
	}
	return list, nil
}

func logsURL(q url.Values, cursor string) string {
	out := url.Values{}
	for k, v := range q {
		out[k] = v
	}
	if cursor != "" {
		out.Set("cursor", cursor)
	}
	if len(out) == 0 {
		return logsHref
	}
	return logsHref + "?" + out.Encode()
}

// logsPage renders the page; htmx requests aimed at the list get the list only.
func (h *Logs) logsPage(c echo.Context, detail *views.LogDetailVM, fragment templComponent) error {
	ctx := c.Request().Context()
	v := c.QueryParams()
	if detail != nil {
		v = url.Values{}
	}
	f, q, errs := logFilters(v, h.Clock.Now())
	names, err := h.logNames(ctx, &f)
	if err != nil {
		return err
	}
	var list views.LogsListVM
	if len(errs) > 0 {
		list = views.LogsListVM{Filtered: true, Errors: errs, Tail: f.Tail}
	} else if list, err = h.logsList(ctx, f, q, names); err != nil {
		return err
	}
	f.Errors = list.Errors
	status := http.StatusOK
	if len(list.Errors) > 0 {
		status = http.StatusUnprocessableEntity
	}
	page := views.LogsPage(views.LogsPageVM{Filters: f, List: list, Detail: detail})
	if fragment == nil {
		fragment = page
		if c.Request().Header.Get("HX-Target") == views.LogsListID {
			fragment = views.LogsList(list)
		}
	}
	return h.pageParts(c, status, logsTitle, logsHref, fragment, page)
}

// List lists requests, newest first, filtered by the query.
func (h *Logs) List(c echo.Context) error { return h.logsPage(c, nil, nil) }

// Rows answers the live tail's poll, GET /logs/rows?after=<cursor>&<the
// page's filters>: the entries newer than the cursor that match the
// filters, newest first, as rows to prepend, led by the poll again with the
// newest of them as its cursor (so each poll starts where the last one's
// rows end: no entry twice, none skipped). At most a page (50) per poll;
// when more arrived, the newest 50 come with a row saying the older ones
// are left out. Nothing new is 204, which htmx leaves in place. Without
// after (the list was empty) the first arrivals come as the whole table.
//
// The tail follows when requests ended (rows are written then, in batches
// about a second later), not when they arrived: a long stream that ends
// after newer requests were shown is prepended when it ends, like them;
// its Time column still says when it arrived, and a reload shows it in its
// place by arrival.
func (h *Logs) Rows(c echo.Context) error {
	ctx := c.Request().Context()
	v := c.QueryParams()
	f, q, errs := logFilters(v, h.Clock.Now())
	if len(errs) > 0 {
		return &services.ValidationError{Fields: errs}
	}
	f.Tail = true
	q.Cursor, q.After = "", v.Get("after")
	names, err := h.logNames(ctx, nil)
	if err != nil {
		return err
	}
	page, err := h.Logs.ListRequestLogs(ctx, q)
	if err != nil {
		return err
	}
	if len(page.Items) == 0 {
		c.Response().Header().Add("Vary", "HX-Request")
		c.Response().Header().Set("Cache-Control", "no-store")
		return c.NoContent(http.StatusNoContent)
	}
	now := h.Clock.Now()
	rows := make([]views.LogRowVM, 0, len(page.Items))
	for _, e := range page.Items {
		rows = append(rows, views.NewLogRowVM(e, names, now))
	}
	poll := f.TailRowsURL(services.TailCursor(page.Items))
	if q.After == "" {
		list := views.LogsListVM{Rows: rows, Filtered: f.Active(), Tail: true, TailURL: poll}
		if page.NextCursor != "" {
			list.OlderURL = logsURL(f.Query(), page.NextCursor)
		}
		return render(c, http.StatusOK, views.LogsTable(list), nil)
	}
	vm := views.LogTailVM{Rows: rows, PollURL: poll, Gap: page.NextCursor != "", ListURL: logsURL(f.Query(), "")}
	return render(c, http.StatusOK, views.LogTailRows(vm), nil)
}

// Show shows one request: the drawer for htmx, else the list page
// with the drawer open.
func (h *Logs) Show(c echo.Context) error {
	ctx := c.Request().Context()
	e, err := h.Logs.FindRequestLog(ctx, c.Param("id"))
	if err != nil {
		return err
	}
	names, err := h.logNames(ctx, nil)
	if err != nil {
		return err
	}
	detail := views.NewLogDetailVM(e, names, h.Clock.Now(), logsHref)
	return h.logsPage(c, &detail, views.LogDetail(detail))
}
