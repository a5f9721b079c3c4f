package handlers

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"switchyard/services"
	"switchyard/views"
)

// Combos page and builder (50-dashboard §6.5). Every action calls the same
// services.Combos method as its /api/combos twin.

const combosTitle, combosHref = "Combos", "/combos"

// combosList loads the ordered list with each target's readiness and
// dispatch metrics; focus names a move button to refocus.
func (d *Dashboard) combosList(ctx context.Context, focus string) (views.CombosListVM, error) {
	combos, err := d.Combos.List(ctx)
	if err != nil {
		return views.CombosListVM{}, err
	}
	conns, err := d.Conns.List(ctx, services.ConnectionFilter{})
	if err != nil {
		return views.CombosListVM{}, err
	}
	list := views.NewCombosListVM(combos, conns, focus).WithReadiness(d.comboReadiness(combos, conns)).
		WithMetrics(d.comboMetrics(combos))
	if d.Logs != nil {
		entries, truncated, err := d.recentRequests(ctx, d.Clock.Now().Add(-time.Hour))
		if err != nil {
			return views.CombosListVM{}, err
		}
		list = list.WithTraffic(entries, truncated)
	}
	return list, nil
}

// comboMetrics reads the live dispatch metrics of every model target
// (30-routing §8.1): its pinned connection's, or those of every connection
// of its provider merged. A combo reference shows as unknown.
func (d *Dashboard) comboMetrics(combos []services.Combo) map[string][]views.TargetMetricsVM {
	if d.Dispatch == nil {
		return nil
	}
	out := make(map[string][]views.TargetMetricsVM, len(combos))
	for _, cb := range combos {
		list := make([]views.TargetMetricsVM, len(cb.Targets))
		for i, t := range cb.Targets {
			if t.Kind == services.KindCombo {
				list[i] = views.UnknownTargetMetrics
				continue
			}
			pin := ""
			if t.ConnectionID != nil {
				pin = *t.ConnectionID
			}
			list[i] = views.NewTargetMetricsVM(d.Dispatch.TargetStats(t.Provider, t.Model, pin))
		}
		out[cb.ID] = list
	}
	return out
}

// renderCombosList answers with the list (htmx) or the page.
func (d *Dashboard) renderCombosList(c echo.Context, focus string) error {
	list, err := d.combosList(c.Request().Context(), focus)
	if err != nil {
		return err
	}
	return d.pageParts(c, http.StatusOK, combosTitle, combosHref, views.CombosList(list), views.CombosPage(views.CombosPageVM{List: list}))
}

// CombosPage shows the combos in order; ?saved=<id> names the combo just saved.
func (d *Dashboard) CombosPage(c echo.Context) error {
	ctx := c.Request().Context()
	list, err := d.combosList(ctx, "")
	if err != nil {
		return err
	}
	vm := views.CombosPageVM{List: list}
	if id := c.QueryParam("saved"); id != "" {
		if cb, err := d.Combos.Get(ctx, id); err == nil {
			vm.Saved = cb.Name
		}
	}
	return d.page(c, http.StatusOK, combosTitle, combosHref, views.CombosPage(vm))
}

// builder renders the builder: the form alone for htmx, the page otherwise.
func (d *Dashboard) builder(c echo.Context, status int, vm views.ComboBuilderVM, formOnly bool) error {
	ctx := c.Request().Context()
	conns, err := d.Conns.List(ctx, services.ConnectionFilter{})
	if err != nil {
		return err
	}
	combos, err := d.Combos.List(ctx)
	if err != nil {
		return err
	}
	vm.Fill(services.Strategies(), d.providers(), conns, combos)
	title := "New combo"
	if vm.Edit {
		title = "Edit combo " + vm.Name
	}
	page := views.ComboBuilderPage(vm)
	frag := page
	if formOnly {
		frag = views.ComboBuilder(vm)
	}
	return d.pageParts(c, status, title, combosHref, frag, page)
}

// ComboNew shows an empty builder.
func (d *Dashboard) ComboNew(c echo.Context) error {
	return d.builder(c, http.StatusOK, views.NewComboBuilderVM(), false)
}

// ComboEdit shows the builder filled from a stored combo (Combos.Get, twin GET /api/combos/{id}).
func (d *Dashboard) ComboEdit(c echo.Context) error {
	cb, err := d.Combos.Get(c.Request().Context(), c.Param("id"))
	if err != nil {
		return err
	}
	return d.builder(c, http.StatusOK, views.EditComboBuilderVM(cb), false)
}

// ComboBuilder re-renders the builder after an edit (op); nothing is saved.
func (d *Dashboard) ComboBuilder(c echo.Context) error {
	v := form(c)
	vm := comboBuilderForm(v)
	vm.Apply(v.Get("op"))
	return d.builder(c, http.StatusOK, vm, true)
}

// ComboCreate saves a new combo (Combos.Create, twin POST /api/combos).
func (d *Dashboard) ComboCreate(c echo.Context) error {
	vm := comboBuilderForm(form(c))
	vm.ID, vm.Edit = "", false
	cb, warnings, err := d.Combos.Create(c.Request().Context(), comboInput(vm))
	return d.comboSaved(c, vm, cb, warnings, err)
}

