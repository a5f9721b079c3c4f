package handlers

import (
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"sort"
	"strconv"

	"github.com/labstack/echo/v4"

	"switchyard/services"
	"switchyard/services/resilience"
)

// SettingsAPI serves the settings documents and the feature flags
// (40-admin-api §2, §2.5, §9).
type SettingsAPI struct {
	Settings *resilience.SettingsService
	// Log receives one audit line per successful PATCH; nil discards them.
	Log *slog.Logger
}

// GetResilience answers GET /api/resilience (?explain=true for sources).
func (h *SettingsAPI) GetResilience(c echo.Context) error {
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

// PatchResilience answers PATCH /api/resilience with the full effective
// document and the new ETag.
func (h *SettingsAPI) PatchResilience(c echo.Context) error {
	body, err := readSettingsBody(c)
	if err != nil {
		return err
	}
	doc, rev, err := h.Settings.PatchResilience(c.Request().Context(), body, c.Request().Header.Get("If-Match"))
	if err != nil {
		return settingsError(err)
	}
	h.audit(c, "settings.resilience.update", "revision", rev, "sections", patchKeys(body))
	c.Response().Header().Set("ETag", revisionETag(rev))
	return writeAPIJSON(c, http.StatusOK, doc)
}

// GetSettings answers GET /api/settings (?explain=true for sources).
func (h *SettingsAPI) GetSettings(c echo.Context) error {
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

// PatchSettings answers PATCH /api/settings with the full effective
// document and the new ETag.
func (h *SettingsAPI) PatchSettings(c echo.Context) error {
	body, err := readSettingsBody(c)
	if err != nil {
		return err
	}
	doc, rev, err := h.Settings.PatchGeneral(c.Request().Context(), body, c.Request().Header.Get("If-Match"))
	if err != nil {
		return settingsError(err)
	}
	h.audit(c, "settings.general.update", "revision", rev, "sections", patchKeys(body))
	c.Response().Header().Set("ETag", revisionETag(rev))
	return writeAPIJSON(c, http.StatusOK, doc)
}

// featureFlagsJSON is the body of GET and PATCH /api/feature-flags.
type featureFlagsJSON struct {
	Flags []resilience.FeatureFlag `json:"flags"`
}

// GetFeatureFlags answers GET /api/feature-flags.
func (h *SettingsAPI) GetFeatureFlags(c echo.Context) error {
	return writeAPIJSON(c, http.StatusOK, featureFlagsJSON{Flags: h.Settings.Flags()})
}

// PatchFeatureFlags answers PATCH /api/feature-flags with the list.
func (h *SettingsAPI) PatchFeatureFlags(c echo.Context) error {
	body, err := readSettingsBody(c)
	if err != nil {
		return err
	}
	flags, err := h.Settings.PatchFlags(c.Request().Context(), body)
	if err != nil {
		return settingsError(err)
	}
	h.audit(c, "settings.flags.update", "flags", patchKeys(body))
	return writeAPIJSON(c, http.StatusOK, featureFlagsJSON{Flags: flags})
}

func (h *SettingsAPI) audit(c echo.Context, action string, attrs ...any) {
	if h.Log == nil {
		return
	}
	h.Log.Info("audit", append([]any{"actor", Actor(c), "action", action}, attrs...)...)
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

// settingsError maps the settings service's request-level errors to their
// API answers; validation errors pass through (400 validation_failed).
func settingsError(err error) error {
	var jerr *services.SettingsJSONError
	switch {
	case errors.Is(err, services.ErrPreconditionFailed):
		return &RequestError{Status: http.StatusPreconditionFailed, Code: "precondition_failed",
			Message: "The settings changed since you read them (If-Match is stale). GET them again and retry with the new ETag."}
	case errors.Is(err, services.ErrEmptySettingsPatch):
		return &RequestError{Status: http.StatusBadRequest, Code: "validation_failed", Message: "no settings to update"}
	case errors.As(err, &jerr):
		return errInvalidJSON(jerr.Detail)
	}
	return err
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
