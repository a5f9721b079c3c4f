package handlers

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"switchyard/services"
	"switchyard/services/gateway"
)

// comboBody is a combo as POST and PUT receive it: the fields of
// services.ComboInput plus the read-only fields of the combo JSON, so that
// GET → edit → PUT round-trips. "id" is refused on POST and must match the
// URL on PUT; createdAt and updatedAt are ignored. Keep the editable fields
// in step with services.ComboInput.
type comboBody struct {
	ID          services.Opt[string] `json:"id"`
	Name        string               `json:"name"`
	Description string               `json:"description"`
	Strategy    string               `json:"strategy"`
	Enabled     *bool                `json:"enabled"`
	Hidden      bool                 `json:"hidden"`
	Targets     []services.Target    `json:"targets"`
	Config      map[string]any       `json:"config"`
	Order       *int                 `json:"order"`
	CreatedAt   json.RawMessage      `json:"createdAt"`
	UpdatedAt   json.RawMessage      `json:"updatedAt"`
}

func (b comboBody) input() services.ComboInput {
	return services.ComboInput{Name: b.Name, Description: b.Description, Strategy: b.Strategy,
		Enabled: b.Enabled, Hidden: b.Hidden, Targets: b.Targets, Config: b.Config, Order: b.Order}
}

// reorderJSON is the body and the answer of POST /api/combos/reorder.
type reorderJSON struct {
	IDs []string `json:"ids"`
}

// CombosAPI serves /api/combos (40-admin-api §6): the combos, their test
// and their routing preview.
type CombosAPI struct {
	*API
	Combos    ComboService
	Tester    ComboTester
	Explainer ComboExplainer
}

// List answers GET /api/combos in list order.
func (h *CombosAPI) List(c echo.Context) error {
	list, err := h.Combos.List(c.Request().Context())
	if err != nil {
		return err
	}
	out := make([]comboJSON, len(list))
	for i, cb := range list {
		out[i] = presentCombo(cb)
	}
	return writeAPIJSON(c, http.StatusOK, apiItems(out))
}

// Create answers POST /api/combos with 201, the combo and its warnings.
func (h *CombosAPI) Create(c echo.Context) error {
	var b comboBody
	if err := decodeJSON(c, &b); err != nil {
		return err
	}
	if b.ID.Set {
		return services.Invalid("id", "The server assigns the id; leave it out.")
	}
	cb, warnings, err := h.Combos.Create(c.Request().Context(), b.input())
	if err != nil {
		return err
	}
	h.audit(c, "combo.create", "id", cb.ID, "name", cb.Name)
	return writeAPICreated(c, "/api/combos/"+cb.ID, comboWarningsJSON{comboJSON: presentCombo(cb), Warnings: warnings})
}

// Show answers GET /api/combos/{id}.
func (h *CombosAPI) Show(c echo.Context) error {
	cb, err := h.Combos.Get(c.Request().Context(), c.Param("id"))
	if err != nil {
		return err
	}
	return writeAPIJSON(c, http.StatusOK, presentCombo(cb))
}

// Replace answers PUT /api/combos/{id}: a full replacement that keeps
// target ids.
func (h *CombosAPI) Replace(c echo.Context) error {
	var b comboBody
	if err := decodeJSON(c, &b); err != nil {
		return err
	}
	id := c.Param("id")
	if b.ID.Set && (b.ID.Null || b.ID.V != id) {
		return services.Invalid("id", "The id must match the URL; leave it out or send "+strconv.Quote(id)+".")
	}
	cb, warnings, err := h.Combos.Replace(c.Request().Context(), id, b.input())
	if err != nil {
		return err
	}
	h.audit(c, "combo.replace", "id", cb.ID, "name", cb.Name)
	return writeAPIJSON(c, http.StatusOK, comboWarningsJSON{comboJSON: presentCombo(cb), Warnings: warnings})
}

