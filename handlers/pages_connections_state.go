package handlers

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/a-h/templ"
	"github.com/labstack/echo/v4"

	"switchyard/services"
	"switchyard/services/quota"
	"switchyard/services/resilience"
	"switchyard/views"
)

// Live resilience state on the Connections page (50-dashboard §6.4): status
// badges from the engine, cooldown countdowns, locked models, the learned
// quota windows, the provider breaker in each group header, the polled
// status and quota cells, and the Clear cooldown and Reset state actions.
// Every action calls the same engine methods as its /api twin
// (handlers/api_resilience.go).

// liveState is the connection's state as the engine holds it in memory (the
// authority for routing). A connection the engine holds nothing for shows
// its stored row.
func (d *Dashboard) liveState(c services.Connection) services.ConnectionState {
	st := d.Engine.Cooldowns.State(c.ID)
	if !hasState(st) {
		return c.State
	}
	st.TestStatus = c.State.TestStatus
	return st
}

func hasState(st services.ConnectionState) bool {
	return st.RateLimitedUntil != nil || st.BackoffLevel != 0 || st.TerminalStatus != "" || st.LastError != "" ||
		st.LastErrorStatus != 0 || st.LastErrorReason != "" || st.LastErrorAt != nil || st.AuthFailCount != 0 ||
		st.RejectStreak != 0 || st.LastRejectAt != nil
}

// backoffMax is maxBackoffSteps of a connection's cooldown profile.
func (d *Dashboard) backoffMax(profile services.AuthClass) int {
	if d.Settings == nil {
		return 0
	}
	return d.Settings.CooldownConfig().Profiles[profile].MaxBackoffSteps
}

// lockoutsByConnection groups the active lockouts by connection id.
func (d *Dashboard) lockoutsByConnection() map[string][]resilience.LockoutStatus {
	out := map[string][]resilience.LockoutStatus{}
	for _, l := range d.Engine.Lockouts.List(resilience.LockFilter{}) {
		out[l.ConnectionID] = append(out[l.ConnectionID], l)
	}
	return out
}

// liveConnectionsList is the grouped connections table with the engine's
// live state: the status precedence disabled > terminal > cooling > locked >
// healthy, cooldowns, locked models, max_concurrent slots in use and each
// provider's breaker.
func (d *Dashboard) liveConnectionsList(conns []services.Connection) views.ConnectionsListVM {
	now := d.Clock.Now()
	locks := d.lockoutsByConnection()
	live := make([]services.Connection, len(conns))
	class := make(map[string]services.AuthClass, len(conns))
	for i, c := range conns {
		c.State = d.liveState(c)
		live[i], class[c.ID] = c, c.AuthClass
	}
	vm := views.NewConnectionsListVM(live, d.providers(), now)
	slots := d.slotStats()
	for gi := range vm.Groups {
		g := &vm.Groups[gi]
		g.Breaker = views.NewGroupBreakerVM(d.Engine.Breakers.Status(g.ProviderID), now)
		for ri := range g.Rows {
			r := &g.Rows[ri]
			st := slots[r.ID]
			*r = r.WithLive(locks[r.ID], d.backoffMax(class[r.ID]), now).WithSlots(st.InFlight, st.Waiting).
				WithQuota(d.quotaWindows(r.ID, now), now)
		}
	}
	return vm
}

// liveConnectionRow is one row with the engine's live state.
func (d *Dashboard) liveConnectionRow(c services.Connection) views.ConnectionRowVM {
	now := d.Clock.Now()
	c.State = d.liveState(c)
	st := d.slotStats()[c.ID]
	return views.NewConnectionRowVM(c, now).
		WithLive(d.Engine.Lockouts.List(resilience.LockFilter{ConnectionID: c.ID}), d.backoffMax(c.AuthClass), now).
		WithSlots(st.InFlight, st.Waiting).
		WithQuota(d.quotaWindows(c.ID, now), now)
}

