package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"sort"
	"strconv"

	"github.com/labstack/echo/v4"

	"switchyard/services"
	"switchyard/services/resilience"
)

// SettingsDocuments reads and patches the settings documents and the flags
// (resilience.SettingsService).
type SettingsDocuments interface {
	ResilienceDocument
	GeneralSnapshot() *services.SettingsSnapshot[services.GeneralSettings]
	GeneralDefaults() services.GeneralSettings
	PatchGeneral(ctx context.Context, patch []byte, ifMatch string) (services.GeneralSettings, int64, error)
	Flags() []resilience.FeatureFlag
	PatchFlags(ctx context.Context, patch []byte) ([]resilience.FeatureFlag, error)
}

// SettingsAPI serves the settings documents and the feature flags
// (40-admin-api §2, §2.5, §9). The settings service's errors reach the
// error handler as they are: a stale If-Match is 412 precondition_failed,
// an empty patch 400 validation_failed, a body that is not a JSON object
// 400 invalid_json.
type SettingsAPI struct {
	*API
	Settings SettingsDocuments
}

// ShowResilience answers GET /api/resilience (?explain=true for sources).
func (h *SettingsAPI) ShowResilience(c echo.Context) error {
	explain, err := explainParam(c)
	if err != nil {
		return err
	}
	snap := h.Settings.ResilienceSnapshot()
	c.Response().Header().Set("ETag", snap.ETag())
	if explain {
		return writeAPIJSON(c, http.StatusOK, resilience.SettingsExplain[resilience.Document]{
			Settings: snap.Doc, Defaults: h.Settings.ResilienceDefaults(), Sources: snap.Sources(), Revision: snap.Revision})
	}
	return writeAPIJSON(c, http.StatusOK, snap.Doc)
}

// UpdateResilience answers PATCH /api/resilience with the full effective
// document and the new ETag.
func (h *SettingsAPI) UpdateResilience(c echo.Context) error {
	body, err := readSettingsBody(c)
	if err != nil {
		return err
	}
	doc, rev, err := h.Settings.PatchResilience(c.Request().Context(), body, c.Request().Header.Get("If-Match"))
	if err != nil {
		return err
	}
	h.audit(c, "settings.resilience.update", "revision", rev, "sections", patchKeys(body))
	c.Response().Header().Set("ETag", revisionETag(rev))
	return writeAPIJSON(c, http.StatusOK, doc)
}

// ShowSettings answers GET /api/settings (?explain=true for sources).
func (h *SettingsAPI) ShowSettings(c echo.Context) error {
	explain, err := explainParam(c)
	if err != nil {
		return err
	}
	snap := h.Settings.GeneralSnapshot()
	c.Response().Header().Set("ETag", snap.ETag())
	if explain {
		return writeAPIJSON(c, http.StatusOK, resilience.SettingsExplain[services.GeneralSettings]{
			Settings: snap.Doc, Defaults: h.Settings.GeneralDefaults(), Sources: snap.Sources(), Revision: snap.Revision})
	}
	return writeAPIJSON(c, http.StatusOK, snap.Doc)
}

// UpdateSettings answers PATCH /api/settings with the full effective
// document and the new ETag.
func (h *SettingsAPI) UpdateSettings(c echo.Context) error {
	body, err := readSettingsBody(c)
	if err != nil {
		return err
	}
	doc, rev, err := h.Settings.PatchGeneral(c.Request().Context(), body, c.Request().Header.Get("If-Match"))
	if err != nil {
		return err
	}
	h.audit(c, "settings.general.update", "revision", rev, "sections", patchKeys(body))
	c.Response().Header().Set("ETag", revisionETag(rev))
	return writeAPIJSON(c, http.StatusOK, doc)
}

// featureFlagsJSON is the body of GET and PATCH /api/feature-flags.
type featureFlagsJSON struct {
	Flags []resilience.FeatureFlag `json:"flags"`
}

// ListFeatureFlags answers GET /api/feature-flags.
func (h *SettingsAPI) ListFeatureFlags(c echo.Context) error {
	return writeAPIJSON(c, http.StatusOK, featureFlagsJSON{Flags: h.Settings.Flags()})
}

// UpdateFeatureFlags answers PATCH /api/feature-flags with the list.
func (h *SettingsAPI) UpdateFeatureFlags(c echo.Context) error {
	body, err := readSettingsBody(c)
	if err != nil {
		return err
	}
	flags, err := h.Settings.PatchFlags(c.Request().Context(), body)
	if err != nil {
		return err
	}
	h.audit(c, "settings.flags.update", "flags", patchKeys(body))
	return writeAPIJSON(c, http.StatusOK, featureFlagsJSON{Flags: flags})
}

// readSettingsBody applies the body rules of 40-admin-api §1 (JSON media
// type, at most 1 MiB); the settings service decodes strictly.
func readSettingsBody(c echo.Context) ([]byte, error) {
	r := c.Request()
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if mt != "application/json" {
		return nil, errMediaType
	}
	body, err := io.ReadAll(http.MaxBytesReader(c.Response(), r.Body, MaxAPIBody))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, errTooLarge
		}
		return nil, errInvalidJSON("the body could not be read")
	}
	return body, nil
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

func revisionETag(rev int64) string { return `"r` + strconv.FormatInt(rev, 10) + `"` }

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
