package handlers

import (
	"context"
	"net/http"

	"github.com/labstack/echo/v4"

	"switchyard/services"
	"switchyard/services/stats"
	"switchyard/views"
)

// Overview (50-dashboard §6.3): traffic tiles and the requests chart over a
// window, resilience at a glance, the top failing targets of the last hour,
// counts, the client base URL with copyable snippets, and the get-started
// checklist.

// Overview serves the Overview page.
type Overview struct {
	Layout
	Conns  ConnectionLister
	Combos ComboLister
	Keys   KeyLister
	// Stats feeds the traffic tiles, the chart, the failing targets and the
	// estimated cost, from memory (nil leaves them out).
	Traffic TrafficSummaries
	// Status feeds the resilience tiles (nil leaves them out).
	Status StatusReader
	// Leases, Queues and Waiting may be nil.
	Leases  LeaseAdmin
	Queues  QueueStats
	Waiting WaitingReader
	Clock   services.Clock
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
	// First-run setup redirects here with ?welcome=1 (a toast in the
	// HX-Trigger of a 303 would be lost with the redirect).
	if c.QueryParam("welcome") == "1" {
		return h.pageFlash(c, http.StatusOK, "Overview", "/", views.OverviewPage(vm), views.WelcomeFlash)
	}
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

// overviewStats reads the traffic of the window from the in-memory buckets
// (the tiles, the chart, the estimated cost, and the top failing targets
// of the last hour whatever the window) and the resilience counts from the
// engine (the figures of the Runtime page's KPI strip, plus active leases
// and queued requests). Nothing of it reads the database but the
// connection names.
func (h *Overview) overviewStats(ctx context.Context, w views.OverviewWindow) (views.OverviewStatsVM, error) {
	now := h.Clock.Now()
	vm := views.OverviewStatsVM{Now: now, Window: w}
	if h.Traffic != nil {
		sum := h.Traffic.Summary(w.Key)
		names, err := connectionNames(ctx, h.Conns)
		if err != nil {
			return vm, err
		}
		vm.Traffic = views.NewTrafficVM(sum)
		vm.Chart = views.NewTrafficChartVM(sum, w, now)
		vm.Cost = views.NewCostVM(sum, names)
		failing := sum.Failing
		if w.Key != stats.Window1h {
			failing = h.Traffic.Summary(stats.Window1h).Failing
		}
		vm.Failing = views.NewFailingTargetsVM(failing, names, now)
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
	if h.Waiting != nil {
		vm.Resilience.Waiting = h.Waiting.Count()
	}
	return vm, nil
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
