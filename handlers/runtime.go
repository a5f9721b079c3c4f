package handlers

import (
	"context"
	"errors"
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"switchyard/services"
	"switchyard/services/events"
	"switchyard/services/human"
	"switchyard/services/leases"
	"switchyard/services/resilience"
	"switchyard/services/traffic"
	"switchyard/views"
)

// Runtime page (50-dashboard §6.8) and the incident badge (§2). Each panel is
// its own fragment, polled every 5 s and on resilience-changed. Every panel
// renders the read model (resilience.Snapshot, from memory: no connection
// row is read or decrypted), and every action calls the same engine method
// as its /api twin (handlers/api_resilience.go), then announces
// resilience-changed with a toast.

const runtimeTitle, runtimeHref = "Runtime", "/runtime"

// ResilienceActions are the admin actions on the resilience state
// (resilience.Engine), shared by the Runtime page and its /api twins.
type ResilienceActions interface {
	ConnectionResetter
	ResetBreaker(ctx context.Context, provider string) error
	ResetBreakers(ctx context.Context) (int, error)
	ClearWindowGate(ctx context.Context) (int, error)
	ClearLockouts(ctx context.Context, f resilience.LockFilter) (int, error)
}

// LeaseAdmin lists and ends exclusive leases (services/leases.Leases).
type LeaseAdmin interface {
	Active() []leases.Lease
	Invalidate(ctx context.Context, connID, reason string) (int, error)
}

// QueueStats reads the request queues (services/traffic.Queues).
type QueueStats interface {
	Stats() []traffic.QueueStats
	Effective(o services.RateLimitOverrides) traffic.QueueConfig
}

// SlotStats reads the max_concurrent slot gates (services/traffic.Slots).
type SlotStats interface {
	Stats() []traffic.SlotStats
}

// EventReader lists the recent resilience events, newest first
// (services/events.Ring).
type EventReader interface {
	Snapshot() []events.Event
}

// AffinityAdmin counts and clears the session-affinity pins and says
// whether affinity is on (services/affinity.Pins).
type AffinityAdmin interface {
	PinAdmin
	On() bool
}

// Runtime serves the Runtime page and the incident badge.
type Runtime struct {
	Layout
	Status    StatusReader
	Engine    ResilienceActions
	Catalogue Catalogue
	// Leases, Queues and Slots may be nil: their panels stay empty.
	LeaseAdmin LeaseAdmin
	QueueStats QueueStats
	SlotStats  SlotStats
	// Waiting lists the requests waiting now (nil: the panel stays empty).
	Waiting WaitingReader
	Keys    KeyReader
	Clock   services.Clock
	// Events are the recent resilience events (nil: the panel stays
	// empty); PerReplica says the list is this replica's own (shared mode).
	Events     EventReader
	PerReplica bool
	// Pins are the session-affinity pins (nil: the line says none).
	Pins AffinityAdmin
}

func summaryVM(snap *resilience.Snapshot) views.RuntimeSummaryVM {
	n := snap.Counts()
	return views.RuntimeSummaryVM{Locked: n.Locked, Cooling: n.Cooling, Terminal: n.Terminal,
		OpenBreakers: views.OpenBreakers(snap.Breakers), WindowGate: n.WindowGate}
}

func breakersPanelVM(snap *resilience.Snapshot, cat Catalogue) views.BreakersPanelVM {
	return views.NewBreakersPanelVM(snap.Breakers, snap.WindowGate, snap.WindowGateEnabled, providerNames(cat), snap.Names(), snap.At)
}

// cooldownsPanelVM is the connection cooldowns panel (also the answer of
// the Connections page's state actions aimed at it).
func cooldownsPanelVM(snap resilience.Snapshot, cat Catalogue) views.CooldownsPanelVM {
	names := providerNames(cat)
	list := make([]views.CooldownConn, len(snap.Connections))
	for i, st := range snap.Connections {
		list[i] = views.CooldownConn{Conn: st.Conn, State: st.Conn.State, Provider: orDefault(names[st.Conn.Provider], st.Conn.Provider),
			BackoffMax: st.BackoffMax}
	}
	return views.NewCooldownsPanelVM(list, snap.At)
}