// Update answers PATCH /api/combos/{id}: name, description, enabled, hidden.
func (h *CombosAPI) Update(c echo.Context) error {
	var p services.ComboPatch
	if err := decodeJSON(c, &p); err != nil {
		return err
	}
	cb, err := h.Combos.Patch(c.Request().Context(), c.Param("id"), p)
	if err != nil {
		return err
	}
	h.audit(c, "combo.update", "id", cb.ID)
	return writeAPIJSON(c, http.StatusOK, presentCombo(cb))
}

// Delete answers DELETE /api/combos/{id}[?force=true] with 204; a combo
// other combos reference is a conflict unless forced.
func (h *CombosAPI) Delete(c echo.Context) error {
	force := false
	if v := c.QueryParam("force"); v != "" {
		var err error
		if force, err = strconv.ParseBool(v); err != nil {
			return services.Invalid("force", "must be true or false")
		}
	}
	id := c.Param("id")
	if err := h.Combos.Delete(c.Request().Context(), id, force); err != nil {
		return err
	}
	h.audit(c, "combo.delete", "id", id, "force", force)
	return c.NoContent(http.StatusNoContent)
}

// Reorder answers POST /api/combos/reorder; ids must be a permutation
// of every combo id.
func (h *CombosAPI) Reorder(c echo.Context) error {
	var b reorderJSON
	if err := decodeJSON(c, &b); err != nil {
		return err
	}
	if b.IDs == nil {
		b.IDs = []string{}
	}
	if err := h.Combos.Reorder(c.Request().Context(), b.IDs); err != nil {
		return err
	}
	h.audit(c, "combo.reorder", "ids", b.IDs)
	return writeAPIJSON(c, http.StatusOK, b)
}

// ComboReader finds one combo.
type ComboReader interface {
	Get(ctx context.Context, id string) (services.Combo, error)
}

// ComboTester probes the targets of a combo (the gateway implements it).
type ComboTester interface {
	TestCombo(ctx context.Context, c *services.Combo, force bool) []gateway.ComboTestResult
}

// comboTestBody is the optional body of POST /api/combos/{id}/test.
type comboTestBody struct {
	Force bool `json:"force"`
}

// comboTestJSON is the answer of POST /api/combos/{id}/test.
type comboTestJSON struct {
	Results []gateway.ComboTestResult `json:"results"`
}

// runComboTest loads a combo and probes its targets: the one code path of
// the API route and the dashboard's Test button.
func runComboTest(ctx context.Context, combos ComboReader, tester ComboTester, id string, force bool) (services.Combo, []gateway.ComboTestResult, error) {
	cb, err := combos.Get(ctx, id)
	if err != nil {
		return services.Combo{}, nil, err
	}
	results := tester.TestCombo(ctx, &cb, force)
	if results == nil {
		results = []gateway.ComboTestResult{}
	}
	return cb, results, nil
}

// Test answers POST /api/combos/{id}/test with one result per target:
// a small real request to each model target in order (it costs tokens);
// targets the resilience gates hold back are skipped unless "force" is true.
// A failed probe is still 200. Resilience state never changes.
func (h *CombosAPI) Test(c echo.Context) error {
	var in comboTestBody
	if c.Request().ContentLength > 0 {
		if err := decodeJSON(c, &in); err != nil {
			return err
		}
	}
	cb, results, err := runComboTest(c.Request().Context(), h.Combos, h.Tester, c.Param("id"), in.Force)
	if err != nil {
		return err
	}
	h.audit(c, "combo.test", "id", cb.ID, "force", in.Force)
	return writeAPIJSON(c, http.StatusOK, comboTestJSON{Results: results})
}

// ComboExplainer previews a combo's routing (the gateway implements it).
type ComboExplainer interface {
	Explain(c *services.Combo) (strategy string, sample bool, targets []gateway.ExplainTarget)
}

// Explain answers GET /api/combos/{id}/explain (read-only).
func (h *CombosAPI) Explain(c echo.Context) error {
	cb, err := h.Combos.Get(c.Request().Context(), c.Param("id"))
	if err != nil {
		return err
	}
	strategy, sample, targets := h.Explainer.Explain(&cb)
	if targets == nil {
		targets = []gateway.ExplainTarget{}
	}
	return writeAPIJSON(c, http.StatusOK, map[string]any{"strategy": strategy, "sample": sample, "targets": targets})
}
