package handlers

import (
	"context"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"switchyard/services"
	"switchyard/views"
)

// Overview (50-dashboard §6.3): traffic tiles and the requests chart over a
// window, resilience at a glance, the top failing targets of the last hour,
// counts, the client base URL with copyable snippets, and the get-started
// checklist.

// overviewScanPages bounds how much of the request log one refresh of the
// traffic tiles reads (pages of services.MaxRequestLogLimit entries, newest
// first). A busier window is summarised from its newest entries, and the
// tiles say so.
const overviewScanPages = 10

// failingSpan is the time "Top failing targets" covers.
const failingSpan = time.Hour

// OverviewPage renders the Overview; ?window=1h|24h picks the traffic window.
func (d *Dashboard) OverviewPage(c echo.Context) error {
	ctx := c.Request().Context()
	conns, err := d.Conns.List(ctx, services.ConnectionFilter{})
	if err != nil {
		return err
	}
	combos, err := d.Combos.List(ctx)
	if err != nil {
		return err
	}
	keys, err := d.Keys.List(ctx, "")
	if err != nil {
		return err
	}
	stats, err := d.overviewStats(ctx, views.LookupOverviewWindow(c.QueryParam("window")))
	if err != nil {
		return err
	}
	now := d.Clock.Now()
	active, used := 0, false
	for _, k := range keys {
		if k.State(now) == services.KeyActive {
			active++
		}
		if k.LastUsedAt != nil {
			used = true
		}
	}
	vm := views.NewOverviewVM(len(conns), len(combos), len(keys), active, used, baseURL(c.Request()),
		views.ExampleModel(combos, conns, d.providers()))
	vm.Stats = stats
	return d.page(c, http.StatusOK, "Overview", "/", views.OverviewPage(vm))
}

// OverviewStats is the polled tiles region (GET /overview/stats?window=…,
// every 10 s, on resilience-changed and from the window switch). Opened
// directly it is the Overview page with that window.
func (d *Dashboard) OverviewStats(c echo.Context) error {
	if !isHTMX(c.Request()) {
		return d.OverviewPage(c)
	}
	stats, err := d.overviewStats(c.Request().Context(), views.LookupOverviewWindow(c.QueryParam("window")))
	if err != nil {
		return err
	}
	return render(c, http.StatusOK, views.OverviewStats(stats), nil)
}

// overviewStats reads the traffic of the window from the request log (the
// tiles, the chart and the top failing targets of the last hour) and the
// resilience counts from the engine (the figures of the Runtime page's KPI
// strip, plus active leases and queued requests).
func (d *Dashboard) overviewStats(ctx context.Context, w views.OverviewWindow) (views.OverviewStatsVM, error) {
	now := d.Clock.Now()
	vm := views.OverviewStatsVM{Now: now, Window: w}
	if d.Logs != nil {
		entries, truncated, err := d.recentRequests(ctx, now.Add(-w.Span))
		if err != nil {
			return vm, err
		}
		vm.Traffic = views.NewTrafficVM(entries, truncated)
		vm.Chart = views.NewTrafficChartVM(entries, w, now)
		// The top failing targets cover the last hour whatever the window:
		// the newest entries, which a longer window read first.
		conns, err := d.Conns.List(ctx, services.ConnectionFilter{})
		if err != nil {
			return vm, err
		}
		names := make(map[string]string, len(conns))
		for _, cn := range conns {
			names[cn.ID] = cn.Name
		}
		vm.Failing = views.NewFailingTargetsVM(entries, now.Add(-failingSpan), names, now)
	}
	if d.Engine != nil {
		sum, err := d.runtimeSummary(ctx)
		if err != nil {
			return vm, err
		}
		vm.Resilience = views.ResilienceTilesVM{OpenBreakers: sum.OpenBreakers, Cooling: sum.Cooling, Terminal: sum.Terminal, Locked: sum.Locked}
	}
	if d.Leases != nil {
		vm.Resilience.Leases = len(d.Leases.Active())
	}
	if d.Queues != nil {
		for _, q := range d.Queues.Stats() {
			vm.Resilience.Queued += q.Queued
		}
	}
	return vm, nil
}

// recentRequests reads the request log from since to now, newest first, at
// most overviewScanPages pages; truncated says older entries of the window
// were left unread.
func (d *Dashboard) recentRequests(ctx context.Context, since time.Time) ([]services.RequestLogEntry, bool, error) {
	q := services.RequestLogQuery{Since: since, Limit: services.MaxRequestLogLimit}
	var out []services.RequestLogEntry
	for range overviewScanPages {
		page, err := d.Logs.ListRequestLogs(ctx, q)
		if err != nil {
			return nil, false, err
		}
		out = append(out, page.Items...)
		if page.NextCursor == "" {
			return out, false, nil
		}
		q.Cursor = page.NextCursor
	}
	return out, true, nil
}
