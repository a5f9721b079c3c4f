package handlers

import (
	"net/http"
	"slices"
	"strings"

	"github.com/labstack/echo/v4"

	"switchyard/services"
)

// keyStateFilters are the values of GET /api/keys?state= ("" = all).
var keyStateFilters = []string{services.KeyActive, services.KeyDisabled, services.KeyRevoked, services.KeyExpired, "all"}

// KeysAPI serves /api/keys (40-admin-api §7).
type KeysAPI struct {
	*API
	Keys KeyService
}

// List answers GET /api/keys[?state=], newest first.
func (h *KeysAPI) List(c echo.Context) error {
	state := c.QueryParam("state")
	if state != "" && !slices.Contains(keyStateFilters, state) {
		return services.Invalid("state", "must be one of "+strings.Join(keyStateFilters, ", "))
	}
	list, err := h.Keys.List(c.Request().Context(), state)
	if err != nil {
		return err
	}
	now := h.Clock.Now()
	out := make([]keyJSON, len(list))
	for i, k := range list {
		out[i] = presentKey(k, now)
	}
	return writeAPIJSON(c, http.StatusOK, apiItems(out))
}

// Create answers POST /api/keys with 201 {"key", "secret"}: the only
// response that ever carries the secret.
func (h *KeysAPI) Create(c echo.Context) error {
	var in services.KeyInput
	if err := decodeJSON(c, &in); err != nil {
		return err
	}
	k, secret, err := h.Keys.Create(c.Request().Context(), in)
	if err != nil {
		return err
	}
	h.audit(c, "key.create", "id", k.ID, "prefix", k.Prefix)
	return writeAPICreated(c, "/api/keys/"+k.ID, createdKeyJSON{Key: presentKey(k, h.Clock.Now()), Secret: secret})
}

// Show answers GET /api/keys/{id}.
func (h *KeysAPI) Show(c echo.Context) error {
	k, err := h.Keys.Get(c.Request().Context(), c.Param("id"))
	if err != nil {
		return err
	}
	return writeAPIJSON(c, http.StatusOK, presentKey(k, h.Clock.Now()))
}

// Update answers PATCH /api/keys/{id}.
func (h *KeysAPI) Update(c echo.Context) error {
	var in services.KeyInput
	if err := decodeJSON(c, &in); err != nil {
		return err
	}
	k, err := h.Keys.Update(c.Request().Context(), c.Param("id"), in)
	if err != nil {
		return err
	}
	h.audit(c, "key.update", "id", k.ID)
	return writeAPIJSON(c, http.StatusOK, presentKey(k, h.Clock.Now()))
}

// Revoke answers POST /api/keys/{id}/revoke; revoking again is a no-op
// that answers the same key.
func (h *KeysAPI) Revoke(c echo.Context) error {
	k, err := h.Keys.Revoke(c.Request().Context(), c.Param("id"))
	if err != nil {
		return err
	}
	h.audit(c, "key.revoke", "id", k.ID)
	return writeAPIJSON(c, http.StatusOK, presentKey(k, h.Clock.Now()))
}

// Delete answers DELETE /api/keys/{id} with 204; only a revoked key may
// be deleted (409 otherwise).
func (h *KeysAPI) Delete(c echo.Context) error {
	id := c.Param("id")
	if err := h.Keys.Delete(c.Request().Context(), id); err != nil {
		return err
	}
	h.audit(c, "key.delete", "id", id)
	return c.NoContent(http.StatusNoContent)
}
