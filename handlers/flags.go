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
	"switchyard/services/settings"
	"switchyard/views"
)

// Settings → Feature flags (50-dashboard §6.10). Save and Reset call
// settings.Flags.Patch, the same method as PATCH /api/feature-flags;
// the emergency fallback model is emergencyFallback.target, saved with
// PatchResilience like PATCH /api/resilience.

const flagsTitle, flagsHref = "Feature flags", "/settings/flags"

// FlagSettings reads and sets the emergency fallback model, which the
// fallback's flag row saves with its switch (resilience.SettingsService).
type FlagSettings interface {
	Resilience() *resilience.Document
	PatchResilience(ctx context.Context, patch []byte, ifMatch string) (resilience.Document, int64, error)
}

// Flags serves Settings → Feature flags.
type Flags struct {
	Layout
	Flags    FeatureFlags
	Settings FlagSettings
	Combos   ComboLister
	Conns    ConnectionLister
}

// flagRow builds one row from the service's flag.
func (h *Flags) flagRow(ctx context.Context, f settings.FeatureFlag) (views.FlagRowVM, error) {
	r := views.NewFlagRowVM(f.Key, f.Field, f.Value, f.Source, f.Env, f.RequiresRestart, f.Description)
	if r.HasTarget {
		r.Target = h.Settings.Resilience().EmergencyFallback.Target
		targets, err := h.fallbackTargets(ctx)
		if err != nil {
			return r, err
		}
		r.Targets = targets
	}
	return r, nil
}

// fallbackTargets are the model choices of the emergency fallback: enabled
// combos and provider/model pairs of enabled connections.
func (h *Flags) fallbackTargets(ctx context.Context) ([]string, error) {
	combos, err := h.Combos.List(ctx)
	if err != nil {
		return nil, err
	}
	conns, err := h.Conns.List(ctx, services.ConnectionFilter{})
	if err != nil {
		return nil, err
	}
	models := map[string][]string{}
	for _, p := range h.Conns.Catalogue().All() {
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
func (h *Flags) findFlag(c echo.Context) (settings.FeatureFlag, error) {
	key := c.Param("key")
	for _, f := range h.Flags.List() {
		if f.Key == key {
			return f, nil
		}
	}
	return settings.FeatureFlag{}, services.ErrNotFound
}

// flagsPage renders the page, with row replacing its flag when given, and
// the fragment for htmx.
func (h *Flags) flagsPage(c echo.Context, status int, row *views.FlagRowVM) error {
	ctx := c.Request().Context()
	var vm views.FlagsPageVM
	for _, f := range h.Flags.List() {
		if row != nil && row.Key == f.Key {
			vm.Rows = append(vm.Rows, *row)
			continue
		}
		r, err := h.flagRow(ctx, f)
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
	return h.pageParts(c, status, flagsTitle, flagsHref, fragment, page)
}

// List lists the flags.
func (h *Flags) List(c echo.Context) error { return h.flagsPage(c, http.StatusOK, nil) }

// Update sets a flag (PatchFlags, twin PATCH /api/feature-flags); the
// emergency fallback row also sets its model (PatchResilience).
func (h *Flags) Update(c echo.Context) error {
	f, err := h.findFlag(c)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	v := form(c)
	on := checked(v, "value")
	target := strings.TrimSpace(v.Get("target"))
	if f.Key == views.FlagKeyEmergencyFallback && has(v, "target") {
		ef := map[string]any{"enabled": on}
		if target != h.Settings.Resilience().EmergencyFallback.Target {
			ef["target"] = nilIfBlank(target)
		}
		body, _ := json.Marshal(map[string]any{"emergencyFallback": ef})
		_, _, err = h.Settings.PatchResilience(ctx, body, "")
	} else {
		body, _ := json.Marshal(map[string]any{f.Key: on})
		_, err = h.Flags.Patch(ctx, body)
	}
	if verr, ok := validation(err); ok {
		row, rerr := h.flagRow(ctx, f)
		if rerr != nil {
			return rerr
		}
		row.Value, row.Errors = on, views.FlagErrors(f.Key, verr.Fields)
		if row.HasTarget {
			row.Target = target
		}
		return h.flagsPage(c, http.StatusUnprocessableEntity, &row)
	}
	if err != nil {
		return err
	}
	state := "off"
	if on {
		state = "on"
	}
	return h.flagSaved(c, f.Key, views.FlagLabel(f.Key)+" is "+state+".")
}

// Delete drops the dashboard's value of a flag (PatchFlags with null);
// the environment or the default applies again.
func (h *Flags) Delete(c echo.Context) error {
	f, err := h.findFlag(c)
	if err != nil {
		return err
	}
	body, _ := json.Marshal(map[string]any{f.Key: nil})
	if _, err := h.Flags.Patch(c.Request().Context(), body); err != nil {
		return err
	}
	return h.flagSaved(c, f.Key, views.FlagLabel(f.Key)+" reset to its default.")
}

// flagSaved answers a successful save or reset with the refreshed row.
func (h *Flags) flagSaved(c echo.Context, key, msg string) error {
	trigger(c, views.EventFlagsChanged, map[string]string{"flag": key})
	toast(c, "success", msg)
	return afterMutation(c, flagsHref, func() error {
		f, err := h.findFlag(c)
		if err != nil {
			return err
		}
		row, err := h.flagRow(c.Request().Context(), f)
		if err != nil {
			return err
		}
		row.Saved = true
		return render(c, http.StatusOK, views.FlagRow(row), nil)
	})
}
