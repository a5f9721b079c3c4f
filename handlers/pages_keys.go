package handlers

import (
	"context"
	"net/http"

	"github.com/labstack/echo/v4"

	"switchyard/services"
	"switchyard/views"
)

// API keys page (50-dashboard §6.6). Every action calls the same
// services.Keys method as its /api/keys twin. A new key's secret is shown
// once, in the response to the request that created it.

const keysTitle, keysHref = "API keys", "/keys"

// keysList loads the list, newest first.
func (d *Dashboard) keysList(ctx context.Context) (views.KeysListVM, error) {
	keys, err := d.Keys.List(ctx, "")
	if err != nil {
		return views.KeysListVM{}, err
	}
	return views.NewKeysListVM(keys, d.Clock.Now()), nil
}

// keysPage renders the page (list loaded here) or, for htmx, fragment.
func (d *Dashboard) keysPage(c echo.Context, status int, fragment templComponent, vm views.KeysPageVM) error {
	list, err := d.keysList(c.Request().Context())
	if err != nil {
		return err
	}
	vm.List = list.WithConfirm(vm.List.Confirm)
	page := views.KeysPage(vm)
	if fragment == nil {
		fragment = page
	}
	return d.pageParts(c, status, keysTitle, keysHref, fragment, page)
}

// fillKeyForm adds the combos and connections the allowlists offer.
func (d *Dashboard) fillKeyForm(ctx context.Context, vm *views.KeyFormVM) error {
	combos, err := d.Combos.List(ctx)
	if err != nil {
		return err
	}
	conns, err := d.Conns.List(ctx, services.ConnectionFilter{})
	if err != nil {
		return err
	}
	vm.Fill(combos, conns)
	return nil
}

// KeysPage lists the keys.
func (d *Dashboard) KeysPage(c echo.Context) error {
	return d.keysPage(c, http.StatusOK, nil, views.KeysPageVM{})
}

// KeyNew opens the create form in the panel.
func (d *Dashboard) KeyNew(c echo.Context) error {
	vm := views.NewKeyFormVM()
	if err := d.fillKeyForm(c.Request().Context(), &vm); err != nil {
		return err
	}
	return d.keysPage(c, http.StatusOK, views.KeyPanel(vm), views.KeysPageVM{Form: &vm})
}

// KeyCreate issues a key (Keys.Create, twin POST /api/keys) and answers with
// the one-time secret panel; the response is never cached or kept in history.
func (d *Dashboard) KeyCreate(c echo.Context) error {
	ctx := c.Request().Context()
	v := form(c)
	k, secret, err := d.Keys.Create(ctx, keyInput(v, true))
	if verr, ok := validation(err); ok {
		vm := keyForm(v, false)
		vm.Errors = views.NewFieldErrors(verr.Fields, keyErrorFields)
		if err := d.fillKeyForm(ctx, &vm); err != nil {
			return err
		}
		return d.keysPage(c, http.StatusUnprocessableEntity, views.KeyPanel(vm), views.KeysPageVM{Form: &vm})
	}
	if err != nil {
		return err
	}
	combos, err := d.Combos.List(ctx)
	if err != nil {
		return err
	}
	conns, err := d.Conns.List(ctx, services.ConnectionFilter{})
	if err != nil {
		return err
	}
	panel := views.NewKeySecretVM(k.Name, secret, baseURL(c.Request()), views.ExampleModel(combos, conns, d.providers()))
	list, err := d.keysList(ctx)
	if err != nil {
		return err
	}
	trigger(c, views.EventKeysChanged, nil)
	toast(c, "success", "Key "+k.Name+" created. Copy it now: it is shown only once.")
	return d.keysPage(c, http.StatusOK, views.KeyCreated(*panel, list), views.KeysPageVM{Secret: panel})
}

