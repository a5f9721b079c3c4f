package handlers

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"switchyard/services/resilience"
	"switchyard/views"
)

// Health page (50-dashboard §6.12): the admin body of GET
// /api/monitoring/health (its API twin), rendered in a panel polled every 10 s.

const healthTitle, healthHref = "Health", "/health"

// healthDoc is the part of the admin health report the page shows, read
// from its JSON form (the report type belongs to the app).
type healthDoc struct {
	Status   string   `json:"status"`
	Reasons  []string `json:"reasons"`
	Time     string   `json:"time"`
	Version  string   `json:"version"`
	UptimeS  int64    `json:"uptimeS"`
	Demo     bool     `json:"demo"`
	KeyID    string   `json:"secretKeyId"`
	Listen   string   `json:"listenAddr"`
	Database struct {
		OK            bool    `json:"ok"`
		PingMs        float64 `json:"pingMs"`
		SchemaVersion string  `json:"schemaVersion"`
		WalBytes      int64   `json:"walBytes"`
		Path          string  `json:"path"`
	} `json:"database"`
	Runtime struct {
		GoVersion      string `json:"goVersion"`
		Goroutines     int    `json:"goroutines"`
		HeapInuseBytes int64  `json:"heapInuseBytes"`
	} `json:"runtime"`
	Breakers            []resilience.BreakerStatus    `json:"breakers"`
	WindowGate          []resilience.WindowGateStatus `json:"windowGate"`
	CoolingConnections  []json.RawMessage             `json:"coolingConnections"`
	TerminalConnections []json.RawMessage             `json:"terminalConnections"`
	ModelLockouts       struct {
		Active int `json:"active"`
	} `json:"modelLockouts"`
	RequestLog struct {
		QueueDepth int64 `json:"queueDepth"`
		Dropped    int64 `json:"dropped"`
	} `json:"requestLog"`
}

// health builds the panel's view model from the report.
func (d *Dashboard) health(ctx context.Context) (views.HealthVM, error) {
	if d.HealthReport == nil {
		return views.HealthVM{}, fmt.Errorf("handlers: no health report configured")
	}
	b, err := json.Marshal(d.HealthReport(ctx))
	if err != nil {
		return views.HealthVM{}, fmt.Errorf("handlers: health report: %w", err)
	}
	var h healthDoc
	if err := json.Unmarshal(b, &h); err != nil {
		return views.HealthVM{}, fmt.Errorf("handlers: health report: %w", err)
	}
	vm := views.HealthVM{Status: h.Status, Reasons: h.Reasons, Version: h.Version, GoVersion: h.Runtime.GoVersion,
		Uptime: views.HumanDuration(time.Duration(h.UptimeS) * time.Second), Listen: h.Listen, Demo: h.Demo,
		DBOK: h.Database.OK, DBPath: h.Database.Path, DBSchema: h.Database.SchemaVersion,
		DBPing: fmt.Sprintf("%.1f ms", h.Database.PingMs), DBWal: views.HumanBytes(h.Database.WalBytes),
		LogQueue: h.RequestLog.QueueDepth, LogDropped: h.RequestLog.Dropped, KeyID: h.KeyID,
		Goroutines: h.Runtime.Goroutines, Heap: views.HumanBytes(h.Runtime.HeapInuseBytes),
		Breakers: views.CountBreakers(h.Breakers), Cooling: len(h.CoolingConnections),
		Terminal: len(h.TerminalConnections), Locked: h.ModelLockouts.Active}
	for _, g := range h.WindowGate {
		if g.RetryAfterMs > 0 {
			vm.WindowGate++
		}
	}
	if t, err := time.Parse(time.RFC3339, h.Time); err == nil {
		vm.Generated = views.NewTimeVM(&t, d.Clock.Now())
	}
	return vm, nil
}

// HealthPage shows the health report.
func (d *Dashboard) HealthPage(c echo.Context) error {
	vm, err := d.health(c.Request().Context())
	if err != nil {
		return err
	}
	return d.page(c, http.StatusOK, healthTitle, healthHref, views.HealthPage(vm))
}

// HealthPanel is the polled panel; without htmx it is the Health page.
func (d *Dashboard) HealthPanel(c echo.Context) error {
	vm, err := d.health(c.Request().Context())
	if err != nil {
		return err
	}
	return d.pageParts(c, http.StatusOK, healthTitle, healthHref, views.HealthPanel(vm), views.HealthPage(vm))
}