// quotaWindows are the quota windows learned for a connection, as they
// count at now; every window is unknown without a tracker.
func (d *Dashboard) quotaWindows(connID string, now time.Time) quota.View {
	if d.Quota == nil {
		return quota.View{}
	}
	return d.Quota.Windows(connID, now)
}

// ConnectionStatuses answers the 5-s poll of the Connections page with the
// status, cooldown, last error and concurrency cells of every row, and each
// group's breaker badge, as out-of-band swaps. The poll sends the signature
// of every cell it shows ("sig=<cell id>=<sig>"); unchanged cells are left
// out, so an open list of locked models stays open. Without htmx it is the
// Connections page.
func (d *Dashboard) ConnectionStatuses(c echo.Context) error {
	if !isHTMX(c.Request()) {
		return d.ConnectionsPage(c)
	}
	conns, err := d.Conns.List(c.Request().Context(), services.ConnectionFilter{})
	if err != nil {
		return err
	}
	vm := views.NewConnectionStatusesVM(d.liveConnectionsList(conns), liveSigs(c, views.LiveSigField))
	return render(c, http.StatusOK, views.ConnectionStatuses(vm), nil)
}

// liveSigs reads the cell signatures a poll sends back in field
// ("<cell id>=<sig>"); malformed values are ignored, so their cells are sent.
func liveSigs(c echo.Context, field string) map[string]string {
	have := map[string]string{}
	for _, v := range c.QueryParams()[field] {
		if id, s, ok := strings.Cut(v, "="); ok {
			have[id] = s
		}
	}
	return have
}

// ConnectionQuotaWindows answers the quota poll of the Connections page
// (GET /connections/quota-windows) with the quota windows cell of every row
// whose reading changed, out of band. Without htmx it is the Connections page.
func (d *Dashboard) ConnectionQuotaWindows(c echo.Context) error {
	if !isHTMX(c.Request()) {
		return d.ConnectionsPage(c)
	}
	conns, err := d.Conns.List(c.Request().Context(), services.ConnectionFilter{})
	if err != nil {
		return err
	}
	rows := views.ChangedQuotaCells(d.liveConnectionsList(conns), liveSigs(c, views.QuotaSigField))
	return render(c, http.StatusOK, views.ConnectionQuotaWindows(rows), nil)
}

// clearCooldowns is POST /api/resilience/cooldowns for the given ids:
// cooldowns cleared as on success, terminal connections skipped, then the
// model lockouts and window-gate entries of every non-terminal one cleared.
func (d *Dashboard) clearCooldowns(ctx context.Context, conns []services.Connection) (resilience.ClearCooldownsResult, int, error) {
	ids := make([]string, len(conns))
	for i, cn := range conns {
		ids[i] = cn.ID
	}
	res, err := d.Engine.Cooldowns.ClearCooldownsDetailed(ctx, ids)
	if err != nil {
		return res, 0, err
	}
	terminal := map[string]bool{}
	for _, id := range res.SkippedTerminal {
		terminal[id] = true
	}
	locks := 0
	for _, cn := range conns {
		if terminal[cn.ID] {
			continue
		}
		n, err := d.Engine.Lockouts.Clear(ctx, resilience.LockFilter{ConnectionID: cn.ID})
		if err != nil {
			return res, locks, err
		}
		locks += n
		d.Engine.Gate.Success(cn.Provider, cn.ID)
	}
	return res, locks, nil
}

// ConnectionClearCooldown clears one connection's cooldown (twin: POST
// /api/resilience/cooldowns with its id). From the Connections page it
// answers with the row, from the Runtime page (target #cooldowns) with the
// cooldowns panel.
func (d *Dashboard) ConnectionClearCooldown(c echo.Context) error {
	ctx := c.Request().Context()
	conn, err := d.Conns.Get(ctx, c.Param("id"))
	if err != nil {
		return err
	}
	res, _, err := d.clearCooldowns(ctx, []services.Connection{conn})
	if err != nil {
		return err
	}
	trigger(c, views.EventResilienceChanged, nil)
	if len(res.SkippedTerminal) > 0 {
		toast(c, "warning", "Connection "+conn.Name+" is terminal, so its cooldown was left as it is. Reset its state to bring it back.")
	} else {
		toast(c, "success", "Cooldown of "+conn.Name+" cleared.")
	}
	return afterMutation(c, connectionsHref, func() error {
		if c.Request().Header.Get("HX-Target") == views.CooldownsPanelID {
			return d.renderCooldownsPanel(c, "")
		}
		return render(c, http.StatusOK, views.ConnectionRowReset(d.liveConnectionRow(conn)), nil)
	})
}