func modelCooldownsVM(snap *resilience.Snapshot, cat Catalogue) views.ModelCooldownsVM {
	return views.NewModelCooldownsVM(snap.LockoutsEnabled, snap.Lockouts, providerNames(cat), snap.Names(), snap.At)
}

// activeLeases are the live leases (GET /api/resilience/leases reads the same).
func (h *Runtime) activeLeases() []leases.Lease {
	if h.LeaseAdmin == nil {
		return nil
	}
	return h.LeaseAdmin.Active()
}

// activeLease finds a live lease by id.
func (h *Runtime) activeLease(id string) (leases.Lease, bool) {
	for _, l := range h.activeLeases() {
		if l.ID == id {
			return l, true
		}
	}
	return leases.Lease{}, false
}

// leaseKeys loads the keys of the given leases; a deleted key is left out.
func (h *Runtime) leaseKeys(ctx context.Context, ls []leases.Lease) (map[string]services.APIKey, error) {
	keys := map[string]services.APIKey{}
	for _, l := range ls {
		if _, ok := keys[l.KeyID]; ok {
			continue
		}
		k, err := h.Keys.Get(ctx, l.KeyID)
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

func (h *Runtime) leasesPanel(ctx context.Context, snap *resilience.Snapshot) (views.LeasesPanelVM, error) {
	active := h.activeLeases()
	if len(active) == 0 {
		return views.LeasesPanelVM{}, nil
	}
	keys, err := h.leaseKeys(ctx, active)
	if err != nil {
		return views.LeasesPanelVM{}, err
	}
	return views.NewLeasesPanelVM(active, keys, providerNames(h.Catalogue), snap.Names(), snap.At), nil
}

func (h *Runtime) queuesPanel(snap *resilience.Snapshot) views.QueuesPanelVM {
	byConn := map[string][]traffic.QueueStats{}
	if h.QueueStats != nil {
		for _, q := range h.QueueStats.Stats() {
			byConn[q.ConnectionID] = append(byConn[q.ConnectionID], q)
		}
	}
	slots := map[string]traffic.SlotStats{}
	if h.SlotStats != nil {
		for _, st := range h.SlotStats.Stats() {
			slots[st.ConnectionID] = st
		}
	}
	names := providerNames(h.Catalogue)
	var qs []views.QueueConn
	var ss []views.SlotConn
	for _, st := range snap.Connections {
		cn := st.Conn
		provider := orDefault(names[cn.Provider], cn.Provider)
		if st.QueueProtected {
			q := views.QueueConn{Conn: cn, Provider: provider, Stats: byConn[cn.ID]}
			if h.QueueStats != nil {
				q.Effective = h.QueueStats.Effective(cn.RateLimitOverrides)
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
	return views.NewQueuesPanelVM(qs, ss, snap.SlotsEnabled, snap.At)
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// pageVM builds the whole page from one snapshot.
func (h *Runtime) pageVM(ctx context.Context) (views.RuntimePageVM, error) {
	snap := h.Status.Snapshot()
	vm := views.RuntimePageVM{Summary: summaryVM(&snap), Breakers: breakersPanelVM(&snap, h.Catalogue),
		Cooldowns: cooldownsPanelVM(snap, h.Catalogue), Models: modelCooldownsVM(&snap, h.Catalogue), Queues: h.queuesPanel(&snap),
		Waiting: h.waitingPanel(&snap), Events: h.eventsPanel(&snap), Affinity: h.affinityLine()}
	var err error
	vm.Leases, err = h.leasesPanel(ctx, &snap)
	return vm, err
}

// parts renders fragment for htmx and the whole Runtime page (with open,
// when set, adjusting it: an open confirmation) for everything else.
func (h *Runtime) parts(c echo.Context, fragment templComponent, open func(*views.RuntimePageVM)) error {
	if isHTMX(c.Request()) {
		return render(c, http.StatusOK, fragment, nil)
	}
	vm, err := h.pageVM(c.Request().Context())
	if err != nil {
		return err
	}
	if open != nil {
		open(&vm)
	}
	return h.page(c, http.StatusOK, runtimeTitle, runtimeHref, views.RuntimePage(vm))
}

// Show shows every panel (GET /runtime).
func (h *Runtime) Show(c echo.Context) error {
	vm, err := h.pageVM(c.Request().Context())
	if err != nil {
		return err
	}
	return h.page(c, http.StatusOK, runtimeTitle, runtimeHref, views.RuntimePage(vm))
}

// Summary is the polled KPI strip.
func (h *Runtime) Summary(c echo.Context) error {
	snap := h.Status.Snapshot()
	return h.parts(c, views.RuntimeSummary(summaryVM(&snap)), nil)
}

// Breakers is the polled provider breakers panel.
func (h *Runtime) Breakers(c echo.Context) error {
	snap := h.Status.Snapshot()
	return h.parts(c, views.BreakersPanel(breakersPanelVM(&snap, h.Catalogue)), nil)
}

// Cooldowns is the polled connection cooldowns panel.
func (h *Runtime) Cooldowns(c echo.Context) error {
	return h.parts(c, views.CooldownsPanel(cooldownsPanelVM(h.Status.Snapshot(), h.Catalogue)), nil)
}

// ModelCooldowns is the polled Model Cooldowns card.
func (h *Runtime) ModelCooldowns(c echo.Context) error {
	snap := h.Status.Snapshot()
	return h.parts(c, views.ModelCooldownsCard(modelCooldownsVM(&snap, h.Catalogue)), nil)
}

// Leases is the polled active leases panel.
func (h *Runtime) Leases(c echo.Context) error {
	snap := h.Status.Snapshot()
	vm, err := h.leasesPanel(c.Request().Context(), &snap)
	if err != nil {
		return err
	}
	return h.parts(c, views.LeasesPanel(vm), nil)
}

// Queues is the polled, read-only queues and slots panel (the data of GET
// /api/concurrency).
func (h *Runtime) Queues(c echo.Context) error {
	snap := h.Status.Snapshot()
	return h.parts(c, views.QueuesPanel(h.queuesPanel(&snap)), nil)
}

// waitingPanel lists the requests waiting now.
func (h *Runtime) waitingPanel(snap *resilience.Snapshot) views.WaitingPanelVM {
	if h.Waiting == nil {
		return views.NewWaitingPanelVM(nil, nil, snap.At)
	}
	return views.NewWaitingPanelVM(h.Waiting.List(), snap.Names(), h.Waiting.Now())
}

// WaitingRequests is the polled Waiting requests panel.
func (h *Runtime) WaitingRequests(c echo.Context) error {
	snap := h.Status.Snapshot()
	return h.parts(c, views.WaitingPanel(h.waitingPanel(&snap)), nil)
}

// eventsPanel lists the recent events with the display names the snapshot
// knows now (an event keeps ids only).
func (h *Runtime) eventsPanel(snap *resilience.Snapshot) views.EventsPanelVM {
	if h.Events == nil {
		return views.NewEventsPanelVM(nil, views.EventNames{}, h.PerReplica, snap.At)
	}
	return views.NewEventsPanelVM(h.Events.Snapshot(), eventNames(snap, h.Catalogue), h.PerReplica, snap.At)
}

// eventNames are the provider and connection names events are shown with.
func eventNames(snap *resilience.Snapshot, cat Catalogue) views.EventNames {
	of := make(map[string]string, len(snap.Connections))
	for _, st := range snap.Connections {
		of[st.Conn.ID] = st.Conn.Provider
	}
	return views.EventNames{Providers: providerNames(cat), Connections: snap.Names(), ProviderOf: of}
}

// RecentEvents is the polled Recent events panel.
func (h *Runtime) RecentEvents(c echo.Context) error {
	snap := h.Status.Snapshot()
	return h.parts(c, views.EventsPanel(h.eventsPanel(&snap)), nil)
}

// affinityLine is the Session affinity line: the live pins (an in-memory
// count in both modes: a fleet's pins are mirrored from the database).
func (h *Runtime) affinityLine() views.AffinityLineVM {
	if h.Pins == nil {
		return views.AffinityLineVM{}
	}
	return views.AffinityLineVM{On: h.Pins.On(), Pins: h.Pins.Count()}
}

// Affinity is the polled Session affinity line.
func (h *Runtime) Affinity(c echo.Context) error {
	return h.parts(c, views.AffinityLine(h.affinityLine()), nil)
}

// ConfirmClearAffinity asks before dropping every session pin.
func (h *Runtime) ConfirmClearAffinity(c echo.Context) error {
	cf := views.AffinityConfirm(h.affinityLine().Pins)
	return h.parts(c, views.ConfirmBox(*cf), func(vm *views.RuntimePageVM) { vm.Affinity.Confirm = cf })
}

// ClearAffinity drops every session pin (Affinity.ClearAll; twin DELETE
// /api/resilience/affinity) and answers with the line, its confirmation
// slot emptied.
func (h *Runtime) ClearAffinity(c echo.Context) error {
	if h.Pins == nil {
		return services.ErrNotFound
	}
	n, err := h.Pins.ClearAll(c.Request().Context())
	if err != nil {
		return err
	}
	trigger(c, views.EventResilienceChanged, nil)
	toast(c, "success", "Cleared "+human.Plural(n, "session pin", "session pins")+".")
	return afterMutation(c, runtimeHref, func() error {
		return renderPanel(c, views.AffinityLine(h.affinityLine()), views.AffinityConfirmID)
	})
}

// renderBreakersPanel answers an action of the breakers panel; slot, when
// set, is the confirmation slot to empty.
func (h *Runtime) renderBreakersPanel(c echo.Context, slot string) error {
	snap := h.Status.Snapshot()
	return renderPanel(c, views.BreakersPanel(breakersPanelVM(&snap, h.Catalogue)), slot)
}

func renderPanel(c echo.Context, panel templComponent, slot string) error {
	if slot != "" {
		panel = views.RuntimePanelAfterConfirm(panel, slot)
	}
	return render(c, http.StatusOK, panel, nil)
}

// ResetBreaker closes one provider's breaker at once (non-destructive; twin
// POST /api/resilience/breakers/{provider}/reset).
func (h *Runtime) ResetBreaker(c echo.Context) error {
	p, ok := h.Catalogue.Catalogue().Get(c.Param("provider"))
	if !ok {
		return services.ErrNotFound
	}
	if err := h.Engine.ResetBreaker(c.Request().Context(), p.ID); err != nil {
		return err
	}
	trigger(c, views.EventResilienceChanged, nil)
	toast(c, "success", "Breaker of "+p.Name+" reset to closed.")
	return afterMutation(c, runtimeHref, func() error { return h.renderBreakersPanel(c, "") })
}

func breakersConfirm(n int) *views.ConfirmVM {
	return views.RuntimeConfirm(views.BreakersPanelID, "Reset all breakers?", "Reset all breakers",
		"/runtime/breakers/reset", views.BreakersPanelID,
		"Every provider breaker closes with its failure count set to zero ("+human.Plural(n, "breaker holds", "breakers hold")+" state now).",
		"Requests go to providers whose breaker was open at once, even if they are still failing.")
}

// ConfirmResetBreakers asks before resetting every breaker.
func (h *Runtime) ConfirmResetBreakers(c echo.Context) error {
	snap := h.Status.Snapshot()
	cf := breakersConfirm(len(snap.Breakers))
	return h.parts(c, views.ConfirmBox(*cf), func(vm *views.RuntimePageVM) { vm.Breakers.Confirm = cf })
}

// ResetBreakers closes every breaker (twin POST /api/resilience/breakers/reset).
func (h *Runtime) ResetBreakers(c echo.Context) error {
	n, err := h.Engine.ResetBreakers(c.Request().Context())
	if err != nil {
		return err
	}
	trigger(c, views.EventResilienceChanged, nil)
	toast(c, "success", "Reset "+human.Plural(n, "breaker", "breakers")+".")
	return afterMutation(c, runtimeHref, func() error { return h.renderBreakersPanel(c, views.BreakersConfirmID) })
}

// ClearWindowGate drops every window-gate entry (twin POST
// /api/resilience/reset with {"include": ["windowGate"]}).
func (h *Runtime) ClearWindowGate(c echo.Context) error {
	n, err := h.Engine.ClearWindowGate(c.Request().Context())
	if err != nil {
		return err
	}
	trigger(c, views.EventResilienceChanged, nil)
	toast(c, "success", "Cleared "+human.Plural(n, "window-gate entry", "window-gate entries")+".")
	return afterMutation(c, runtimeHref, func() error { return h.renderBreakersPanel(c, "") })
}

// ConfirmClearCooldowns asks before clearing every cooldown.
func (h *Runtime) ConfirmClearCooldowns(c echo.Context) error {
	snap := h.Status.Snapshot()
	cooling, terminal := 0, 0
	for _, st := range snap.Connections {
		switch st.Condition {
		case resilience.ConditionTerminal:
			terminal++
		case resilience.ConditionCooling:
			cooling++
		}
	}
	lines := []string{human.Plural(cooling, "cooling connection returns", "cooling connections return") +
		" to rotation at once; backoff levels, failure counters and model lockouts of every non-terminal connection are cleared too."}
	switch {
	case terminal == 1:
		lines = append(lines, "1 terminal connection is left as it is; reset its state on its own.")
	case terminal > 1:
		lines = append(lines, strconv.Itoa(terminal)+" terminal connections are left as they are; reset their state one by one.")
	}
	cf := views.RuntimeConfirm(views.CooldownsPanelID, "Clear all cooldowns?", "Clear all cooldowns",
		"/runtime/cooldowns/clear", views.CooldownsPanelID, lines...)
	return h.parts(c, views.ConfirmBox(*cf), func(vm *views.RuntimePageVM) { vm.Cooldowns.Confirm = cf })
}

// ClearCooldowns clears every cooldown, skipping terminal connections (twin
// POST /api/resilience/cooldowns with {"all": true}); the toast reports the counts.
func (h *Runtime) ClearCooldowns(c echo.Context) error {
	snap := h.Status.Snapshot()
	conns := make([]services.Connection, len(snap.Connections))
	for i, st := range snap.Connections {
		conns[i] = st.Conn
	}
	res, _, err := h.Engine.ClearCooldowns(c.Request().Context(), conns)
	if err != nil {
		return err
	}
	trigger(c, views.EventResilienceChanged, nil)
	text := "Cleared " + human.Plural(len(res.Cleared), "cooldown", "cooldowns") + "."
	switch n := len(res.SkippedTerminal); n {
	case 0:
	case 1:
		text += " 1 terminal connection left as it is."
	default:
		text += " " + strconv.Itoa(n) + " terminal connections left as they are."
	}
	toast(c, "success", text)
	return afterMutation(c, runtimeHref, func() error {
		return renderPanel(c, views.CooldownsPanel(cooldownsPanelVM(h.Status.Snapshot(), h.Catalogue)), views.CooldownsConfirmID)
	})
}

// ReEnableModel clears the lockouts of one model on one connection, every
// key shape (twin DELETE /api/resilience/model-cooldowns). The row or list
// item that asked is removed (empty answer).
func (h *Runtime) ReEnableModel(c echo.Context) error {
	v := form(c)
	provider, connID, model := v.Get("provider"), v.Get("connectionId"), v.Get("model")
	if provider == "" || model == "" {
		return services.Invalid("model", "Name the provider and the model to re-enable.")
	}
	if _, ok := h.Catalogue.Catalogue().Get(provider); !ok {
		return services.ErrNotFound
	}
	where := "every connection of " + provider
	if connID != "" {
		snap := h.Status.Snapshot()
		st, ok := snap.Connection(connID)
		if !ok {
			return services.ErrNotFound
		}
		where = st.Conn.Name
	}
	n, err := h.Engine.ClearLockouts(c.Request().Context(), resilience.LockFilter{Provider: provider, ConnectionID: connID, Model: model})
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

// ConfirmClearModelCooldowns asks before clearing every model lockout.
func (h *Runtime) ConfirmClearModelCooldowns(c echo.Context) error {
	snap := h.Status.Snapshot()
	cf := views.RuntimeConfirm(views.ModelCooldownsCardID, "Clear all model lockouts?", "Clear all",
		"/runtime/model-cooldowns/clear", views.ModelCooldownsCardID,
		human.Plural(snap.Counts().Locked, "locked model returns", "locked models return")+" to rotation at once, and the escalation memory of every lockout is forgotten.")
	return h.parts(c, views.ConfirmBox(*cf), func(vm *views.RuntimePageVM) { vm.Models.Confirm = cf })
}

// ClearModelCooldowns clears every model lockout (twin DELETE
// /api/resilience/model-cooldowns with {"all": true}).
func (h *Runtime) ClearModelCooldowns(c echo.Context) error {
	n, err := h.Engine.ClearLockouts(c.Request().Context(), resilience.LockFilter{})
	if err != nil {
		return err
	}
	trigger(c, views.EventResilienceChanged, nil)
	toast(c, "success", "Cleared "+human.Plural(n, "model lockout", "model lockouts")+".")
	return afterMutation(c, runtimeHref, func() error {
		snap := h.Status.Snapshot()
		return renderPanel(c, views.ModelCooldownsCard(modelCooldownsVM(&snap, h.Catalogue)), views.ModelCooldownsConfID)
	})
}

// ConfirmEndLease asks before ending one active lease; an unknown or
// already ended lease is 404.
func (h *Runtime) ConfirmEndLease(c echo.Context) error {
	l, ok := h.activeLease(c.Param("id"))
	if !ok {
		return services.ErrNotFound
	}
	row, err := h.leaseRow(c.Request().Context(), l)
	if err != nil {
		return err
	}
	cf := views.LeaseConfirm(row)
	return h.parts(c, views.ConfirmBox(*cf), func(vm *views.RuntimePageVM) { vm.Leases.Confirm = cf })
}

// leaseRow names one lease as the panel does.
func (h *Runtime) leaseRow(ctx context.Context, l leases.Lease) (views.LeaseRowVM, error) {
	keys, err := h.leaseKeys(ctx, []leases.Lease{l})
	if err != nil {
		return views.LeaseRowVM{}, err
	}
	snap := h.Status.Snapshot()
	return views.NewLeaseRowVM(l, keys[l.KeyID], providerNames(h.Catalogue)[l.Provider], snap.Names()[l.ConnectionID], snap.At), nil
}

// EndLease ends one active lease with reason admin_ended (twin DELETE
// /api/resilience/leases/{id}: Leases.Invalidate on its connection). A lease
// that ended meanwhile (released, expired) is reported, not an error. It
// answers with the leases panel and empties the confirmation slot.
func (h *Runtime) EndLease(c echo.Context) error {
	ctx := c.Request().Context()
	l, ok := h.activeLease(c.Param("id"))
	n := 0
	if ok {
		row, err := h.leaseRow(ctx, l)
		if err != nil {
			return err
		}
		if n, err = h.LeaseAdmin.Invalidate(ctx, l.ConnectionID, leases.ReasonAdminEnded); err != nil {
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
		snap := h.Status.Snapshot()
		vm, err := h.leasesPanel(ctx, &snap)
		if err != nil {
			return err
		}
		return renderPanel(c, views.LeasesPanel(vm), views.LeasesConfirmID)
	})
}

// Incidents is the top bar's incident badge: "2 breakers open · 1 model
// locked", empty when nothing is active. Without htmx it is the Runtime page.
func (h *Runtime) Incidents(c echo.Context) error {
	snap := h.Status.Snapshot()
	n := snap.Counts()
	vm := views.NewIncidentsVM(snap.Breakers, n.Terminal, n.Cooling, n.Locked, snap.LockoutsEnabled)
	return h.parts(c, views.IncidentBadge(vm), nil)
}
