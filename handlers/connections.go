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

// Connections page (50-dashboard §6.4). Every action calls the same
// services.Connections method as its /api/connections twin.

const connectionsTitle, connectionsHref = "Connections", "/connections"

// ConnectionService is what the Connections page and its API twin call
// (services.Connections).
type ConnectionService interface {
	ConnectionLister
	Get(ctx context.Context, id string) (services.Connection, error)
	Create(ctx context.Context, in services.ConnectionInput) (services.Connection, error)
	Update(ctx context.Context, id string, in services.ConnectionInput) (services.Connection, error)
	SetEnabled(ctx context.Context, id string, on bool) (services.Connection, error)
	References(ctx context.Context, id string) (services.ConnectionReferences, error)
	Delete(ctx context.Context, id string) error
	RecordTest(ctx context.Context, id string, r services.TestResult) (services.Connection, error)
}

// ConnectionLister lists connections (provider, priority, name) and reads
// the provider catalogue.
type ConnectionLister interface {
	Catalogue
	List(ctx context.Context, f services.ConnectionFilter) ([]services.Connection, error)
}

// StatusReader reads the resilience read model (resilience.Monitor).
type StatusReader interface {
	// Snapshot is the state of every connection routing sees, from memory.
	Snapshot() resilience.Snapshot
	// SnapshotOf is the state over connections the caller loaded.
	SnapshotOf(conns []services.Connection) resilience.Snapshot
	// Connection is one connection's state.
	Connection(c services.Connection) resilience.ConnectionStatus
}

// ConnectionResetter runs the state actions of one or more connections
// (resilience.Engine), the same for a page and its API twin.
type ConnectionResetter interface {
	ClearCooldowns(ctx context.Context, conns []services.Connection) (resilience.ClearCooldownsResult, int, error)
	ResetConnection(ctx context.Context, c services.Connection, lockouts bool) error
}

// QuotaWindows reads the learned quota windows of a connection as they
// count at now (services/quota.Tracker).
type QuotaWindows interface {
	Windows(connID string, now time.Time) quota.View
}

// Connections serves the Connections page: the grouped list with the live
// resilience state, the add and edit panel, the state actions and the Test
// button.
type Connections struct {
	Layout
	Conns  ConnectionService
	Status StatusReader
	State  ConnectionResetter
	// Quota feeds the quota windows cell (nil shows every window unknown).
	Quota  QuotaWindows
	Tester ConnectionTester
	Clock  services.Clock
	// Confirm checks the admin password that keeping a stored credential
	// across a changed base URL or proxy needs (services.Auth); ClientIP
	// throttles it.
	Confirm  PasswordConfirmer
	ClientIP func(r *http.Request) string
}

func (h *Connections) providers() []services.Provider { return h.Conns.Catalogue().All() }

// connectionsList loads the grouped list.
func (h *Connections) connectionsList(ctx context.Context) (views.ConnectionsListVM, error) {
	conns, err := h.Conns.List(ctx, services.ConnectionFilter{})
	if err != nil {
		return views.ConnectionsListVM{}, err
	}
	return h.liveConnectionsList(conns), nil
}

// connectionsPage renders the page with an optional open panel; fragment is
// what htmx gets instead.
func (h *Connections) connectionsPage(c echo.Context, status int, fragment func(views.ConnectionsPageVM) templComponent, vm views.ConnectionsPageVM) error {
	list, err := h.connectionsList(c.Request().Context())
	if err != nil {
		return err
	}
	vm.List = list.WithConfirm(vm.List.Confirm)
	page := views.ConnectionsPage(vm)
	frag := page
	if fragment != nil {
		frag = fragment(vm)
	}
	return h.pageParts(c, status, connectionsTitle, connectionsHref, frag, page)
}

func panelFragment(vm views.ConnectionsPageVM) templComponent {
	return views.ConnectionPanel(*vm.Panel)
}

// List shows the grouped list.
func (h *Connections) List(c echo.Context) error {
	return h.connectionsPage(c, http.StatusOK, nil, views.ConnectionsPageVM{})
}