// resetConfirm is the confirmation of a state reset.
func resetConfirm(conn services.Connection, fromRuntime bool) *views.ConfirmVM {
	lines := []string{
		"This clears the terminal state, the cooldown, the backoff level and the failure counters, and re-enables its locked models. Requests may use it again at once.",
		"If the account is still banned, expired or out of credits, the next failed request marks it terminal again.",
	}
	if fromRuntime {
		return views.RuntimeConfirm(views.RowTerminal, "Reset the state of connection "+conn.Name+"?", "Reset state",
			"/connections/"+conn.ID+"/reset", views.CooldownsPanelID, lines...)
	}
	return &views.ConfirmVM{RowKind: views.RowConn, ID: conn.ID, Title: "Reset the state of connection " + conn.Name + "?",
		Lines: lines, Action: "Reset state", Method: "post", URL: "/connections/" + conn.ID + "/reset",
		Target: "#" + views.RowID(views.RowConn, conn.ID), Cancel: connectionsHref, Colspan: views.ConnColumns}
}

// ConnectionConfirmReset shows what resetting a connection's state does: in
// the row's slot on the Connections page, or above the cooldowns panel of
// the Runtime page (target #cooldowns-confirm).
func (d *Dashboard) ConnectionConfirmReset(c echo.Context) error {
	conn, err := d.Conns.Get(c.Request().Context(), c.Param("id"))
	if err != nil {
		return err
	}
	if isHTMX(c.Request()) && c.Request().Header.Get("HX-Target") == views.CooldownsConfirmID {
		return render(c, http.StatusOK, views.ConfirmBox(*resetConfirm(conn, true)), nil)
	}
	cf := resetConfirm(conn, false)
	return d.connectionsPage(c, http.StatusOK, func(views.ConnectionsPageVM) templComponent {
		return views.ConfirmPanel(*cf)
	}, views.ConnectionsPageVM{List: views.ConnectionsListVM{Confirm: cf}})
}

// ConnectionReset clears cooldown, counters, the terminal state, model
// lockouts and the window-gate entry of one connection (twin: POST
// /api/connections/{id}/reset). It answers with the row (Connections page)
// or the cooldowns panel (Runtime page), and empties the confirmation.
func (d *Dashboard) ConnectionReset(c echo.Context) error {
	ctx := c.Request().Context()
	conn, err := d.Conns.Get(ctx, c.Param("id"))
	if err != nil {
		return err
	}
	if err := d.Engine.Cooldowns.Reset(ctx, conn.ID); err != nil {
		return err
	}
	if _, err := d.Engine.Lockouts.Clear(ctx, resilience.LockFilter{ConnectionID: conn.ID}); err != nil {
		return err
	}
	d.Engine.Gate.Success(conn.Provider, conn.ID)
	trigger(c, views.EventResilienceChanged, nil)
	toast(c, "success", "State of "+conn.Name+" reset. It is back in rotation.")
	return afterMutation(c, connectionsHref, func() error {
		if c.Request().Header.Get("HX-Target") == views.CooldownsPanelID {
			return d.renderCooldownsPanel(c, views.CooldownsConfirmID)
		}
		if conn, err = d.Conns.Get(ctx, conn.ID); err != nil {
			return err
		}
		return render(c, http.StatusOK, views.ConnectionRowReset(d.liveConnectionRow(conn)), nil)
	})
}

// empty answers "success, nothing to show": htmx removes the target.
func empty(c echo.Context) error { return render(c, http.StatusOK, templ.NopComponent, nil) }
