package handlers

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"switchyard/services"
	"switchyard/services/health"
	"switchyard/services/human"
	"switchyard/views"
)

// Health page (50-dashboard §6.12): the admin body of GET
// /api/monitoring/health (its API twin), rendered in a panel polled every 10 s.

const healthTitle, healthHref = "Health", "/health"

// HealthReporter builds the admin health report (cached for a second).
type HealthReporter interface {
	HealthReport(ctx context.Context) health.Report
}

// Health serves the Health page.
type Health struct {
	Layout
	Reports HealthReporter
	Clock   services.Clock
}

// healthVM shapes the report for the panel.
func healthVM(r health.Report, now time.Time) views.HealthVM {
	vm := views.HealthVM{Status: r.Status, Reasons: r.Reasons, Version: r.Version, GoVersion: r.Runtime.GoVersion,
		Uptime: human.Duration(time.Duration(r.UptimeS)*time.Second, human.Countdown), Listen: r.Listen, Demo: r.Demo,
		DBOK: r.Database.OK, DBPath: r.Database.Path, DBSchema: r.Database.SchemaVersion,
		DBPing: fmt.Sprintf("%.1f ms", r.Database.PingMs), DBWal: views.HumanBytes(r.Database.WalBytes),
		LogQueue: r.RequestLog.QueueDepth, LogDropped: r.RequestLog.Dropped, KeyID: r.KeyID,
		Goroutines: r.Runtime.Goroutines, Heap: views.HumanBytes(int64(r.Runtime.HeapInuseBytes)),
		Breakers: views.CountBreakers(r.Breakers), Cooling: len(r.CoolingConnections),
		Terminal: len(r.TerminalConnections), Locked: r.ModelLockouts.Active,
		SharedMode: r.Shared.Mode, Replica: r.Shared.Replica, Redis: r.Shared.Redis, Limits: r.Shared.Limits,
		DBShared: r.Shared.Mode == health.ModeShared}
	if rs := r.Shared.Reserves; rs != nil {
		vm.Reserves = &views.ReservesVM{SpareGrants: rs.SpareGrants, BlockTokens: rs.BlockTokens}
	}
	if cf := r.ChangeFeed; cf != nil {
		vm.FeedConnected, vm.FeedResync = cf.Connected, "never"
		if cf.LastResyncAgeMs >= 0 {
			vm.FeedResync = human.Duration(time.Duration(cf.LastResyncAgeMs)*time.Millisecond, human.Countdown) + " ago"
		}
	}
	for _, g := range r.WindowGate {
		if g.RetryAfterMs > 0 {
			vm.WindowGate++
		}
	}
	at := r.At.UTC().Truncate(time.Millisecond)
	vm.Generated = views.NewTimeVM(&at, now)
	return vm
}

// Show shows the health report (GET /health).
func (h *Health) Show(c echo.Context) error {
	vm := healthVM(h.Reports.HealthReport(c.Request().Context()), h.Clock.Now())
	return h.page(c, http.StatusOK, healthTitle, healthHref, views.HealthPage(vm))
}

// Panel is the polled panel; without htmx it is the Health page.
func (h *Health) Panel(c echo.Context) error {
	vm := healthVM(h.Reports.HealthReport(c.Request().Context()), h.Clock.Now())
	return h.pageParts(c, http.StatusOK, healthTitle, healthHref, views.HealthPanel(vm), views.HealthPage(vm))
}
