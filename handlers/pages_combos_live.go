package handlers

import (
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"switchyard/services"
	"switchyard/services/resilience"
	"switchyard/views"
)

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
func (d *Dashboard) comboReadiness(combos []services.Combo, conns []services.Connection) map[string][]views.ReadinessVM {
	if d.Engine == nil {
		return nil
	}
	r := readiness{d: d, now: d.Clock.Now(), byProvider: map[string][]services.Connection{}, byID: map[string]services.Connection{},
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

type readiness struct {
	d          *Dashboard
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
	engine := r.d.Engine
	if b := engine.Breakers.Status(t.Provider); b.State == resilience.BreakerOpen {
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
	if blocked, ra := engine.Gate.Blocked(t.Provider, pin); blocked {
		return views.ReadinessVM{State: views.CoolingState, Text: "provider cooling down", RetryIn: r.retryIn(ra)}
	}
	var enabled, cooling, quota, locked, terminal int
	var soonest time.Duration
	for _, cn := range r.byProvider[t.Provider] {
		if (pin != "" && cn.ID != pin) || !cn.Enabled {
			continue
		}
		enabled++
		b := engine.ConnectionBlocker(t.Provider, cn.ID, t.Model)
		if b == nil && r.d.Dispatch != nil {
			b = r.d.Dispatch.QuotaBlocker(&cn) // gate 10, after terminal, lockout and cooldown
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

// CombosReadiness answers the 10-s poll of the Combos page with every row's
// targets cell out of band. Without htmx it is the Combos page.
func (d *Dashboard) CombosReadiness(c echo.Context) error {
	if !isHTMX(c.Request()) {
		return d.CombosPage(c)
	}
	list, err := d.combosList(c.Request().Context(), "")
	if err != nil {
		return err
	}
	return render(c, http.StatusOK, views.CombosReadiness(list), nil)
}

// comboPanel answers with a panel for the slot under a combo row (htmx), or
// the Combos page with that panel open.
func (d *Dashboard) comboPanel(c echo.Context, panel views.ComboPanelVM) error {
	frag := views.ComboPanel(panel)
	if isHTMX(c.Request()) {
		return render(c, http.StatusOK, frag, nil)
	}
	list, err := d.combosList(c.Request().Context(), "")
	if err != nil {
		return err
	}
	list.Panel = &panel
	return d.pageParts(c, http.StatusOK, combosTitle, combosHref, frag, views.CombosPage(views.CombosPageVM{List: list}))
}

// ComboPreview shows the order the combo's strategy would use right now,
// with each target's eligibility and skip reason (Router.Explain, twin
// GET /api/combos/{id}/explain). Nothing is sent.
func (p *Probes) ComboPreview(c echo.Context) error {
	ctx := c.Request().Context()
	cb, err := p.Combos.Get(ctx, c.Param("id"))
	if err != nil {
		return err
	}
	strategy, sample, targets := p.Explainer.Explain(&cb)
	_, names, err := p.connectionNames(ctx)
	if err != nil {
		return err
	}
	vm := views.NewComboPreviewVM(cb, strategy, sample, targets, names, p.Clock.Now())
	return p.comboPanel(c, views.ComboPanelVM{ComboID: cb.ID, Preview: &vm})
}

// ComboTest sends one small real request to each target in order and shows
// the results under the row (twin POST /api/combos/{id}/test); force=1
// includes the targets the resilience gates hold back.
func (p *Probes) ComboTest(c echo.Context) error {
	force := checked(form(c), "force")
	cb, results, err := runComboTest(c.Request().Context(), p.Combos, p.ComboTester, c.Param("id"), force)
	if err != nil {
		return err
	}
	vm := views.NewComboTestVM(cb, results, force, p.Clock.Now())
	return p.comboPanel(c, views.ComboPanelVM{ComboID: cb.ID, Test: &vm})
}