// KeyEdit opens the edit form of a key.
func (d *Dashboard) KeyEdit(c echo.Context) error {
	ctx := c.Request().Context()
	k, err := d.Keys.Get(ctx, c.Param("id"))
	if err != nil {
		return err
	}
	combos, err := d.Combos.List(ctx)
	if err != nil {
		return err
	}
	vm := views.EditKeyFormVM(k, combos)
	if err := d.fillKeyForm(ctx, &vm); err != nil {
		return err
	}
	return d.keysPage(c, http.StatusOK, views.KeyPanel(vm), views.KeysPageVM{Form: &vm})
}

// KeyUpdate saves the edit form (Keys.Update, twin PATCH /api/keys/{id}).
func (d *Dashboard) KeyUpdate(c echo.Context) error {
	ctx := c.Request().Context()
	id := c.Param("id")
	v := form(c)
	k, err := d.Keys.Update(ctx, id, keyInput(v, false))
	if verr, ok := validation(err); ok {
		vm := keyForm(v, true)
		vm.ID = id
		vm.Errors = views.NewFieldErrors(verr.Fields, keyErrorFields)
		if err := d.fillKeyForm(ctx, &vm); err != nil {
			return err
		}
		return d.keysPage(c, http.StatusUnprocessableEntity, views.KeyPanel(vm), views.KeysPageVM{Form: &vm})
	}
	if err != nil {
		return err
	}
	trigger(c, views.EventKeysChanged, nil)
	toast(c, "success", "Key "+k.Name+" saved.")
	return afterMutation(c, keysHref, func() error {
		list, err := d.keysList(ctx)
		if err != nil {
			return err
		}
		return render(c, http.StatusOK, views.KeySaved(list), nil)
	})
}

// KeyConfirmRevoke shows what revoking a key means.
func (d *Dashboard) KeyConfirmRevoke(c echo.Context) error {
	k, err := d.Keys.Get(c.Request().Context(), c.Param("id"))
	if err != nil {
		return err
	}
	cf := views.KeyRevokeConfirm(k)
	return d.keysPage(c, http.StatusOK, views.ConfirmPanel(*cf), views.KeysPageVM{List: views.KeysListVM{Confirm: cf}})
}

// KeyRevoke revokes a key (Keys.Revoke, twin POST /api/keys/{id}/revoke).
func (d *Dashboard) KeyRevoke(c echo.Context) error {
	k, err := d.Keys.Revoke(c.Request().Context(), c.Param("id"))
	if err != nil {
		return err
	}
	trigger(c, views.EventKeysChanged, nil)
	toast(c, "success", "Key "+k.Name+" revoked.")
	return afterMutation(c, keysHref, func() error { return d.renderKeysList(c) })
}

// KeyConfirmDelete shows what deleting a (revoked) key means.
func (d *Dashboard) KeyConfirmDelete(c echo.Context) error {
	k, err := d.Keys.Get(c.Request().Context(), c.Param("id"))
	if err != nil {
		return err
	}
	cf := views.KeyDeleteConfirm(k)
	return d.keysPage(c, http.StatusOK, views.ConfirmPanel(*cf), views.KeysPageVM{List: views.KeysListVM{Confirm: cf}})
}

// KeyDelete removes a revoked key (Keys.Delete, twin DELETE /api/keys/{id});
// an unrevoked key is a 409 toast.
func (d *Dashboard) KeyDelete(c echo.Context) error {
	ctx := c.Request().Context()
	k, err := d.Keys.Get(ctx, c.Param("id"))
	if err != nil {
		return err
	}
	if err := d.Keys.Delete(ctx, k.ID); err != nil {
		return err
	}
	trigger(c, views.EventKeysChanged, nil)
	toast(c, "success", "Key "+k.Name+" deleted.")
	return afterMutation(c, keysHref, func() error { return d.renderKeysList(c) })
}

func (d *Dashboard) renderKeysList(c echo.Context) error {
	list, err := d.keysList(c.Request().Context())
	if err != nil {
		return err
	}
	return render(c, http.StatusOK, views.KeysList(list), nil)
}