// New opens the add form in the panel.
func (h *Connections) New(c echo.Context) error {
	form := views.NewConnectionFormVM(h.providers(), c.QueryParam("provider"))
	return h.connectionsPage(c, http.StatusOK, panelFragment, views.ConnectionsPageVM{Panel: &form})
}

// Fields swaps the provider-dependent fields of the add form.
func (h *Connections) Fields(c echo.Context) error {
	provider := c.QueryParam("provider")
	form := views.NewConnectionFormVM(h.providers(), provider)
	return h.connectionsPage(c, http.StatusOK, func(vm views.ConnectionsPageVM) templComponent {
		return views.ConnectionFields(vm.Panel.Fields)
	}, views.ConnectionsPageVM{Panel: &form})
}

// Create adds a connection (Connections.Create, twin POST /api/connections).
func (h *Connections) Create(c echo.Context) error {
	v := form(c)
	conn, err := h.Conns.Create(c.Request().Context(), connectionInput(v, true, ""))
	if verr, ok := validation(err); ok {
		vm := connectionForm(v, h.providers(), false)
		vm.Errors = views.NewFieldErrors(verr.Fields, connectionErrorFields(v))
		vm.Fields.Errors, vm.Fields.Focus = vm.Errors, vm.Focus()
		vm.Fields.KeyResubmit = v.Get("apiKey") != "" || v.Get("oauth.accessToken") != ""
		return h.connectionsPage(c, http.StatusUnprocessableEntity, panelFragment, views.ConnectionsPageVM{Panel: &vm})
	}
	if err != nil {
		return err
	}
	NoteAudit(c, "connection.create", conn.ID)
	trigger(c, views.EventConnectionsChanged, nil)
	toast(c, "success", "Connection "+conn.Name+" added.")
	return afterMutation(c, connectionsHref, func() error { return h.connectionSaved(c) })
}

// connectionSaved closes the panel and replaces the list out of band.
func (h *Connections) connectionSaved(c echo.Context) error {
	list, err := h.connectionsList(c.Request().Context())
	if err != nil {
		return err
	}
	return render(c, http.StatusOK, views.ConnectionSaved(list), nil)
}

// Edit opens the edit form of one connection in the panel.
func (h *Connections) Edit(c echo.Context) error {
	conn, err := h.Conns.Get(c.Request().Context(), c.Param("id"))
	if err != nil {
		return err
	}
	form := views.EditConnectionFormVM(conn, h.providers())
	return h.connectionsPage(c, http.StatusOK, panelFragment, views.ConnectionsPageVM{Panel: &form})
}

// Update saves the edit form (Connections.Update, twin PATCH /api/connections/{id}).
func (h *Connections) Update(c echo.Context) error {
	ctx := c.Request().Context()
	cur, err := h.Conns.Get(ctx, c.Param("id"))
	if err != nil {
		return err
	}
	v := form(c)
	in := connectionInput(v, false, cur.MaskedProxyURL())
	var conn services.Connection
	if err = confirmKeep(c, h.Confirm, h.ClientIP, in); err == nil {
		conn, err = h.Conns.Update(ctx, cur.ID, in)
	}
	if verr, ok := validation(err); ok {
		vm := views.EditConnectionFormVM(cur, h.providers())
		typed := connectionForm(v, h.providers(), true)
		typed.ID, typed.ProviderName, typed.Terminal, typed.Fields = vm.ID, vm.ProviderName, vm.Terminal, vm.Fields
		if has(v, "baseUrl") {
			typed.Fields.BaseURL = v.Get("baseUrl")
		}
		typed.Fields.DefaultModel = v.Get("defaultModel")
		typed.Errors = views.NewFieldErrors(verr.Fields, connectionErrorFields(v))
		typed.Fields.Errors, typed.Fields.Focus = typed.Errors, typed.Focus()
		typed.Fields.KeyResubmit = v.Get("apiKey") != "" || v.Get("oauth.accessToken") != ""
		_, pwErr := verr.Fields["currentPassword"]
		typed.Fields.ConfirmKeep = pwErr || verr.Fields["apiKey"] == services.MsgRepointCredential ||
			verr.Fields["oauth.accessToken"] == services.MsgRepointCredential
		typed.Fields.KeepCredentials = checked(v, "keepCredentials")
		return h.connectionsPage(c, http.StatusUnprocessableEntity, panelFragment, views.ConnectionsPageVM{Panel: &typed})
	}
	if err != nil {
		return err
	}
	trigger(c, views.EventConnectionsChanged, nil)
	toast(c, "success", "Connection "+conn.Name+" saved.")
	return afterMutation(c, connectionsHref, func() error { return h.connectionSaved(c) })
}

