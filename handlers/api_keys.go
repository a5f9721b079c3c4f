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

// ListKeys answers GET /api/keys[?state=], newest first.
func (h *API) ListKeys(c echo.Context) error {
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

// CreateKey answers POST /api/keys with 201 {"key", "secret"}: the only
// response that ever carries the secret.
func (h *API) CreateKey(c echo.Context) error {
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

// ShowKey answers GET /api/keys/{id}.
func (h *API) ShowKey(c echo.Context) error {
	k, err := h.Keys.Get(c.Request().Context(), c.Param("id"))
	if err != nil {
		return err
	}
	return writeAPIJSON(c, http.StatusOK, presentKey(k, h.Clock.Now()))
}

// UpdateKey answers PATCH /api/keys/{id}.
func (h *API) UpdateKey(c echo.Context) error {
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

// RevokeKey answers POST /api/keys/{id}/revoke; revoking again is a no-op
// that answers the same key.
func (h *API) RevokeKey(c echo.Context) error {
	k, err := h.Keys.Revoke(c.Request().Context(), c.Param("id"))
	if err != nil {
		return err
	}
	h.audit(c, "key.revoke", "id", k.ID)
	return writeAPIJSON(c, http.StatusOK, presentKey(k, h.Clock.Now()))
}

// DeleteKey answers DELETE /api/keys/{id} with 204; only a revoked key may
// be deleted (409 otherwise).
func (h *API) DeleteKey(c echo.Context) error {
	id := c.Param("id")
	if err := h.Keys.Delete(c.Request().Context(), id); err != nil {
		return err
	}
	h.audit(c, "key.delete", "id", id)
	return c.NoContent(http.StatusNoContent)
}
