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

// KeyService is what the API keys page and its API twin call (services.Keys).
type KeyService interface {
	KeyLister
	KeyReader
	Create(ctx context.Context, in services.KeyInput) (services.APIKey, string, error)
	Update(ctx context.Context, id string, in services.KeyInput) (services.APIKey, error)
	Revoke(ctx context.Context, id string) (services.APIKey, error)
	Delete(ctx context.Context, id string) error
}

// KeyLister lists client keys by state ("" = all), newest first.
type KeyLister interface {
	List(ctx context.Context, state string) ([]services.APIKey, error)
}

// KeyReader finds one client key.
type KeyReader interface {
	Get(ctx context.Context, id string) (services.APIKey, error)
}

// Keys serves the API keys page.
type Keys struct {
	Layout
	Keys   KeyService
	Combos ComboLister
	Conns  ConnectionLister
	Clock  services.Clock
}

// keysList loads the list, newest first.
func (h *Keys) keysList(ctx context.Context) (views.KeysListVM, error) {
	keys, err := h.Keys.List(ctx, "")
	if err != nil {
		return views.KeysListVM{}, err
	}
	return views.NewKeysListVM(keys, h.Clock.Now()), nil
}

// keysPage renders the page (list loaded here) or, for htmx, fragment.
func (h *Keys) keysPage(c echo.Context, status int, fragment templComponent, vm views.KeysPageVM) error {
	list, err := h.keysList(c.Request().Context())
	if err != nil {
		return err
	}
	vm.List = list.WithConfirm(vm.List.Confirm)
	page := views.KeysPage(vm)
	if fragment == nil {
		fragment = page
	}
	return h.pageParts(c, status, keysTitle, keysHref, fragment, page)
}

// fillKeyForm adds the combos and connections the allowlists offer.
func (h *Keys) fillKeyForm(ctx context.Context, vm *views.KeyFormVM) error {
	combos, err := h.Combos.List(ctx)
	if err != nil {
		return err
	}
	conns, err := h.Conns.List(ctx, services.ConnectionFilter{})
	if err != nil {
		return err
	}
	vm.Fill(combos, conns)
	return nil
}

// List lists the keys.
func (h *Keys) List(c echo.Context) error {
	return h.keysPage(c, http.StatusOK, nil, views.KeysPageVM{})
}

// New opens the create form in the panel.
func (h *Keys) New(c echo.Context) error {
	vm := views.NewKeyFormVM()
	if err := h.fillKeyForm(c.Request().Context(), &vm); err != nil {
		return err
	}
	return h.keysPage(c, http.StatusOK, views.KeyPanel(vm), views.KeysPageVM{Form: &vm})
}

// Create issues a key (Keys.Create, twin POST /api/keys) and answers with
// the one-time secret panel; the response is never cached or kept in history.
func (h *Keys) Create(c echo.Context) error {
	ctx := c.Request().Context()
	v := form(c)
	k, secret, err := h.Keys.Create(ctx, keyInput(v, true))
	if verr, ok := validation(err); ok {
		vm := keyForm(v, false)
		vm.Errors = views.NewFieldErrors(verr.Fields, keyErrorFields)
		if err := h.fillKeyForm(ctx, &vm); err != nil {
			return err
		}
		return h.keysPage(c, http.StatusUnprocessableEntity, views.KeyPanel(vm), views.KeysPageVM{Form: &vm})
	}
	if err != nil {
		return err
	}
	combos, err := h.Combos.List(ctx)
	if err != nil {
		return err
	}
	conns, err := h.Conns.List(ctx, services.ConnectionFilter{})
	if err != nil {
		return err
	}
	panel := views.NewKeySecretVM(k.Name, secret, baseURL(c.Request()), views.ExampleModel(combos, conns, h.Conns.Catalogue().All()))
	list, err := h.keysList(ctx)
	if err != nil {
		return err
	}
	NoteAudit(c, "key.create", k.ID)
	trigger(c, views.EventKeysChanged, nil)
	toast(c, "success", "Key "+k.Name+" created. Copy it now: it is shown only once.")
	return h.keysPage(c, http.StatusOK, views.KeyCreated(*panel, list), views.KeysPageVM{Secret: panel})
}