// ComboUpdate replaces a combo (Combos.Replace, twin PUT /api/combos/{id}).
func (d *Dashboard) ComboUpdate(c echo.Context) error {
	vm := comboBuilderForm(form(c))
	vm.ID, vm.Edit = c.Param("id"), true
	cb, warnings, err := d.Combos.Replace(c.Request().Context(), vm.ID, comboInput(vm))
	return d.comboSaved(c, vm, cb, warnings, err)
}

// comboSaved re-renders the builder with 422 on validation errors, else
// redirects to the list with combos-changed and a toast (warnings included).
func (d *Dashboard) comboSaved(c echo.Context, vm views.ComboBuilderVM, cb services.Combo, warnings []string, err error) error {
	if verr, ok := validation(err); ok {
		vm.Errors = views.NewFieldErrors(verr.Fields, nil)
		return d.builder(c, http.StatusUnprocessableEntity, vm, true)
	}
	if err != nil {
		return err
	}
	trigger(c, views.EventCombosChanged, nil)
	text, level := "Combo "+cb.Name+" saved.", "success"
	for _, w := range warnings {
		text, level = text+" "+views.ComboWarningText(w), "warning"
	}
	toast(c, level, text)
	return redirect(c, combosHref+"?saved="+cb.ID)
}

// ComboEnabled switches a combo on or off and answers with its row
// (Combos.SetEnabled, twin PATCH /api/combos/{id}).
func (d *Dashboard) ComboEnabled(c echo.Context) error {
	ctx := c.Request().Context()
	on := checked(form(c), "enabled")
	cb, err := d.Combos.SetEnabled(ctx, c.Param("id"), on)
	if err != nil {
		return err
	}
	trigger(c, views.EventCombosChanged, nil)
	word := "disabled"
	if on {
		word = "enabled"
	}
	toast(c, "success", "Combo "+cb.Name+" "+word+".")
	list, err := d.combosList(ctx, "")
	if err != nil {
		return err
	}
	for _, r := range list.Rows {
		if r.ID == cb.ID {
			return d.pageParts(c, http.StatusOK, combosTitle, combosHref, views.ComboRow(r), views.CombosPage(views.CombosPageVM{List: list}))
		}
	}
	return services.ErrNotFound
}

// CombosReorder stores a new order (Combos.Reorder, twin POST /api/combos/reorder)
// and answers with the list, focus kept on the button that moved the row.
func (d *Dashboard) CombosReorder(c echo.Context) error {
	v := form(c)
	err := d.Combos.Reorder(c.Request().Context(), idList(v))
	if _, ok := validation(err); ok {
		// The order posted was stale (a combo was added or removed meanwhile):
		// show the current list again.
		toast(c, "error", "The combo list changed meanwhile; this is the current order.")
		list, err := d.combosList(c.Request().Context(), "")
		if err != nil {
			return err
		}
		return d.pageParts(c, http.StatusUnprocessableEntity, combosTitle, combosHref, views.CombosList(list), views.CombosPage(views.CombosPageVM{List: list}))
	}
	if err != nil {
		return err
	}
	trigger(c, views.EventCombosChanged, nil)
	toast(c, "success", "Combo order saved.")
	focus := v.Get("focus")
	if !strings.HasPrefix(focus, "up:") && !strings.HasPrefix(focus, "down:") {
		focus = ""
	}
	return afterMutation(c, combosHref, func() error { return d.renderCombosList(c, focus) })
}

// ComboDuplicate copies a combo as "<name>-copy", disabled (Combos.Duplicate).
func (d *Dashboard) ComboDuplicate(c echo.Context) error {
	cb, err := d.Combos.Duplicate(c.Request().Context(), c.Param("id"))
	if err != nil {
		return err
	}
	trigger(c, views.EventCombosChanged, nil)
	toast(c, "success", "Combo duplicated as "+cb.Name+" (disabled).")
	return afterMutation(c, combosHref, func() error { return d.renderCombosList(c, "") })
}

// ComboConfirmDelete shows what deleting a combo touches.
func (d *Dashboard) ComboConfirmDelete(c echo.Context) error {
	ctx := c.Request().Context()
	cb, err := d.Combos.Get(ctx, c.Param("id"))
	if err != nil {
		return err
	}
	refs, err := d.Combos.ReferencedBy(ctx, cb.ID)
	if err != nil {
		return err
	}
	keys, err := d.Keys.List(ctx, "")
	if err != nil {
		return err
	}
	cf := views.ComboDeleteConfirm(cb, refs, keys)
	list, err := d.combosList(ctx, "")
	if err != nil {
		return err
	}
	return d.pageParts(c, http.StatusOK, combosTitle, combosHref, views.ConfirmPanel(*cf),
		views.CombosPage(views.CombosPageVM{List: list.WithConfirm(cf)}))
}

// ComboDelete removes a combo (Combos.Delete, twin DELETE /api/combos/{id});
// force=1, sent by the confirmation when other combos refer to it, also
// removes those references.
func (d *Dashboard) ComboDelete(c echo.Context) error {
	ctx := c.Request().Context()
	cb, err := d.Combos.Get(ctx, c.Param("id"))
	if err != nil {
		return err
	}
	if err := d.Combos.Delete(ctx, cb.ID, form(c).Get("force") == "1"); err != nil {
		return err
	}
	trigger(c, views.EventCombosChanged, nil)
	toast(c, "success", "Combo "+cb.Name+" deleted.")
	return afterMutation(c, combosHref, func() error { return d.renderCombosList(c, "") })
}
