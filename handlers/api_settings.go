package handlers

import (
	"context"
	"encoding/json"
	"net/http"
	"sort"
	"strconv"

	"github.com/labstack/echo/v4"

	"switchyard/services/resilience"
	"switchyard/services/settings"
)

// SettingsDocument is one settings document as the API serves it
// (settings.Document).
type SettingsDocument[T any] interface {
	Current() *settings.Snapshot[T]
	ExplainOf(snap *settings.Snapshot[T]) settings.Explain[T]
	Patch(ctx context.Context, body []byte, ifMatch string) (*settings.Snapshot[T], error)
}

// FeatureFlags lists and patches the feature flags (settings.Flags).
type FeatureFlags interface {
	List() []settings.FeatureFlag
	Patch(ctx context.Context, body []byte) ([]settings.FeatureFlag, error)
}

// SettingsAPI serves the settings documents and the feature flags
// (40-admin-api §2, §2.5, §9). The settings engine's errors reach the
// error handler as they are: a stale If-Match is 412 precondition_failed,
// an empty patch 400 validation_failed, a body that is not a JSON object
// 400 invalid_json.
type SettingsAPI struct {
	*API
	Resilience SettingsDocument[resilience.Document]
	General    SettingsDocument[settings.General]
	Flags      FeatureFlags
}

// ShowResilience answers GET /api/resilience (?explain=true for sources).
func (h *SettingsAPI) ShowResilience(c echo.Context) error { return showDocument(c, h.Resilience) }

// UpdateResilience answers PATCH /api/resilience with the full effective
// document and the new ETag.
func (h *SettingsAPI) UpdateResilience(c echo.Context) error {
	return updateDocument(h, c, h.Resilience, "settings.resilience.update")
}

// Show answers GET /api/settings (?explain=true for sources).
func (h *SettingsAPI) Show(c echo.Context) error { return showDocument(c, h.General) }

// Update answers PATCH /api/settings with the full effective
// document and the new ETag.
func (h *SettingsAPI) Update(c echo.Context) error {
	return updateDocument(h, c, h.General, "settings.general.update")
}

// showDocument answers the GET of a settings document: the effective
// document, or with ?explain=true its defaults, sources and revision.
func showDocument[T any](c echo.Context, doc SettingsDocument[T]) error {
	explain, err := explainParam(c)
	if err != nil {
		return err
	}
	snap := doc.Current()
	c.Response().Header().Set("ETag", snap.ETag())
	if explain {
		return writeAPIJSON(c, http.StatusOK, doc.ExplainOf(snap))
	}
	return writeAPIJSON(c, http.StatusOK, snap.Doc)
}

// updateDocument answers the PATCH of a settings document with the full
// effective document and the new ETag.
func updateDocument[T any](h *SettingsAPI, c echo.Context, doc SettingsDocument[T], action string) error {
	body, err := apiBody(c)
	if err != nil {
		return err
	}
	snap, err := doc.Patch(c.Request().Context(), body, c.Request().Header.Get("If-Match"))
	if err != nil {
		return err
	}
	h.audit(c, action, "revision", snap.Revision, "sections", patchKeys(body))
	c.Response().Header().Set("ETag", snap.ETag())
	return writeAPIJSON(c, http.StatusOK, snap.Doc)
}

// featureFlagsJSON is the body of GET and PATCH /api/feature-flags.
type featureFlagsJSON struct {
	Flags []settings.FeatureFlag `json:"flags"`
}

// ListFeatureFlags answers GET /api/feature-flags.
func (h *SettingsAPI) ListFeatureFlags(c echo.Context) error {
	return writeAPIJSON(c, http.StatusOK, featureFlagsJSON{Flags: h.Flags.List()})
}

// UpdateFeatureFlags answers PATCH /api/feature-flags with the list.
func (h *SettingsAPI) UpdateFeatureFlags(c echo.Context) error {
	body, err := apiBody(c)
	if err != nil {
		return err
	}
	flags, err := h.Flags.Patch(c.Request().Context(), body)
	if err != nil {
		return err
	}
	h.audit(c, "settings.flags.update", "flags", patchKeys(body))
	return writeAPIJSON(c, http.StatusOK, featureFlagsJSON{Flags: flags})
}

func explainParam(c echo.Context) (bool, error) {
	v := c.QueryParam("explain")
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, errBadQuery("explain", "must be true or false")
	}
	return b, nil
}

// patchKeys lists the top-level keys of a PATCH body for the audit line.
func patchKeys(body []byte) []string {
	var m map[string]json.RawMessage
	_ = json.Unmarshal(body, &m)
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