// Edit opens the edit form of a key.
func (h *Keys) Edit(c echo.Context) error {
	ctx := c.Request().Context()
	k, err := h.Keys.Get(ctx, c.Param("id"))
	if err != nil {
		return err
	}
	combos, err := h.Combos.List(ctx)
	if err != nil {
		return err
	}
	vm := views.EditKeyFormVM(k, combos)
	if err := h.fillKeyForm(ctx, &vm); err != nil {
		return err
	}
	return h.keysPage(c, http.StatusOK, views.KeyPanel(vm), views.KeysPageVM{Form: &vm})
}

// Update saves the edit form (Keys.Update, twin PATCH /api/keys/{id}).
func (h *Keys) Update(c echo.Context) error {
	ctx := c.Request().Context()
	id := c.Param("id")
	v := form(c)
	k, err := h.Keys.Update(ctx, id, keyInput(v, false))
	if verr, ok := validation(err); ok {
		vm := keyForm(v, true)
		vm.ID = id
		vm.Errors = views.NewFieldErrors(verr.Fields, keyErrorFields)
		if err := h.fillKeyForm(ctx, &vm); err != nil {
			return err
		}
		return h.keysPage(c, http.StatusUnprocessableEntity, views.KeyPanel(vm), views.KeysPageVM{Form: &vm})
	}
	if err != nil {
		return err
	}
	trigger(c, views.EventKeysChanged, nil)
	toast(c, "success", "Key "+k.Name+" saved.")
	return afterMutation(c, keysHref, func() error {
		list, err := h.keysList(ctx)
		if err != nil {
			return err
		}
		return render(c, http.StatusOK, views.KeySaved(list), nil)
	})
}

// ConfirmRevoke shows what revoking a key means.
func (h *Keys) ConfirmRevoke(c echo.Context) error {
	k, err := h.Keys.Get(c.Request().Context(), c.Param("id"))
	if err != nil {
		return err
	}
	cf := views.KeyRevokeConfirm(k)
	return h.keysPage(c, http.StatusOK, views.ConfirmPanel(*cf), views.KeysPageVM{List: views.KeysListVM{Confirm: cf}})
}

// Revoke revokes a key (Keys.Revoke, twin POST /api/keys/{id}/revoke).
func (h *Keys) Revoke(c echo.Context) error {
	k, err := h.Keys.Revoke(c.Request().Context(), c.Param("id"))
	if err != nil {
		return err
	}
	trigger(c, views.EventKeysChanged, nil)
	toast(c, "success", "Key "+k.Name+" revoked.")
	return afterMutation(c, keysHref, func() error { return h.renderKeysList(c) })
}

// ConfirmDelete shows what deleting a (revoked) key means.
func (h *Keys) ConfirmDelete(c echo.Context) error {
	k, err := h.Keys.Get(c.Request().Context(), c.Param("id"))
	if err != nil {
		return err
	}
	cf := views.KeyDeleteConfirm(k)
	return h.keysPage(c, http.StatusOK, views.ConfirmPanel(*cf), views.KeysPageVM{List: views.KeysListVM{Confirm: cf}})
}

// Delete removes a revoked key (Keys.Delete, twin DELETE /api/keys/{id});
// an unrevoked key is a 409 toast.
func (h *Keys) Delete(c echo.Context) error {
	ctx := c.Request().Context()
	k, err := h.Keys.Get(ctx, c.Param("id"))
	if err != nil {
		return err
	}
	if err := h.Keys.Delete(ctx, k.ID); err != nil {
		return err
	}
	trigger(c, views.EventKeysChanged, nil)
	toast(c, "success", "Key "+k.Name+" deleted.")
	return afterMutation(c, keysHref, func() error { return h.renderKeysList(c) })
}

func (h *Keys) renderKeysList(c echo.Context) error {
	list, err := h.keysList(c.Request().Context())
	if err != nil {
		return err
	}
	return render(c, http.StatusOK, views.KeysList(list), nil)
}
