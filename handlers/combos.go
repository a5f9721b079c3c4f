package handlers

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"switchyard/services"
	"switchyard/services/gateway"
	"switchyard/services/resilience"
	"switchyard/views"
)

// Combos page and builder (50-dashboard §6.5). Every action calls the same
// services.Combos method as its /api/combos twin.

const combosTitle, combosHref = "Combos", "/combos"

// ComboService is what the Combos page and its API twin call (services.Combos).
type ComboService interface {
	ComboLister
	ComboReader
	Create(ctx context.Context, in services.ComboInput) (services.Combo, []string, error)
	Replace(ctx context.Context, id string, in services.ComboInput) (services.Combo, []string, error)
	Patch(ctx context.Context, id string, p services.ComboPatch) (services.Combo, error)
	SetEnabled(ctx context.Context, id string, on bool) (services.Combo, error)
	Reorder(ctx context.Context, ids []string) error
	Duplicate(ctx context.Context, id string) (services.Combo, error)
	ReferencedBy(ctx context.Context, id string) ([]services.Combo, error)
	Delete(ctx context.Context, id string, force bool) error
}

// ComboLister lists the combos in list order.
type ComboLister interface {
	List(ctx context.Context) ([]services.Combo, error)
}

// Combos serves the Combos page, its builder, the readiness dots, the
// routing preview and the Test button.
type Combos struct {
	Layout
	Combos ComboService
	Conns  ConnectionLister
	Keys   KeyLister
	// Logs feeds the traffic column (nil leaves it out).
	Logs services.RequestLogStore
	// Gates are the resilience gates the readiness dots read (nil leaves
	// the dots out).
	Gates ReadinessGates
	// Dispatch is the gateway's view of the dispatch metrics and the quota
	// gate (nil leaves both out).
	Dispatch  DispatchView
	Tester    ComboTester
	Explainer ComboExplainer
	Clock     services.Clock
}

// DispatchView is what the Combos page reads from the gateway: the dispatch
// metrics of a target (30-routing §8.1) and gate 10, the quota gate (§8.4).
type DispatchView interface {
	TargetStats(provider, model, connID string) gateway.TargetStats
	QuotaBlocker(c *services.Connection) *resilience.Blocker
}

