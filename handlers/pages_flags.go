package handlers

import (
	"context"
	"encoding/json"
	"net/http"
	"sort"
	"strings"

	"github.com/labstack/echo/v4"

	"switchyard/services"
	"switchyard/services/resilience"
	"switchyard/views"
)

// Settings → Feature flags (50-dashboard §6.10). Save and Reset call
// SettingsService.PatchFlags, the same method as PATCH /api/feature-flags;
// the emergency fallback model is emergencyFallback.target, saved with
// PatchResilience like PATCH /api/resilience.

const flagsTitle, flagsHref = "Feature flags", "/settings/flags"

// flagRow builds one row from the service's flag.
func (d *Dashboard) flagRow(ctx context.Context, f resilience.FeatureFlag) (views.FlagRowVM, error) {
	r := views.NewFlagRowVM(f.Key, f.Field, f.Value, f.Source, f.Env, f.RequiresRestart, f.Description)
	if r.HasTarget {
		r.Target = d.Settings.Resilience().EmergencyFallback.Target
		targets, err := d.fallbackTargets(ctx)
		if err != nil {
			return r, err
		}
		r.Targets = targets
	}
	return r, nil
}

// fallbackTargets are the model choices of the emergency fallback: enabled
// combos and provider/model pairs of enabled connections.
func (d *Dashboard) fallbackTargets(ctx context.Context) ([]string, error) {
	combos, err := d.Combos.List(ctx)
	if err != nil {
		return nil, err
	}
	conns, err := d.Conns.List(ctx, services.ConnectionFilter{})
	if err != nil {
		return nil, err
	}
	models := map[string][]string{}
	for _, p := range d.providers() {
		models[p.ID] = p.Models
	}
	seen := map[string]bool{}
	var out []string
	add := func(s string) {
		if s != "" && !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	for _, cb := range combos {
		if cb.Enabled {
			add(cb.Name)
		}
	}
	var pairs []string
	for _, c := range conns {
		if !c.Enabled {
			continue
		}
		if c.DefaultModel != "" {
			pairs = append(pairs, c.Provider+"/"+c.DefaultModel)
		}
		for _, m := range models[c.Provider] {
			pairs = append(pairs, c.Provider+"/"+m)
		}
	}
	sort.Strings(pairs)
	for _, p := range pairs {
		add(p)
	}
	return out, nil
}

// findFlag is the flag of the :key parameter.
func (d *Dashboard) findFlag(c echo.Context) (resilience.FeatureFlag, error) {
	key := c.Param("key")
	for _, f := range d.Settings.Flags() {
		if f.Key == key {
			return f, nil
		}
	}
	return resilience.FeatureFlag{}, services.ErrNotFound
}

// flagsPage renders the page, with row replacing its flag when given, and
// the fragment for htmx.
func (d *Dashboard) flagsPage(c echo.Context, status int, row *views.FlagRowVM) error {
	ctx := c.Request().Context()
	var vm views.FlagsPageVM
	for _, f := range d.Settings.Flags() {
		if row != nil && row.Key == f.Key {
			vm.Rows = append(vm.Rows, *row)
			continue
		}
		r, err := d.flagRow(ctx, f)
		if err != nil {
			return err
		}
		vm.Rows = append(vm.Rows, r)
	}
	page := views.FlagsPage(vm)
	fragment := page
	if row != nil {
		fragment = views.FlagRow(*row)
	}
	return d.pageParts(c, status, flagsTitle, flagsHref, fragment, page)
}

// FlagsPage lists the flags.
func (d *Dashboard) FlagsPage(c echo.Context) error { return d.flagsPage(c, http.StatusOK, nil) }

// FlagSave sets a flag (PatchFlags, twin PATCH /api/feature-flags); the
// emergency fallback row also sets its model (PatchResilience).
func (d *Dashboard) FlagSave(c echo.Context) error {
	f, err := d.findFlag(c)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	v := form(c)
	on := checked(v, "value")
	target := strings.TrimSpace(v.Get("target"))
	if f.Key == views.FlagKeyEmergencyFallback && has(v, "target") {
		ef := map[string]any{"enabled": on}
		if target != d.Settings.Resilience().EmergencyFallback.Target {
			ef["target"] = nilIfBlank(target)
		}
		body, _ := json.Marshal(map[string]any{"emergencyFallback": ef})
		_, _, err = d.Settings.PatchResilience(ctx, body, "")
	} else {
		body, _ := json.Marshal(map[string]any{f.Key: on})
		_, err = d.Settings.PatchFlags(ctx, body)
	}
	if verr, ok := validation(err); ok {
		row, rerr := d.flagRow(ctx, f)
		if rerr != nil {
			return rerr
		}
		row.Value, row.Errors = on, views.FlagErrors(f.Key, verr.Fields)
		if row.HasTarget {
			row.Target = target
		}
		return d.flagsPage(c, http.StatusUnprocessableEntity, &row)
	}
	if err != nil {
		return err
	}
	state := "off"
	if on {
		state = "on"
	}
	return d.flagSaved(c, f.Key, views.FlagLabel(f.Key)+" is "+state+".")
}

// FlagReset drops the dashboard's value of a flag (PatchFlags with null);
// the environment or the default applies again.
func (d *Dashboard) FlagReset(c echo.Context) error {
	f, err := d.findFlag(c)
	if err != nil {
		return err
	}
	body, _ := json.Marshal(map[string]any{f.Key: nil})
	if _, err := d.Settings.PatchFlags(c.Request().Context(), body); err != nil {
		return err
	}
	return d.flagSaved(c, f.Key, views.FlagLabel(f.Key)+" reset to its default.")
}

// flagSaved answers a successful save or reset with the refreshed row.
func (d *Dashboard) flagSaved(c echo.Context, key, msg string) error {
	trigger(c, views.EventFlagsChanged, map[string]string{"flag": key})
	toast(c, "success", msg)
	return afterMutation(c, flagsHref, func() error {
		f, err := d.findFlag(c)
		if err != nil {
			return err
		}
		row, err := d.flagRow(c.Request().Context(), f)
		if err != nil {
			return err
		}
		row.Saved = true
		return render(c, http.StatusOK, views.FlagRow(row), nil)
	})
}