// Enabled switches a connection on or off and answers with its row
// (Connections.SetEnabled, twin PATCH /api/connections/{id}).
func (h *Connections) Enabled(c echo.Context) error {
	on := checked(form(c), "enabled")
	conn, err := h.Conns.SetEnabled(c.Request().Context(), c.Param("id"), on)
	if err != nil {
		return err
	}
	trigger(c, views.EventConnectionsChanged, nil)
	word := "disabled"
	if on {
		word = "enabled"
	}
	toast(c, "success", "Connection "+conn.Name+" "+word+".")
	return afterMutation(c, connectionsHref, func() error {
		return render(c, http.StatusOK, views.ConnectionRow(h.liveConnectionRow(conn)), nil)
	})
}

// ConfirmDelete shows what deleting a connection would touch.
func (h *Connections) ConfirmDelete(c echo.Context) error {
	ctx := c.Request().Context()
	conn, err := h.Conns.Get(ctx, c.Param("id"))
	if err != nil {
		return err
	}
	refs, err := h.Conns.References(ctx, conn.ID)
	if err != nil {
		return err
	}
	cf := views.ConnectionRefsConfirm(conn, refs)
	return h.connectionsPage(c, http.StatusOK, func(views.ConnectionsPageVM) templComponent {
		return views.ConfirmPanel(*cf)
	}, views.ConnectionsPageVM{List: views.ConnectionsListVM{Confirm: cf}})
}

// Delete removes a connection (Connections.Delete, twin DELETE
// /api/connections/{id}); a lease key's last connection is a 409 toast.
func (h *Connections) Delete(c echo.Context) error {
	ctx := c.Request().Context()
	conn, err := h.Conns.Get(ctx, c.Param("id"))
	if err != nil {
		return err
	}
	if err := h.Conns.Delete(ctx, conn.ID); err != nil {
		return err
	}
	trigger(c, views.EventConnectionsChanged, nil)
	toast(c, "success", "Connection "+conn.Name+" deleted.")
	return afterMutation(c, connectionsHref, func() error {
		list, err := h.connectionsList(ctx)
		if err != nil {
			return err
		}
		return render(c, http.StatusOK, views.ConnectionsList(list), nil)
	})
}

// Live resilience state on the Connections page (50-dashboard §6.4): status
// badges from the read model, cooldown countdowns, locked models, the learned
// quota windows, the provider breaker in each group header, the polled
// status and quota cells, and the Clear cooldown and Reset state actions.
// Every action calls the same engine method as its /api twin
// (ResilienceAPI.ClearCooldowns, ConnectionsAPI.Reset).

// liveConnectionsList is the grouped connections table with the live
// state of the read model: the status precedence disabled > terminal >
// cooling > locked > healthy, cooldowns, locked models, max_concurrent slots
// in use and each provider's breaker.
func (h *Connections) liveConnectionsList(conns []services.Connection) views.ConnectionsListVM {
	snap := h.Status.SnapshotOf(conns)
	now := snap.At
	live := make([]services.Connection, len(snap.Connections))
	breakers := map[string]resilience.BreakerStatus{}
	for i, st := range snap.Connections {
		live[i] = st.Conn
		breakers[st.Conn.Provider] = st.Breaker
	}
	vm := views.NewConnectionsListVM(live, h.providers(), now)
	for gi := range vm.Groups {
		g := &vm.Groups[gi]
		g.Breaker = views.NewGroupBreakerVM(breakers[g.ProviderID], now)
		for ri := range g.Rows {
			r := &g.Rows[ri]
			st, _ := snap.Connection(r.ID)
			*r = liveRow(*r, st, h.quotaWindows(r.ID, now), now)
		}
	}
	return vm
}