// combosList loads the ordered list with each target's readiness and
// dispatch metrics; focus names a move button to refocus.
func (h *Combos) combosList(ctx context.Context, focus string) (views.CombosListVM, error) {
	combos, err := h.Combos.List(ctx)
	if err != nil {
		return views.CombosListVM{}, err
	}
	conns, err := h.Conns.List(ctx, services.ConnectionFilter{})
	if err != nil {
		return views.CombosListVM{}, err
	}
	list := views.NewCombosListVM(combos, conns, focus).WithReadiness(h.comboReadiness(combos, conns)).
		WithMetrics(h.comboMetrics(combos))
	if h.Logs != nil {
		entries, truncated, err := recentRequests(ctx, h.Logs, h.Clock.Now().Add(-time.Hour))
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
func (h *Combos) comboMetrics(combos []services.Combo) map[string][]views.TargetMetricsVM {
	if h.Dispatch == nil {
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
			list[i] = views.NewTargetMetricsVM(h.Dispatch.TargetStats(t.Provider, t.Model, pin))
		}
		out[cb.ID] = list
	}
	return out
}

// renderCombosList answers with the list (htmx) or the page.
func (h *Combos) renderCombosList(c echo.Context, focus string) error {
	list, err := h.combosList(c.Request().Context(), focus)
	if err != nil {
		return err
	}
	return h.pageParts(c, http.StatusOK, combosTitle, combosHref, views.CombosList(list), views.CombosPage(views.CombosPageVM{List: list}))
}

// List shows the combos in order; ?saved=<id> names the combo just saved.
func (h *Combos) List(c echo.Context) error {
	ctx := c.Request().Context()
	list, err := h.combosList(ctx, "")
	if err != nil {
		return err
	}
	vm := views.CombosPageVM{List: list}
	if id := c.QueryParam("saved"); id != "" {
		if cb, err := h.Combos.Get(ctx, id); err == nil {
			vm.Saved = cb.Name
		}
	}
	return h.page(c, http.StatusOK, combosTitle, combosHref, views.CombosPage(vm))
}

// builder renders the builder: the form alone for htmx, the page otherwise.
func (h *Combos) builder(c echo.Context, status int, vm views.ComboBuilderVM, formOnly bool) error {
	ctx := c.Request().Context()
	conns, err := h.Conns.List(ctx, services.ConnectionFilter{})
	if err != nil {
		return err
	}
	combos, err := h.Combos.List(ctx)
	if err != nil {
		return err
	}
	vm.Fill(services.Strategies(), h.Conns.Catalogue().All(), conns, combos)
	title := "New combo"
	if vm.Edit {
		title = "Edit combo " + vm.Name
	}
	page := views.ComboBuilderPage(vm)
	frag := page
	if formOnly {
		frag = views.ComboBuilder(vm)
	}
	return h.pageParts(c, status, title, combosHref, frag, page)
}

// New shows an empty builder.
func (h *Combos) New(c echo.Context) error {
	return h.builder(c, http.StatusOK, views.NewComboBuilderVM(), false)
}

// Edit shows the builder filled from a stored combo (Combos.Get, twin GET /api/combos/{id}).
func (h *Combos) Edit(c echo.Context) error {
	cb, err := h.Combos.Get(c.Request().Context(), c.Param("id"))
	if err != nil {
		return err
	}
	return h.builder(c, http.StatusOK, views.EditComboBuilderVM(cb), false)
}

// Builder re-renders the builder after an edit (op); nothing is saved.
func (h *Combos) Builder(c echo.Context) error {
	v := form(c)
	vm := comboBuilderForm(v)
	vm.Apply(v.Get("op"))
	return h.builder(c, http.StatusOK, vm, true)
}

// Create saves a new combo (Combos.Create, twin POST /api/combos).
func (h *Combos) Create(c echo.Context) error {
	vm := comboBuilderForm(form(c))
	vm.ID, vm.Edit = "", false
	cb, warnings, err := h.Combos.Create(c.Request().Context(), comboInput(vm))
	return h.comboSaved(c, vm, cb, warnings, err)
}

// Update replaces a combo (Combos.Replace, twin PUT /api/combos/{id}).
func (h *Combos) Update(c echo.Context) error {
	vm := comboBuilderForm(form(c))
	vm.ID, vm.Edit = c.Param("id"), true
	cb, warnings, err := h.Combos.Replace(c.Request().Context(), vm.ID, comboInput(vm))
	return h.comboSaved(c, vm, cb, warnings, err)
}

// comboSaved re-renders the builder with 422 on validation errors, else
// redirects to the list with combos-changed and a toast (warnings included).
func (h *Combos) comboSaved(c echo.Context, vm views.ComboBuilderVM, cb services.Combo, warnings []string, err error) error {
	if verr, ok := validation(err); ok {
		vm.Errors = views.NewFieldErrors(verr.Fields, nil)
		return h.builder(c, http.StatusUnprocessableEntity, vm, true)
	}
	if err != nil {
		return err
	}
	NoteAudit(c, "", cb.ID)
	trigger(c, views.EventCombosChanged, nil)
	text, level := "Combo "+cb.Name+" saved.", "success"
	for _, w := range warnings {
		text, level = text+" "+views.ComboWarningText(w), "warning"
	}
	toast(c, level, text)
	return redirect(c, combosHref+"?saved="+cb.ID)
}

// Enabled switches a combo on or off and answers with its row
// (Combos.SetEnabled, twin PATCH /api/combos/{id}).
func (h *Combos) Enabled(c echo.Context) error {
	ctx := c.Request().Context()
	on := checked(form(c), "enabled")
	cb, err := h.Combos.SetEnabled(ctx, c.Param("id"), on)
	if err != nil {
		return err
	}
	trigger(c, views.EventCombosChanged, nil)
	word := "disabled"
	if on {
		word = "enabled"
	}
	toast(c, "success", "Combo "+cb.Name+" "+word+".")
	list, err := h.combosList(ctx, "")
	if err != nil {
		return err
	}
	for _, r := range list.Rows {
		if r.ID == cb.ID {
			return h.pageParts(c, http.StatusOK, combosTitle, combosHref, views.ComboRow(r), views.CombosPage(views.CombosPageVM{List: list}))
		}
	}
	return services.ErrNotFound
}

// Reorder stores a new order (Combos.Reorder, twin POST /api/combos/reorder)
// and answers with the list, focus kept on the button that moved the row.
func (h *Combos) Reorder(c echo.Context) error {
	v := form(c)
	err := h.Combos.Reorder(c.Request().Context(), idList(v))
	if _, ok := validation(err); ok {
		// The order posted was stale (a combo was added or removed meanwhile):
		// show the current list again.
		toast(c, "error", "The combo list changed meanwhile; this is the current order.")
		list, err := h.combosList(c.Request().Context(), "")
		if err != nil {
			return err
		}
		return h.pageParts(c, http.StatusUnprocessableEntity, combosTitle, combosHref, views.CombosList(list), views.CombosPage(views.CombosPageVM{List: list}))
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
	return afterMutation(c, combosHref, func() error { return h.renderCombosList(c, focus) })
}

// Duplicate copies a combo as "<name>-copy", disabled (Combos.Duplicate).
func (h *Combos) Duplicate(c echo.Context) error {
	cb, err := h.Combos.Duplicate(c.Request().Context(), c.Param("id"))
	if err != nil {
		return err
	}
	NoteAudit(c, "combo.duplicate", cb.ID)
	trigger(c, views.EventCombosChanged, nil)
	toast(c, "success", "Combo duplicated as "+cb.Name+" (disabled).")
	return afterMutation(c, combosHref, func() error { return h.renderCombosList(c, "") })
}

// ConfirmDelete shows what deleting a combo touches.
func (h *Combos) ConfirmDelete(c echo.Context) error {
	ctx := c.Request().Context()
	cb, err := h.Combos.Get(ctx, c.Param("id"))
	if err != nil {
		return err
	}
	refs, err := h.Combos.ReferencedBy(ctx, cb.ID)
	if err != nil {
		return err
	}
	keys, err := h.Keys.List(ctx, "")
	if err != nil {
		return err
	}
	cf := views.ComboDeleteConfirm(cb, refs, keys)
	list, err := h.combosList(ctx, "")
	if err != nil {
		return err
	}
	return h.pageParts(c, http.StatusOK, combosTitle, combosHref, views.ConfirmPanel(*cf),
		views.CombosPage(views.CombosPageVM{List: list.WithConfirm(cf)}))
}

// Delete removes a combo (Combos.Delete, twin DELETE /api/combos/{id});
// force=1, sent by the confirmation when other combos refer to it, also
// removes those references.
func (h *Combos) Delete(c echo.Context) error {
	ctx := c.Request().Context()
	cb, err := h.Combos.Get(ctx, c.Param("id"))
	if err != nil {
		return err
	}
	if err := h.Combos.Delete(ctx, cb.ID, form(c).Get("force") == "1"); err != nil {
		return err
	}
	trigger(c, views.EventCombosChanged, nil)
	toast(c, "success", "Combo "+cb.Name+" deleted.")
	return afterMutation(c, combosHref, func() error { return h.renderCombosList(c, "") })
}

// Live parts of the Combos page (50-dashboard §6.5): the readiness dot of
// every target, the routing preview and the Test button.

// readinessDepth bounds how deep the dots follow combo references (the
// default maxComboDepth of 30-routing §3).
const readinessDepth = 3

// comboReadiness says, for every target of every combo (in target order),
// whether routing could use it right now. It reads the resilience engine,
// the state the Runtime page shows: the provider's breaker and window gate,
// then per enabled connection its terminal state, model lockout and
// cooldown (Engine.ConnectionBlocker, the check routing runs) and the quota
// gate (gate 10 of 30-routing §5: a used-up quota window counts as cooling
// until its reset).
func (h *Combos) comboReadiness(combos []services.Combo, conns []services.Connection) map[string][]views.ReadinessVM {
	if h.Gates == nil {
		return nil
	}
	r := readiness{gates: h.Gates, quota: h.Dispatch, now: h.Clock.Now(), byProvider: map[string][]services.Connection{}, byID: map[string]services.Connection{},
		combos: map[string]services.Combo{}}
	for _, cn := range conns {
		r.byProvider[cn.Provider] = append(r.byProvider[cn.Provider], cn)
		r.byID[cn.ID] = cn
	}
	for _, cb := range combos {
		r.combos[cb.ID] = cb
	}
	out := make(map[string][]views.ReadinessVM, len(combos))
	for _, cb := range combos {
		list := make([]views.ReadinessVM, len(cb.Targets))
		for i, t := range cb.Targets {
			list[i] = r.target(t, 0, map[string]bool{cb.ID: true})
		}
		out[cb.ID] = list
	}
	return out
}

// ReadinessGates are the gates routing runs, as the readiness dots read
// them (resilience.Engine).
type ReadinessGates interface {
	Breaker(provider string) resilience.BreakerStatus
	WindowGateHold(provider, connectionID string) resilience.GateHold
	ConnectionBlocker(provider, connectionID, model string) *resilience.Blocker
}

type readiness struct {
	gates      ReadinessGates
	quota      DispatchView // nil = no quota gate
	now        time.Time
	byProvider map[string][]services.Connection
	byID       map[string]services.Connection
	combos     map[string]services.Combo
}

func (r readiness) retryIn(d time.Duration) *views.CountdownVM {
	if d <= 0 {
		return nil
	}
	return views.NewCountdownVM(r.now.Add(d), r.now)
}

func (r readiness) target(t services.Target, depth int, path map[string]bool) views.ReadinessVM {
	unavailable := func(text string) views.ReadinessVM {
		return views.ReadinessVM{State: views.UnavailableState, Text: text}
	}
	if !t.IsEnabled() {
		return views.ReadinessVM{State: views.DisabledState, Text: "switched off"}
	}
	if t.Kind == services.KindCombo {
		return r.comboRef(t.ComboID, depth, path)
	}
	if b := r.gates.Breaker(t.Provider); b.State == resilience.BreakerOpen {
		return views.ReadinessVM{State: views.UnavailableState, Text: "breaker open", RetryIn: r.retryIn(time.Duration(b.RetryAfterMs) * time.Millisecond)}
	}
	pin := ""
	if t.ConnectionID != nil {
		pin = *t.ConnectionID
		cn, ok := r.byID[pin]
		switch {
		case !ok:
			return unavailable("connection missing")
		case !cn.Enabled:
			return unavailable("connection disabled")
		}
	}
	if hold := r.gates.WindowGateHold(t.Provider, pin); hold.Blocked {
		return views.ReadinessVM{State: views.CoolingState, Text: "provider cooling down", RetryIn: r.retryIn(hold.RetryAfter)}
	}
	var enabled, cooling, quota, locked, terminal int
	var soonest time.Duration
	for _, cn := range r.byProvider[t.Provider] {
		if (pin != "" && cn.ID != pin) || !cn.Enabled {
			continue
		}
		enabled++
		b := r.gates.ConnectionBlocker(t.Provider, cn.ID, t.Model)
		if b == nil && r.quota != nil {
			b = r.quota.QuotaBlocker(&cn) // gate 10, after terminal, lockout and cooldown
		}
		if b == nil {
			return views.ReadinessVM{State: views.ReadyState, Text: "ready"}
		}
		switch b.Reason {
		case "model_lockout":
			locked++
		case "cooling":
			cooling++
		case "quota_window":
			// A used-up quota window ends at its reset: the connection
			// counts as cooling until then.
			cooling++
			quota++
		default:
			terminal++
		}
		if b.RetryAfter > 0 && (soonest == 0 || b.RetryAfter < soonest) {
			soonest = b.RetryAfter
		}
	}
	switch {
	case enabled == 0:
		return unavailable("no enabled connection")
	case terminal == enabled:
		return unavailable("every connection terminal")
	case locked == enabled:
		return views.ReadinessVM{State: views.CoolingState, Text: "model locked", RetryIn: r.retryIn(soonest)}
	case cooling == enabled && quota == enabled:
		return views.ReadinessVM{State: views.CoolingState, Text: "all connections cooling (quota window used up)", RetryIn: r.retryIn(soonest)}
	case cooling == enabled:
		return views.ReadinessVM{State: views.CoolingState, Text: "all connections cooling", RetryIn: r.retryIn(soonest)}
	}
	return views.ReadinessVM{State: views.CoolingState, Text: "connections cooling or locked", RetryIn: r.retryIn(soonest)}
}

// comboRef is ready when the referenced combo is enabled and one of its
// targets is; else the best state among them.
func (r readiness) comboRef(id string, depth int, path map[string]bool) views.ReadinessVM {
	cb, ok := r.combos[id]
	switch {
	case !ok:
		return views.ReadinessVM{State: views.UnavailableState, Text: "combo missing"}
	case !cb.Enabled:
		return views.ReadinessVM{State: views.UnavailableState, Text: "combo disabled"}
	case path[id] || depth >= readinessDepth:
		return views.ReadinessVM{State: views.UnavailableState, Text: "nested too deep"}
	}
	path[id] = true
	defer delete(path, id)
	best := views.ReadinessVM{State: views.UnavailableState, Text: "no target of " + cb.Name + " ready"}
	for _, t := range cb.Targets {
		switch rd := r.target(t, depth+1, path); rd.State {
		case views.ReadyState:
			return views.ReadinessVM{State: views.ReadyState, Text: "ready"}
		case views.CoolingState:
			best = views.ReadinessVM{State: views.CoolingState, Text: "targets of " + cb.Name + " cooling", RetryIn: rd.RetryIn}
		}
	}
	return best
}

// Readiness answers the 10-s poll of the Combos page with every row's
// targets cell out of band. Without htmx it is the Combos page.
func (h *Combos) Readiness(c echo.Context) error {
	if !isHTMX(c.Request()) {
		return h.List(c)
	}
	list, err := h.combosList(c.Request().Context(), "")
	if err != nil {
		return err
	}
	return render(c, http.StatusOK, views.CombosReadiness(list), nil)
}

// comboPanel answers with a panel for the slot under a combo row (htmx), or
// the Combos page with that panel open.
func (h *Combos) comboPanel(c echo.Context, panel views.ComboPanelVM) error {
	frag := views.ComboPanel(panel)
	if isHTMX(c.Request()) {
		return render(c, http.StatusOK, frag, nil)
	}
	list, err := h.combosList(c.Request().Context(), "")
	if err != nil {
		return err
	}
	list.Panel = &panel
	return h.pageParts(c, http.StatusOK, combosTitle, combosHref, frag, views.CombosPage(views.CombosPageVM{List: list}))
}

// Preview shows the order the combo's strategy would use right now,
// with each target's eligibility and skip reason (Router.Explain, twin
// GET /api/combos/{id}/explain). Nothing is sent.
func (h *Combos) Preview(c echo.Context) error {
	ctx := c.Request().Context()
	cb, err := h.Combos.Get(ctx, c.Param("id"))
	if err != nil {
		return err
	}
	strategy, sample, targets := h.Explainer.Explain(&cb)
	names, err := connectionNames(ctx, h.Conns)
	if err != nil {
		return err
	}
	vm := views.NewComboPreviewVM(cb, strategy, sample, targets, names, h.Clock.Now())
	return h.comboPanel(c, views.ComboPanelVM{ComboID: cb.ID, Preview: &vm})
}

// Test sends one small real request to each target in order and shows
// the results under the row (twin POST /api/combos/{id}/test); force=1
// includes the targets the resilience gates hold back.
func (h *Combos) Test(c echo.Context) error {
	force := checked(form(c), "force")
	cb, results, err := runComboTest(c.Request().Context(), h.Combos, h.Tester, c.Param("id"), force)
	if err != nil {
		return err
	}
	vm := views.NewComboTestVM(cb, results, force, h.Clock.Now())
	return h.comboPanel(c, views.ComboPanelVM{ComboID: cb.ID, Test: &vm})
}

// comboScanPages bounds how much of the request log one render of the
// combos' last-hour traffic reads (pages of services.MaxRequestLogLimit
// entries, newest first).
const comboScanPages = 10

// recentRequests reads the request log from since to now, newest first, at
// most comboScanPages pages; truncated says older entries of the window
// were left unread.
func recentRequests(ctx context.Context, logs services.RequestLogStore, since time.Time) ([]services.RequestLogEntry, bool, error) {
	q := services.RequestLogQuery{Since: since, Limit: services.MaxRequestLogLimit}
	var out []services.RequestLogEntry
	for range comboScanPages {
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
