package handlers

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"switchyard/services"
	"switchyard/views"
)

// The last save of each Settings → Resilience card. The settings document
// keeps one revision for all sections, so the time of a section's last
// change comes from the audit log: the newest entry whose changes touch a
// field the card edits, written by the card itself or by PATCH /api/resilience.

// settingsAuditRoutes are the route prefixes whose entries can change the
// resilience document.
var settingsAuditRoutes = []string{"/settings/resilience", "/api/resilience"}

// settingsAuditScan bounds how many entries per route the scan reads.
const settingsAuditScan = 500

// lastSaves maps each card section to its last save; nil when there is no
// audit log to read (the cards then show nothing). A section without an
// entry maps to a SettingsSaveVM without a time.
func (h *ResilienceSettings) lastSaves(ctx context.Context) map[string]views.SettingsSaveVM {
	if h.Audit == nil || h.Clock == nil {
		return nil
	}
	now := h.Clock.Now()
	newest := map[string]services.AuditEntry{}
	for _, route := range settingsAuditRoutes {
		page, err := h.Audit.ListAuditEntries(ctx, services.AuditQuery{Route: route, Limit: settingsAuditScan})
		if err != nil {
			return nil // the cards do without; the page still renders
		}
		for _, e := range page.Items {
			for _, def := range views.SettingsCardDefs {
				if !touchesCard(def, e.Changes) {
					continue
				}
				if cur, ok := newest[def.Section]; !ok || e.CreatedAt.After(cur.CreatedAt) {
					newest[def.Section] = e
				}
			}
		}
	}
	out := make(map[string]views.SettingsSaveVM, len(views.SettingsCardDefs))
	for _, def := range views.SettingsCardDefs {
		e, ok := newest[def.Section]
		if !ok {
			out[def.Section] = views.SettingsSaveVM{}
			continue
		}
		out[def.Section] = savedBy(e.CreatedAt, e.ActorKind, e.ActorName, now)
	}
	return out
}

// savedBy describes a save at t by an actor.
func savedBy(t time.Time, actorKind, keyName string, now time.Time) views.SettingsSaveVM {
	s := views.SettingsSaveVM{At: views.NewTimeVM(&t, now)}
	if actorKind == services.AuditActorKey {
		s.Key = keyName
	}
	return s
}

// touchesCard reports whether any change is to a field the card edits.
func touchesCard(def views.SettingsCardDef, changes []services.AuditChange) bool {
	for _, c := range changes {
		if c.Path != def.Key && !strings.HasPrefix(c.Path, def.Key+".") {
			continue
		}
		omitted := false
		for _, o := range def.Omit {
			if c.Path == o || strings.HasPrefix(c.Path, o+".") {
				omitted = true
			}
		}
		if !omitted {
			return true
		}
	}
	return false
}

// withSaves sets each card's last save from saves (nil leaves them unset).
func withSaves(cards []views.SettingsCardVM, saves map[string]views.SettingsSaveVM) {
	if saves == nil {
		return
	}
	for i := range cards {
		if s, ok := saves[cards[i].Def.Section]; ok {
			cards[i].LastSaved = &s
		}
	}
}

// LockoutPreview re-renders the Model lockout card's escalation preview from
// the values being typed (POST /settings/resilience/model-lockout/preview,
// 50-dashboard §6.9); nothing is saved. A blank number previews its default,
// as saving it would.
func (h *ResilienceSettings) LockoutPreview(c echo.Context) error {
	def, _ := views.FindSettingsCard(views.SectionModelLockout)
	data := h.settingsData()
	_, shown := sectionPatch(def, form(c), data)
	for path, v := range shown {
		if strings.TrimSpace(v) == "" {
			shown[path] = data.Fields[path].Default
		}
	}
	return render(c, http.StatusOK, views.ModelLockoutPreview(views.NewSettingsCardVM(def, data, shown)), nil)
}