// liveConnectionRow is one row with its live state.
func (h *Connections) liveConnectionRow(c services.Connection) views.ConnectionRowVM {
	st := h.Status.Connection(c)
	now := h.Clock.Now()
	return liveRow(views.NewConnectionRowVM(st.Conn, now), st, h.quotaWindows(c.ID, now), now)
}

// liveRow adds what the read model knows to a row: locked models, the
// backoff scale and the slots in use, then the quota windows.
func liveRow(r views.ConnectionRowVM, st resilience.ConnectionStatus, q quota.View, now time.Time) views.ConnectionRowVM {
	return r.WithLive(st.Lockouts, st.BackoffMax, now).WithSlots(st.Slots.InFlight, st.Slots.Waiting).WithQuota(q, now)
}

// quotaWindows are the quota windows learned for a connection, as they
// count at now; every window is unknown without a tracker.
func (h *Connections) quotaWindows(connID string, now time.Time) quota.View {
	if h.Quota == nil {
		return quota.View{}
	}
	return h.Quota.Windows(connID, now)
}

// Statuses answers the 5-s poll of the Connections page with the
// status, cooldown, last error and concurrency cells of every row, and each
// group's breaker badge, as out-of-band swaps. The poll sends the signature
// of every cell it shows ("sig=<cell id>=<sig>"); unchanged cells are left
// out, so an open list of locked models stays open. Without htmx it is the
// Connections page.
func (h *Connections) Statuses(c echo.Context) error {
	if !isHTMX(c.Request()) {
		return h.List(c)
	}
	conns, err := h.Conns.List(c.Request().Context(), services.ConnectionFilter{})
	if err != nil {
		return err
	}
	vm := views.NewConnectionStatusesVM(h.liveConnectionsList(conns), liveSigs(c, views.LiveSigField))
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

// QuotaWindows answers the quota poll of the Connections page
// (GET /connections/quota-windows) with the quota windows cell of every row
// whose reading changed, out of band. Without htmx it is the Connections page.
func (h *Connections) QuotaWindows(c echo.Context) error {
	if !isHTMX(c.Request()) {
		return h.List(c)
	}
	conns, err := h.Conns.List(c.Request().Context(), services.ConnectionFilter{})
	if err != nil {
		return err
	}
	rows := views.ChangedQuotaCells(h.liveConnectionsList(conns), liveSigs(c, views.QuotaSigField))
	return render(c, http.StatusOK, views.ConnectionQuotaWindows(rows), nil)
}

// ClearCooldown clears one connection's cooldown (twin: POST
// /api/resilience/cooldowns with its id). From the Connections page it
// answers with the row, from the Runtime page (target #cooldowns) with the
// cooldowns panel.
func (h *Connections) ClearCooldown(c echo.Context) error {
	ctx := c.Request().Context()
	conn, err := h.Conns.Get(ctx, c.Param("id"))
	if err != nil {
		return err
	}
	res, _, err := h.State.ClearCooldowns(ctx, []services.Connection{conn})
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
			return renderPanel(c, views.CooldownsPanel(cooldownsPanelVM(h.Status.Snapshot(), h.Conns)), "")
		}
		return render(c, http.StatusOK, views.ConnectionRowReset(h.liveConnectionRow(conn)), nil)
	})
}

