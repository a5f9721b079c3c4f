package handlers

import (
	"context"
	"net/http"

	"github.com/labstack/echo/v4"

	"switchyard/services"
	"switchyard/views"
)

// Connections page (50-dashboard §6.4). Every action calls the same
// services.Connections method as its /api/connections twin.

const connectionsTitle, connectionsHref = "Connections", "/connections"

func (d *Dashboard) providers() []services.Provider { return d.Conns.Catalogue().All() }

// connectionsList loads the grouped list.
func (d *Dashboard) connectionsList(ctx context.Context) (views.ConnectionsListVM, error) {
	conns, err := d.Conns.List(ctx, services.ConnectionFilter{})
	if err != nil {
		return views.ConnectionsListVM{}, err
	}
	return d.liveConnectionsList(conns), nil
}

// connectionsPage renders the page with an optional open panel; fragment is
// what htmx gets instead.
func (d *Dashboard) connectionsPage(c echo.Context, status int, fragment func(views.ConnectionsPageVM) templComponent, vm views.ConnectionsPageVM) error {
	list, err := d.connectionsList(c.Request().Context())
	if err != nil {
		return err
	}
	vm.List = list.WithConfirm(vm.List.Confirm)
	page := views.ConnectionsPage(vm)
	frag := page
	if fragment != nil {
		frag = fragment(vm)
	}
	return d.pageParts(c, status, connectionsTitle, connectionsHref, frag, page)
}

func panelFragment(vm views.ConnectionsPageVM) templComponent {
	return views.ConnectionPanel(*vm.Panel)
}

// ConnectionsPage shows the grouped list.
func (d *Dashboard) ConnectionsPage(c echo.Context) error {
	return d.connectionsPage(c, http.StatusOK, nil, views.ConnectionsPageVM{})
}

// ConnectionNew opens the add form in the panel.
func (d *Dashboard) ConnectionNew(c echo.Context) error {
	form := views.NewConnectionFormVM(d.providers(), c.QueryParam("provider"))
	return d.connectionsPage(c, http.StatusOK, panelFragment, views.ConnectionsPageVM{Panel: &form})
}

// ConnectionFormFields swaps the provider-dependent fields of the add form.
func (d *Dashboard) ConnectionFormFields(c echo.Context) error {
	provider := c.QueryParam("provider")
	form := views.NewConnectionFormVM(d.providers(), provider)
	return d.connectionsPage(c, http.StatusOK, func(vm views.ConnectionsPageVM) templComponent {
		return views.ConnectionFields(vm.Panel.Fields)
	}, views.ConnectionsPageVM{Panel: &form})
}

// ConnectionCreate adds a connection (Connections.Create, twin POST /api/connections).
func (d *Dashboard) ConnectionCreate(c echo.Context) error {
	v := form(c)
	conn, err := d.Conns.Create(c.Request().Context(), connectionInput(v, true, ""))
	if verr, ok := validation(err); ok {
		vm := connectionForm(v, d.providers(), false)
		vm.Errors = views.NewFieldErrors(verr.Fields, connectionErrorFields(v))
		vm.Fields.Errors, vm.Fields.Focus = vm.Errors, vm.Focus()
		vm.Fields.KeyResubmit = v.Get("apiKey") != "" || v.Get("oauth.accessToken") != ""
		return d.connectionsPage(c, http.StatusUnprocessableEntity, panelFragment, views.ConnectionsPageVM{Panel: &vm})
	}
	if err != nil {
		return err
	}
	trigger(c, views.EventConnectionsChanged, nil)
	toast(c, "success", "Connection "+conn.Name+" added.")
	return afterMutation(c, connectionsHref, func() error { return d.connectionSaved(c) })
}

// connectionSaved closes the panel and replaces the list out of band.
func (d *Dashboard) connectionSaved(c echo.Context) error {
	list, err := d.connectionsList(c.Request().Context())
	if err != nil {
		return err
	}
	return render(c, http.StatusOK, views.ConnectionSaved(list), nil)
}

