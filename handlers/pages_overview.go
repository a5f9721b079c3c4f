package handlers

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"switchyard/services"
	"switchyard/views"
)

// OverviewPage is the first version of Overview (50-dashboard §6.3): counts,
// the client base URL with copyable snippets, and the get-started checklist.
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
	return d.page(c, http.StatusOK, "Overview", "/", views.OverviewPage(vm))
}