// resetConfirm is the confirmation of a state reset.
func resetConfirm(conn services.Connection, fromRuntime bool) *views.ConfirmVM {
	lines := []string{
		"This clears the terminal state, the cooldown, the backoff level and the failure counters, and re-enables its locked models. Requests may use it again at once.",
		"If the connection is still banned, expired or out of credits, the next failed request marks it terminal again.",
	}
	if fromRuntime {
		return views.RuntimeConfirm(views.RowTerminal, "Reset the state of connection "+conn.Name+"?", "Reset state",
			"/connections/"+conn.ID+"/reset", views.CooldownsPanelID, lines...)
	}
	return &views.ConfirmVM{RowKind: views.RowConn, ID: conn.ID, Title: "Reset the state of connection " + conn.Name + "?",
		Lines: lines, Action: "Reset state", Method: "post", URL: "/connections/" + conn.ID + "/reset",
		Target: "#" + views.RowID(views.RowConn, conn.ID), Cancel: connectionsHref, Colspan: views.ConnColumns}
}

// ConfirmReset shows what resetting a connection's state does: in
// the row's slot on the Connections page, or above the cooldowns panel of
// the Runtime page (target #cooldowns-confirm).
func (h *Connections) ConfirmReset(c echo.Context) error {
	conn, err := h.Conns.Get(c.Request().Context(), c.Param("id"))
	if err != nil {
		return err
	}
	if isHTMX(c.Request()) && c.Request().Header.Get("HX-Target") == views.CooldownsConfirmID {
		return render(c, http.StatusOK, views.ConfirmBox(*resetConfirm(conn, true)), nil)
	}
	cf := resetConfirm(conn, false)
	return h.connectionsPage(c, http.StatusOK, func(views.ConnectionsPageVM) templComponent {
		return views.ConfirmPanel(*cf)
	}, views.ConnectionsPageVM{List: views.ConnectionsListVM{Confirm: cf}})
}

// Reset clears cooldown, counters, the terminal state, model
// lockouts and the window-gate entry of one connection (twin: POST
// /api/connections/{id}/reset). It answers with the row (Connections page)
// or the cooldowns panel (Runtime page), and empties the confirmation.
func (h *Connections) Reset(c echo.Context) error {
	ctx := c.Request().Context()
	conn, err := h.Conns.Get(ctx, c.Param("id"))
	if err != nil {
		return err
	}
	if err := h.State.ResetConnection(ctx, conn, true); err != nil {
		return err
	}
	trigger(c, views.EventResilienceChanged, nil)
	toast(c, "success", "State of "+conn.Name+" reset. It is back in rotation.")
	return afterMutation(c, connectionsHref, func() error {
		if c.Request().Header.Get("HX-Target") == views.CooldownsPanelID {
			return renderPanel(c, views.CooldownsPanel(cooldownsPanelVM(h.Status.Snapshot(), h.Conns)), views.CooldownsConfirmID)
		}
		if conn, err = h.Conns.Get(ctx, conn.ID); err != nil {
			return err
		}
		return render(c, http.StatusOK, views.ConnectionRowReset(h.liveConnectionRow(conn)), nil)
	})
}

// empty answers "success, nothing to show": htmx removes the target.
func empty(c echo.Context) error { return render(c, http.StatusOK, templ.NopComponent, nil) }

// Test sends the connection test (one minimal request, 15 s
// timeout, never touching resilience state), records it as lastTest and
// answers with the row's "Last used / test" cell carrying the result line
// (twin POST /api/connections/{id}/test). Without script it renders the
// Connections page with the result in the row.
func (h *Connections) Test(c echo.Context) error {
	ctx := c.Request().Context()
	conn, res, err := runConnectionTest(ctx, h.Conns, h.Tester, c.Param("id"))
	if err != nil {
		return err
	}
	result := views.NewConnTestResultVM(res)
	row := h.liveConnectionRow(conn)
	row.TestResult = &result
	if isHTMX(c.Request()) {
		return render(c, http.StatusOK, views.ConnTestCell(row), nil)
	}
	list, err := h.connectionsList(ctx)
	if err != nil {
		return err
	}
	for gi := range list.Groups {
		for ri := range list.Groups[gi].Rows {
			if list.Groups[gi].Rows[ri].ID == conn.ID {
				list.Groups[gi].Rows[ri].TestResult = &result
			}
		}
	}
	return h.page(c, http.StatusOK, connectionsTitle, connectionsHref, views.ConnectionsPage(views.ConnectionsPageVM{List: list}))
}