// ConnectionEdit opens the edit form of one connection in the panel.
func (d *Dashboard) ConnectionEdit(c echo.Context) error {
	conn, err := d.Conns.Get(c.Request().Context(), c.Param("id"))
	if err != nil {
		return err
	}
	form := views.EditConnectionFormVM(conn, d.providers())
	return d.connectionsPage(c, http.StatusOK, panelFragment, views.ConnectionsPageVM{Panel: &form})
}

// ConnectionUpdate saves the edit form (Connections.Update, twin PATCH /api/connections/{id}).
func (d *Dashboard) ConnectionUpdate(c echo.Context) error {
	ctx := c.Request().Context()
	cur, err := d.Conns.Get(ctx, c.Param("id"))
	if err != nil {
		return err
	}
	v := form(c)
	conn, err := d.Conns.Update(ctx, cur.ID, connectionInput(v, false, cur.MaskedProxyURL()))
	if verr, ok := validation(err); ok {
		vm := views.EditConnectionFormVM(cur, d.providers())
		typed := connectionForm(v, d.providers(), true)
		typed.ID, typed.ProviderName, typed.Terminal, typed.Fields = vm.ID, vm.ProviderName, vm.Terminal, vm.Fields
		if has(v, "baseUrl") {
			typed.Fields.BaseURL = v.Get("baseUrl")
		}
		typed.Fields.DefaultModel = v.Get("defaultModel")
		typed.Errors = views.NewFieldErrors(verr.Fields, connectionErrorFields(v))
		typed.Fields.Errors, typed.Fields.Focus = typed.Errors, typed.Focus()
		typed.Fields.KeyResubmit = v.Get("apiKey") != "" || v.Get("oauth.accessToken") != ""
		return d.connectionsPage(c, http.StatusUnprocessableEntity, panelFragment, views.ConnectionsPageVM{Panel: &typed})
	}
	if err != nil {
		return err
	}
	trigger(c, views.EventConnectionsChanged, nil)
	toast(c, "success", "Connection "+conn.Name+" saved.")
	return afterMutation(c, connectionsHref, func() error { return d.connectionSaved(c) })
}

// ConnectionEnabled switches a connection on or off and answers with its row
// (Connections.SetEnabled, twin PATCH /api/connections/{id}).
func (d *Dashboard) ConnectionEnabled(c echo.Context) error {
	on := checked(form(c), "enabled")
	conn, err := d.Conns.SetEnabled(c.Request().Context(), c.Param("id"), on)
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
		return render(c, http.StatusOK, views.ConnectionRow(d.liveConnectionRow(conn)), nil)
	})
}

// ConnectionConfirmDelete shows what deleting a connection would touch.
func (d *Dashboard) ConnectionConfirmDelete(c echo.Context) error {
	ctx := c.Request().Context()
	conn, err := d.Conns.Get(ctx, c.Param("id"))
	if err != nil {
		return err
	}
	refs, err := d.Conns.References(ctx, conn.ID)
	if err != nil {
		return err
	}
	cf := views.ConnectionRefsConfirm(conn, refs)
	return d.connectionsPage(c, http.StatusOK, func(views.ConnectionsPageVM) templComponent {
		return views.ConfirmPanel(*cf)
	}, views.ConnectionsPageVM{List: views.ConnectionsListVM{Confirm: cf}})
}

// ConnectionDelete removes a connection (Connections.Delete, twin DELETE
// /api/connections/{id}); a lease key's last connection is a 409 toast.
func (d *Dashboard) ConnectionDelete(c echo.Context) error {
	ctx := c.Request().Context()
	conn, err := d.Conns.Get(ctx, c.Param("id"))
	if err != nil {
		return err
	}
	if err := d.Conns.Delete(ctx, conn.ID); err != nil {
		return err
	}
	trigger(c, views.EventConnectionsChanged, nil)
	toast(c, "success", "Connection "+conn.Name+" deleted.")
	return afterMutation(c, connectionsHref, func() error {
		list, err := d.connectionsList(ctx)
		if err != nil {
			return err
		}
		return render(c, http.StatusOK, views.ConnectionsList(list), nil)
	})
}
