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

// Overview serves the Overview page.
type Overview struct {
	Layout
	Conns  ConnectionLister
	Combos ComboLister
	Keys   KeyLister
	// Logs feeds the traffic tiles (nil leaves them out).
	Logs services.RequestLogStore
	// Status feeds the resilience tiles (nil leaves them out).
	Status StatusReader
	// Leases and Queues may be nil.
	Leases LeaseAdmin
	Queues QueueStats
	Clock  services.Clock
}

// Show renders the Overview; ?window=1h|24h picks the traffic window.
func (h *Overview) Show(c echo.Context) error {
	ctx := c.Request().Context()
	conns, err := h.Conns.List(ctx, services.ConnectionFilter{})
	if err != nil {
		return err
	}
	combos, err := h.Combos.List(ctx)
	if err != nil {
		return err
	}
	keys, err := h.Keys.List(ctx, "")
	if err != nil {
		return err
	}
	stats, err := h.overviewStats(ctx, views.LookupOverviewWindow(c.QueryParam("window")))
	if err != nil {
		return err
	}
	now := h.Clock.Now()
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
		views.ExampleModel(combos, conns, h.Conns.Catalogue().All()))
	vm.Stats = stats
	return h.page(c, http.StatusOK, "Overview", "/", views.OverviewPage(vm))
}

// Stats is the polled tiles region (GET /overview/stats?window=…,
// every 10 s, on resilience-changed and from the window switch). Opened
// directly it is the Overview page with that window.
func (h *Overview) Stats(c echo.Context) error {
	if !isHTMX(c.Request()) {
		return h.Show(c)
	}
	stats, err := h.overviewStats(c.Request().Context(), views.LookupOverviewWindow(c.QueryParam("window")))
	if err != nil {
		return err
	}
	return render(c, http.StatusOK, views.OverviewStats(stats), nil)
}

// overviewStats reads the traffic of the window from the request log (the
// tiles, the chart and the top failing targets of the last hour) and the
// resilience counts from the engine (the figures of the Runtime page's KPI
// strip, plus active leases and queued requests).
func (h *Overview) overviewStats(ctx context.Context, w views.OverviewWindow) (views.OverviewStatsVM, error) {
	now := h.Clock.Now()
	vm := views.OverviewStatsVM{Now: now, Window: w}
	if h.Logs != nil {
		entries, truncated, err := recentRequests(ctx, h.Logs, now.Add(-w.Span))
		if err != nil {
			return vm, err
		}
		vm.Traffic = views.NewTrafficVM(entries, truncated)
		vm.Chart = views.NewTrafficChartVM(entries, w, now)
		// The top failing targets cover the last hour whatever the window:
		// the newest entries, which a longer window read first.
		names, err := connectionNames(ctx, h.Conns)
		if err != nil {
			return vm, err
		}
		vm.Failing = views.NewFailingTargetsVM(entries, now.Add(-failingSpan), names, now)
	}
	if h.Status != nil {
		snap := h.Status.Snapshot()
		sum := summaryVM(&snap)
		vm.Resilience = views.ResilienceTilesVM{OpenBreakers: sum.OpenBreakers, Cooling: sum.Cooling, Terminal: sum.Terminal, Locked: sum.Locked}
	}
	if h.Leases != nil {
		vm.Resilience.Leases = len(h.Leases.Active())
	}
	if h.Queues != nil {
		for _, q := range h.Queues.Stats() {
			vm.Resilience.Queued += q.Queued
		}
	}
	return vm, nil
}

// recentRequests reads the request log from since to now, newest first, at
// most overviewScanPages pages; truncated says older entries of the window
// were left unread.
func recentRequests(ctx context.Context, logs services.RequestLogStore, since time.Time) ([]services.RequestLogEntry, bool, error) {
	q := services.RequestLogQuery{Since: since, Limit: services.MaxRequestLogLimit}
	var out []services.RequestLogEntry
	for range overviewScanPages {
		page, err := logs.ListRequestLogs(ctx, q)
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

// connectionNames maps connection ids to names.
func connectionNames(ctx context.Context, conns ConnectionLister) (map[string]string, error) {
	list, err := conns.List(ctx, services.ConnectionFilter{})
	if err != nil {
		return nil, err
	}
	names := make(map[string]string, len(list))
	for _, cn := range list {
		names[cn.ID] = cn.Name
	}
	return names, nil
}
