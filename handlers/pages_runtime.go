package handlers

import (
	"context"
	"errors"
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"switchyard/services"
	"switchyard/services/leases"
	"switchyard/services/resilience"
	"switchyard/services/traffic"
	"switchyard/views"
)

// Runtime page (50-dashboard §6.8) and the incident badge (§2). Each panel is
// its own fragment, polled every 5 s and on resilience-changed. Every action
// calls the same engine method as its /api twin (handlers/api_resilience.go)
// and announces resilience-changed with a toast.

const runtimeTitle, runtimeHref = "Runtime", "/runtime"

// providerNames maps catalogue ids to display names.
func (d *Dashboard) providerNames() map[string]string {
	out := map[string]string{}
	for _, p := range d.providers() {
		out[p.ID] = p.Name
	}
	return out
}

// connectionNames lists the connections and maps their ids to names.
func (d *Dashboard) connectionNames(ctx context.Context) ([]services.Connection, map[string]string, error) {
	conns, err := d.Conns.List(ctx, services.ConnectionFilter{})
	if err != nil {
		return nil, nil, err
	}
	names := make(map[string]string, len(conns))
	for _, cn := range conns {
		names[cn.ID] = cn.Name
	}
	return conns, names, nil
}

// resilienceCounts counts cooling and terminal connections (enabled ones:
// a switched-off connection is out of rotation anyway) from the live state.
func (d *Dashboard) resilienceCounts(conns []services.Connection) (cooling, terminal int) {
	now := d.Clock.Now()
	for _, cn := range conns {
		if !cn.Enabled {
			continue
		}
		st := d.liveState(cn)
		switch {
		case st.TerminalStatus != "":
			terminal++
		case st.RateLimitedUntil != nil && st.RateLimitedUntil.After(now):
			cooling++
		}
	}
	return cooling, terminal
}

func (d *Dashboard) runtimeSummary(ctx context.Context) (views.RuntimeSummaryVM, error) {
	conns, err := d.Conns.List(ctx, services.ConnectionFilter{})
	if err != nil {
		return views.RuntimeSummaryVM{}, err
	}
	vm := views.RuntimeSummaryVM{Locked: d.Engine.Lockouts.Count()}
	vm.Cooling, vm.Terminal = d.resilienceCounts(conns)
	vm.OpenBreakers = views.OpenBreakers(d.Engine.Breakers.All())
	for _, g := range d.Engine.Gate.Entries() {
		if g.RetryAfterMs > 0 {
			vm.WindowGate++
		}
	}
	return vm, nil
}

func (d *Dashboard) breakersPanel(ctx context.Context) (views.BreakersPanelVM, error) {
	_, names, err := d.connectionNames(ctx)
	if err != nil {
		return views.BreakersPanelVM{}, err
	}
	gateOn := d.Settings != nil && d.Settings.WindowGateConfig().Enabled
	return views.NewBreakersPanelVM(BreakerStatuses(d.Engine), d.Engine.Gate.Entries(), gateOn,
		d.providerNames(), names, d.Clock.Now()), nil
}

func (d *Dashboard) cooldownsPanel(ctx context.Context) (views.CooldownsPanelVM, error) {
	conns, err := d.Conns.List(ctx, services.ConnectionFilter{})
	if err != nil {
		return views.CooldownsPanelVM{}, err
	}
	names := d.providerNames()
	list := make([]views.CooldownConn, len(conns))
	for i, cn := range conns {
		list[i] = views.CooldownConn{Conn: cn, State: d.liveState(cn), Provider: orDefault(names[cn.Provider], cn.Provider),
			BackoffMax: d.backoffMax(cn.AuthClass)}
	}
	return views.NewCooldownsPanelVM(list, d.Clock.Now()), nil
}

func (d *Dashboard) modelCooldowns(ctx context.Context) (views.ModelCooldownsVM, error) {
	_, names, err := d.connectionNames(ctx)
	if err != nil {
		return views.ModelCooldownsVM{}, err
	}
	return views.NewModelCooldownsVM(d.Engine.Lockouts.Enabled(), d.Engine.Lockouts.List(resilience.LockFilter{}),
		d.providerNames(), names, d.Clock.Now()), nil
}

// activeLeases are the live leases (GET /api/resilience/leases reads the same).
func (d *Dashboard) activeLeases() []leases.Lease {
	if d.Leases == nil {
		return nil
	}
	return d.Leases.Active()
}

// activeLease finds a live lease by id.
func (d *Dashboard) activeLease(id string) (leases.Lease, bool) {
	for _, l := range d.activeLeases() {
		if l.ID == id {
			return l, true
		}
	}
	return leases.Lease{}, false
}

// leaseKeys loads the keys of the given leases; a deleted key is left out.
func (d *Dashboard) leaseKeys(ctx context.Context, ls []leases.Lease) (map[string]services.APIKey, error) {
	keys := map[string]services.APIKey{}
	for _, l := range ls {
		if _, ok := keys[l.KeyID]; ok {
			continue
		}
		k, err := d.Keys.Get(ctx, l.KeyID)
		switch {
		case errors.Is(err, services.ErrNotFound):
			continue
		case err != nil:
			return nil, err
		}
		keys[l.KeyID] = k
	}
	return keys, nil
}

func (d *Dashboard) leasesPanel(ctx context.Context) (views.LeasesPanelVM, error) {
	active := d.activeLeases()
	if len(active) == 0 {
		return views.LeasesPanelVM{}, nil
	}
	_, names, err := d.connectionNames(ctx)
	if err != nil {
		return views.LeasesPanelVM{}, err
	}
	keys, err := d.leaseKeys(ctx, active)
	if err != nil {
		return views.LeasesPanelVM{}, err
	}
	return views.NewLeasesPanelVM(active, keys, d.providerNames(), names, d.Clock.Now()), nil
}

// queueProtected reports whether a connection's dispatches go through the
// request queue: its own switch, else requestQueue.autoEnableApiKeyProviders
// for API-key connections (as the gateway and GET /api/concurrency decide).
func (d *Dashboard) queueProtected(c services.Connection) bool {
	if c.RateLimitProtection != nil {
		return *c.RateLimitProtection
	}
	return d.Settings != nil && d.Settings.Resilience().RequestQueue.AutoEnableApiKeyProviders && c.AuthClass == services.AuthAPIKey
}

// slotStats are the slot gates by connection id (Slots.Stats, as GET /api/concurrency).
func (d *Dashboard) slotStats() map[string]traffic.SlotStats {
	out := map[string]traffic.SlotStats{}
	if d.Slots == nil {
		return out
	}
	for _, st := range d.Slots.Stats() {
		out[st.ConnectionID] = st
	}
	return out
}

func (d *Dashboard) queuesPanel(ctx context.Context) (views.QueuesPanelVM, error) {
	conns, err := d.Conns.List(ctx, services.ConnectionFilter{})
	if err != nil {
		return views.QueuesPanelVM{}, err
	}
	byConn := map[string][]traffic.QueueStats{}
	if d.Queues != nil {
		for _, q := range d.Queues.Stats() {
			byConn[q.ConnectionID] = append(byConn[q.ConnectionID], q)
		}
	}
	slots := d.slotStats()
	names := d.providerNames()
	var qs []views.QueueConn
	var ss []views.SlotConn
	for _, cn := range conns {
		provider := orDefault(names[cn.Provider], cn.Provider)
		if d.queueProtected(cn) {
			q := views.QueueConn{Conn: cn, Provider: provider, Stats: byConn[cn.ID]}
			if d.Queues != nil {
				q.Effective = d.Queues.Effective(cn.RateLimitOverrides)
			} else {
				q.Effective = traffic.DefaultQueueConfig().WithOverrides(cn.RateLimitOverrides)
			}
			qs = append(qs, q)
		}
		if cn.MaxConcurrent != nil && *cn.MaxConcurrent > 0 {
			s := views.SlotConn{Conn: cn, Provider: provider}
			if st, ok := slots[cn.ID]; ok {
				s.Stats = &st
			}
			ss = append(ss, s)
		}
	}
	slotsOn := d.Settings == nil || d.Settings.Resilience().ConnectionConcurrency.Enabled
	return views.NewQueuesPanelVM(qs, ss, slotsOn, d.Clock.Now()), nil
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// runtimeVM builds the whole page.
func (d *Dashboard) runtimeVM(ctx context.Context) (views.RuntimePageVM, error) {
	var vm views.RuntimePageVM
	var err error
	if vm.Summary, err = d.runtimeSummary(ctx); err != nil {
		return vm, err
	}
	if vm.Breakers, err = d.breakersPanel(ctx); err != nil {
		return vm, err
	}
	if vm.Cooldowns, err = d.cooldownsPanel(ctx); err != nil {
		return vm, err
	}
	if vm.Models, err = d.modelCooldowns(ctx); err != nil {
		return vm, err
	}
	if vm.Leases, err = d.leasesPanel(ctx); err != nil {
		return vm, err
	}
	vm.Queues, err = d.queuesPanel(ctx)
	return vm, err
}

// runtimeParts renders fragment for htmx and the whole Runtime page (with
// open, when set, adjusting it: an open confirmation) for everything else.
func (d *Dashboard) runtimeParts(c echo.Context, fragment templComponent, open func(*views.RuntimePageVM)) error {
	if isHTMX(c.Request()) {
		return render(c, http.StatusOK, fragment, nil)
	}
	vm, err := d.runtimeVM(c.Request().Context())
	if err != nil {
		return err
	}
	if open != nil {
		open(&vm)
	}
	return d.page(c, http.StatusOK, runtimeTitle, runtimeHref, views.RuntimePage(vm))
}

// RuntimePage shows every panel.
func (d *Dashboard) RuntimePage(c echo.Context) error {
	vm, err := d.runtimeVM(c.Request().Context())
	if err != nil {
		return err
	}
	return d.page(c, http.StatusOK, runtimeTitle, runtimeHref, views.RuntimePage(vm))
}

// RuntimeSummary is the polled KPI strip.
func (d *Dashboard) RuntimeSummary(c echo.Context) error {
	vm, err := d.runtimeSummary(c.Request().Context())
	if err != nil {
		return err
	}
	return d.runtimeParts(c, views.RuntimeSummary(vm), nil)
}

// RuntimeBreakers is the polled provider breakers panel.
func (d *Dashboard) RuntimeBreakers(c echo.Context) error {
	vm, err := d.breakersPanel(c.Request().Context())
	if err != nil {
		return err
	}
	return d.runtimeParts(c, views.BreakersPanel(vm), nil)
}

// RuntimeCooldowns is the polled connection cooldowns panel.
func (d *Dashboard) RuntimeCooldowns(c echo.Context) error {
	vm, err := d.cooldownsPanel(c.Request().Context())
	if err != nil {
		return err
	}
	return d.runtimeParts(c, views.CooldownsPanel(vm), nil)
}

// RuntimeModelCooldowns is the polled Model Cooldowns card.
func (d *Dashboard) RuntimeModelCooldowns(c echo.Context) error {
	vm, err := d.modelCooldowns(c.Request().Context())
	if err != nil {
		return err
	}
	return d.runtimeParts(c, views.ModelCooldownsCard(vm), nil)
}

// RuntimeLeases is the polled active leases panel.
func (d *Dashboard) RuntimeLeases(c echo.Context) error {
	vm, err := d.leasesPanel(c.Request().Context())
	if err != nil {
		return err
	}
	return d.runtimeParts(c, views.LeasesPanel(vm), nil)
}

// RuntimeQueues is the polled, read-only queues and slots panel (the data
// of GET /api/concurrency).
func (d *Dashboard) RuntimeQueues(c echo.Context) error {
	vm, err := d.queuesPanel(c.Request().Context())
	if err != nil {
		return err
	}
	return d.runtimeParts(c, views.QueuesPanel(vm), nil)
}

// renderBreakersPanel answers an action of the breakers panel; slot, when
// set, is the confirmation slot to empty.
func (d *Dashboard) renderBreakersPanel(c echo.Context, slot string) error {
	vm, err := d.breakersPanel(c.Request().Context())
	if err != nil {
		return err
	}
	return renderPanel(c, views.BreakersPanel(vm), slot)
}

func (d *Dashboard) renderCooldownsPanel(c echo.Context, slot string) error {
	vm, err := d.cooldownsPanel(c.Request().Context())
	if err != nil {
		return err
	}
	return renderPanel(c, views.CooldownsPanel(vm), slot)
}

func (d *Dashboard) renderModelCooldowns(c echo.Context, slot string) error {
	vm, err := d.modelCooldowns(c.Request().Context())
	if err != nil {
		return err
	}
	return renderPanel(c, views.ModelCooldownsCard(vm), slot)
}

func renderPanel(c echo.Context, panel templComponent, slot string) error {
	if slot != "" {
		panel = views.RuntimePanelAfterConfirm(panel, slot)
	}
	return render(c, http.StatusOK, panel, nil)
}

// BreakerReset closes one provider's breaker at once (non-destructive; twin
// POST /api/resilience/breakers/{provider}/reset).
func (d *Dashboard) BreakerReset(c echo.Context) error {
	p, ok := d.Conns.Catalogue().Get(c.Param("provider"))
	if !ok {
		return services.ErrNotFound
	}
	if err := d.Engine.Breakers.Reset(c.Request().Context(), p.ID); err != nil {
		return err
	}
	trigger(c, views.EventResilienceChanged, nil)
	toast(c, "success", "Breaker of "+p.Name+" reset to closed.")
	return afterMutation(c, runtimeHref, func() error { return d.renderBreakersPanel(c, "") })
}

func breakersConfirm(n int) *views.ConfirmVM {
	return views.RuntimeConfirm(views.BreakersPanelID, "Reset all breakers?", "Reset all breakers",
		"/runtime/breakers/reset", views.BreakersPanelID,
		"Every provider breaker closes with its failure count set to zero ("+views.Plural(n, "breaker holds", "breakers hold")+" state now).",
		"Requests go to providers whose breaker was open at once, even if they are still failing.")
}

// BreakersConfirmReset asks before resetting every breaker.
func (d *Dashboard) BreakersConfirmReset(c echo.Context) error {
	cf := breakersConfirm(len(d.Engine.Breakers.All()))
	return d.runtimeParts(c, views.ConfirmBox(*cf), func(vm *views.RuntimePageVM) { vm.Breakers.Confirm = cf })
}

// BreakersResetAll closes every breaker (twin POST /api/resilience/breakers/reset).
func (d *Dashboard) BreakersResetAll(c echo.Context) error {
	n, err := d.Engine.Breakers.ResetAll(c.Request().Context())
	if err != nil {
		return err
	}
	trigger(c, views.EventResilienceChanged, nil)
	toast(c, "success", "Reset "+views.Plural(n, "breaker", "breakers")+".")
	return afterMutation(c, runtimeHref, func() error { return d.renderBreakersPanel(c, views.BreakersConfirmID) })
}

// WindowGateClear drops every window-gate entry (twin POST
// /api/resilience/reset with {"include": ["windowGate"]}).
func (d *Dashboard) WindowGateClear(c echo.Context) error {
	n := d.Engine.Gate.Clear()
	trigger(c, views.EventResilienceChanged, nil)
	toast(c, "success", "Cleared "+views.Plural(n, "window-gate entry", "window-gate entries")+".")
	return afterMutation(c, runtimeHref, func() error { return d.renderBreakersPanel(c, "") })
}

// CooldownsConfirmClear asks before clearing every cooldown.
func (d *Dashboard) CooldownsConfirmClear(c echo.Context) error {
	conns, err := d.Conns.List(c.Request().Context(), services.ConnectionFilter{})
	if err != nil {
		return err
	}
	cooling, terminal := 0, 0
	now := d.Clock.Now()
	for _, cn := range conns {
		st := d.liveState(cn)
		switch {
		case st.TerminalStatus != "":
			terminal++
		case st.RateLimitedUntil != nil && st.RateLimitedUntil.After(now):
			cooling++
		}
	}
	lines := []string{views.Plural(cooling, "cooling connection returns", "cooling connections return") +
		" to rotation at once; backoff levels, failure counters and model lockouts of every non-terminal connection are cleared too."}
	switch {
	case terminal == 1:
		lines = append(lines, "1 terminal connection is left as it is; reset its state on its own.")
	case terminal > 1:
		lines = append(lines, strconv.Itoa(terminal)+" terminal connections are left as they are; reset their state one by one.")
	}
	cf := views.RuntimeConfirm(views.CooldownsPanelID, "Clear all cooldowns?", "Clear all cooldowns",
		"/runtime/cooldowns/clear", views.CooldownsPanelID, lines...)
	return d.runtimeParts(c, views.ConfirmBox(*cf), func(vm *views.RuntimePageVM) { vm.Cooldowns.Confirm = cf })
}

// CooldownsClear clears every cooldown, skipping terminal connections (twin
// POST /api/resilience/cooldowns with {"all": true}); the toast reports the counts.
func (d *Dashboard) CooldownsClear(c echo.Context) error {
	ctx := c.Request().Context()
	conns, err := d.Conns.List(ctx, services.ConnectionFilter{})
	if err != nil {
		return err
	}
	res, _, err := d.clearCooldowns(ctx, conns)
	if err != nil {
		return err
	}
	trigger(c, views.EventResilienceChanged, nil)
	text := "Cleared " + views.Plural(len(res.Cleared), "cooldown", "cooldowns") + "."
	switch n := len(res.SkippedTerminal); n {
	case 0:
	case 1:
		text += " 1 terminal connection left as it is."
	default:
		text += " " + strconv.Itoa(n) + " terminal connections left as they are."
	}
	toast(c, "success", text)
	return afterMutation(c, runtimeHref, func() error { return d.renderCooldownsPanel(c, views.CooldownsConfirmID) })
}

// ModelReEnable clears the lockouts of one model on one connection, every
// key shape (twin DELETE /api/resilience/model-cooldowns). The row or list
// item that asked is removed (empty answer).
func (d *Dashboard) ModelReEnable(c echo.Context) error {
	ctx := c.Request().Context()
	v := form(c)
	provider, connID, model := v.Get("provider"), v.Get("connectionId"), v.Get("model")
	if provider == "" || model == "" {
		return services.Invalid("model", "Name the provider and the model to re-enable.")
	}
	if _, ok := d.Conns.Catalogue().Get(provider); !ok {
		return services.ErrNotFound
	}
	where := "every connection of " + provider
	if connID != "" {
		conn, err := d.Conns.Get(ctx, connID)
		if err != nil {
			return err
		}
		where = conn.Name
	}
	n, err := d.Engine.Lockouts.Clear(ctx, resilience.LockFilter{Provider: provider, ConnectionID: connID, Model: model})
	if err != nil {
		return err
	}
	trigger(c, views.EventResilienceChanged, nil)
	if n == 0 {
		toast(c, "info", model+" on "+where+" was not locked any more.")
	} else {
		toast(c, "success", "Re-enabled "+model+" on "+where+".")
	}
	return afterMutation(c, runtimeHref, func() error { return empty(c) })
}

// ModelCooldownsConfirmClear asks before clearing every model lockout.
func (d *Dashboard) ModelCooldownsConfirmClear(c echo.Context) error {
	n := d.Engine.Lockouts.Count()
	cf := views.RuntimeConfirm(views.ModelCooldownsCardID, "Clear all model lockouts?", "Clear all",
		"/runtime/model-cooldowns/clear", views.ModelCooldownsCardID,
		views.Plural(n, "locked model returns", "locked models return")+" to rotation at once, and the escalation memory of every lockout is forgotten.")
	return d.runtimeParts(c, views.ConfirmBox(*cf), func(vm *views.RuntimePageVM) { vm.Models.Confirm = cf })
}

// ModelCooldownsClear clears every model lockout (twin DELETE
// /api/resilience/model-cooldowns with {"all": true}).
func (d *Dashboard) ModelCooldownsClear(c echo.Context) error {
	n, err := d.Engine.Lockouts.Clear(c.Request().Context(), resilience.LockFilter{})
	if err != nil {
		return err
	}
	trigger(c, views.EventResilienceChanged, nil)
	toast(c, "success", "Cleared "+views.Plural(n, "model lockout", "model lockouts")+".")
	return afterMutation(c, runtimeHref, func() error { return d.renderModelCooldowns(c, views.ModelCooldownsConfID) })
}

// LeaseConfirmEnd asks before ending one active lease; an unknown or
// already ended lease is 404.
func (d *Dashboard) LeaseConfirmEnd(c echo.Context) error {
	ctx := c.Request().Context()
	l, ok := d.activeLease(c.Param("id"))
	if !ok {
		return services.ErrNotFound
	}
	row, err := d.leaseRow(ctx, l)
	if err != nil {
		return err
	}
	cf := views.LeaseConfirm(row)
	return d.runtimeParts(c, views.ConfirmBox(*cf), func(vm *views.RuntimePageVM) { vm.Leases.Confirm = cf })
}

// leaseRow names one lease as the panel does.
func (d *Dashboard) leaseRow(ctx context.Context, l leases.Lease) (views.LeaseRowVM, error) {
	keys, err := d.leaseKeys(ctx, []leases.Lease{l})
	if err != nil {
		return views.LeaseRowVM{}, err
	}
	name := ""
	if conn, err := d.Conns.Get(ctx, l.ConnectionID); err == nil {
		name = conn.Name
	} else if !errors.Is(err, services.ErrNotFound) {
		return views.LeaseRowVM{}, err
	}
	return views.NewLeaseRowVM(l, keys[l.KeyID], d.providerNames()[l.Provider], name, d.Clock.Now()), nil
}

// LeaseEnd ends one active lease with reason admin_ended (twin DELETE
// /api/resilience/leases/{id}: Leases.Invalidate on its connection). A lease
// that ended meanwhile (released, expired) is reported, not an error. It
// answers with the leases panel and empties the confirmation slot.
func (d *Dashboard) LeaseEnd(c echo.Context) error {
	ctx := c.Request().Context()
	l, ok := d.activeLease(c.Param("id"))
	n := 0
	if ok {
		row, err := d.leaseRow(ctx, l)
		if err != nil {
			return err
		}
		if n, err = d.Leases.Invalidate(ctx, l.ConnectionID, leases.ReasonAdminEnded); err != nil {
			return err
		}
		if n > 0 {
			trigger(c, views.EventResilienceChanged, nil)
			toast(c, "success", "Lease of "+row.KeyLabel()+" on "+row.Connection+" ended. Its client's next request will be rejected as stale.")
		}
	}
	if n == 0 {
		toast(c, "info", "That lease had already ended.")
	}
	return afterMutation(c, runtimeHref, func() error {
		vm, err := d.leasesPanel(ctx)
		if err != nil {
			return err
		}
		return renderPanel(c, views.LeasesPanel(vm), views.LeasesConfirmID)
	})
}

// Incidents is the top bar's incident badge: "2 breakers open · 1 model
// locked", empty when nothing is active. Without htmx it is the Runtime page.
func (d *Dashboard) Incidents(c echo.Context) error {
	conns, err := d.Conns.List(c.Request().Context(), services.ConnectionFilter{})
	if err != nil {
		return err
	}
	cooling, terminal := d.resilienceCounts(conns)
	vm := views.NewIncidentsVM(d.Engine.Breakers.All(), terminal, cooling, d.Engine.Lockouts.Count(), d.Engine.Lockouts.Enabled())
	return d.runtimeParts(c, views.IncidentBadge(vm), nil)
}
