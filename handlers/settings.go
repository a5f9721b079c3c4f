package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"switchyard/services"
	"switchyard/services/human"
	"switchyard/services/resilience"
	"switchyard/services/settings"
	"switchyard/services/settings/schema"
	"switchyard/views"
)

// Settings → Resilience (50-dashboard §6.9). Every card builds a JSON patch
// of its one section and patches the resilience document, the same
// method as PATCH /api/resilience, so validation and storage are the API's.

const resilienceTitle, resilienceHref = "Resilience settings", "/settings/resilience"

// msgSettingsConflict is the toast of a save that lost a race with another writer.
const msgSettingsConflict = "These settings were changed elsewhere. The card now shows the current values."

// ResilienceDocument reads and patches the resilience settings document
// (settings.Document): its snapshot, its field table and built-in defaults.
type ResilienceDocument interface {
	Current() *settings.Snapshot[resilience.Document]
	Schema() *schema.Schema
	DefaultValue(path string) any
	Patch(ctx context.Context, body []byte, ifMatch string) (*settings.Snapshot[resilience.Document], error)
}

// LockoutCounter counts the active model lockouts (resilience.Engine).
type LockoutCounter interface {
	ActiveLockouts() int
}

// ResilienceSettings serves Settings → Resilience.
type ResilienceSettings struct {
	Layout
	Settings ResilienceDocument
	// Lockouts feeds the Model lockout card's count (nil shows none).
	Lockouts  LockoutCounter
	Catalogue Catalogue
	// Audit and Clock give each card its last save (nil: the cards show none).
	Audit services.AuditStore
	Clock services.Clock
}

// settingsData reads the current document, its sources and revision, and
// what the Model lockout and error rules cards show besides. Fields, values
// and defaults come from the document's schema and snapshot as the engine
// holds them.
func (h *ResilienceSettings) settingsData() views.SettingsData {
	snap := h.Settings.Current()
	data := views.SettingsData{Fields: map[string]views.SettingsFieldData{}, Revision: snap.Revision,
		Rules: ruleRows(snap.Doc.ProviderErrorRules), Builtin: builtinRuleRows(resilience.BuiltinRules()),
		RuleOptions: h.ruleOptions()}
	for _, f := range h.Settings.Schema().Fields() {
		data.Order = append(data.Order, f.Path)
		data.Fields[f.Path] = views.SettingsFieldData{Field: f, Value: views.FormatSettingValue(snap.Value(f.Path)),
			Default: views.FormatSettingValue(h.Settings.DefaultValue(f.Path)), Source: snap.Source(f.Path)}
	}
	if h.Lockouts != nil {
		data.ActiveLockouts = h.Lockouts.ActiveLockouts()
	}
	return data
}

// ruleOptions are the choices of the error rules editor.
func (h *ResilienceSettings) ruleOptions() views.ErrorRuleOptions {
	var providers []string
	for _, p := range h.Catalogue.Catalogue().All() {
		providers = append(providers, p.ID)
	}
	sort.Strings(providers)
	opts := views.ErrorRuleOptions{Providers: providers}
	for _, r := range resilience.RuleReasons() {
		opts.Reasons = append(opts.Reasons, string(r))
	}
	for _, s := range resilience.RuleScopes {
		opts.Scopes = append(opts.Scopes, string(s))
	}
	for _, s := range resilience.RuleLockScopes {
		opts.LockScopes = append(opts.LockScopes, string(s))
	}
	return opts
}

// ruleRows shows the stored operator rules in the editor.
func ruleRows(rules []resilience.ErrorRuleSetting) []views.ErrorRuleRowVM {
	out := make([]views.ErrorRuleRowVM, len(rules))
	for i, r := range rules {
		row := views.ErrorRuleRowVM{Index: i, ID: r.ID, Provider: r.Provider, Status: strconv.Itoa(r.Status), Match: r.Match,
			Reason: string(r.Reason), Scope: string(r.Scope), Ban: r.Ban, Enabled: r.Enabled}
		if r.Header != nil {
			row.HeaderName, row.HeaderContains = r.Header.Name, r.Header.Contains
		}
		if r.LockScope != nil {
			row.LockScope = string(*r.LockScope)
		}
		if r.CooldownMs != nil {
			row.CooldownMs = strconv.FormatInt(*r.CooldownMs, 10)
		}
		out[i] = row
	}
	return out
}

// builtinRuleRows shows the built-in rules, read-only.
func builtinRuleRows(rules []resilience.ErrorRule) []views.BuiltinRuleVM {
	out := make([]views.BuiltinRuleVM, len(rules))
	for i, r := range rules {
		b := views.BuiltinRuleVM{ID: r.ID, Provider: r.Provider, Status: strconv.Itoa(r.Status), Match: r.Match,
			Reason: string(r.Reason), Scope: string(r.Scope), LockScope: string(r.LockScope), Cooldown: "escalation"}
		if len(r.Providers) > 1 {
			b.Provider = strings.Join(r.Providers, ", ")
		}
		if r.Header != nil {
			b.Header = r.Header.Name + " contains " + r.Header.Contains
		}
		if r.CooldownMs != nil {
			b.Cooldown = human.Duration(time.Duration(*r.CooldownMs)*time.Millisecond, human.Length)
		}
		out[i] = b
	}
	return out
}

// ruleRowsFromForm reads the editor's rows, values as typed.
func ruleRowsFromForm(v url.Values) []views.ErrorRuleRowVM {
	var out []views.ErrorRuleRowVM
	for i := 0; has(v, fmt.Sprintf("providerErrorRules.%d.id", i)); i++ {
		f := func(name string) string { return v.Get(fmt.Sprintf("providerErrorRules.%d.%s", i, name)) }
		out = append(out, views.ErrorRuleRowVM{Index: i, ID: f("id"), Provider: f("provider"), Status: f("status"), Match: f("match"),
			HeaderName: f("header.name"), HeaderContains: f("header.contains"), Reason: f("reason"), Scope: f("scope"),
			LockScope: f("lockScope"), CooldownMs: f("cooldownMs"),
			Ban:     checked(v, fmt.Sprintf("providerErrorRules.%d.ban", i)),
			Enabled: checked(v, fmt.Sprintf("providerErrorRules.%d.enabled", i))})
	}
	return out
}

// formNumber passes a typed number on: blank → null, digits → the number,
// anything else as text so the service words the problem.
func formNumber(s string) any {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return n
	}
	return s
}

// rulesPatch is the providerErrorRules value of the editor's rows.
func rulesPatch(rows []views.ErrorRuleRowVM) []any {
	out := make([]any, 0, len(rows))
	for _, r := range rows {
		rule := map[string]any{"status": formNumber(r.Status), "match": r.Match, "reason": nilIfBlank(r.Reason),
			"scope": nilIfBlank(r.Scope), "lockScope": nilIfBlank(r.LockScope), "cooldownMs": formNumber(r.CooldownMs),
			"ban": r.Ban, "enabled": r.Enabled, "provider": nilIfBlank(r.Provider), "header": nil}
		if id := strings.TrimSpace(r.ID); id != "" {
			rule["id"] = id
		}
		if name, contains := strings.TrimSpace(r.HeaderName), r.HeaderContains; name != "" || contains != "" {
			rule["header"] = map[string]any{"name": name, "contains": contains}
		}
		out = append(out, rule)
	}
	return out
}

func nilIfBlank(s string) any {
	if s = strings.TrimSpace(s); s == "" {
		return nil
	}
	return s
}

// listItems splits a comma-separated list of numbers.
func listItems(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ';' || r == ' ' || r == '\t' || r == '\n' })
}

// sameSetting reports whether a typed value is the current effective one.
func sameSetting(kind schema.Kind, typed, current string) bool {
	switch kind {
	case schema.IntList:
		return strings.Join(listItems(typed), ",") == strings.Join(listItems(current), ",")
	}
	return strings.TrimSpace(typed) == current
}

// sectionPatch builds the PATCH body of one card from its form. A field
// left as it was shown, and not stored, is left out so its source (env or
// default) stays; a blank number is null (the stored value is dropped).
// shown are the values as typed, for a 422 re-render.
func sectionPatch(def views.SettingsCardDef, v url.Values, data views.SettingsData) (map[string]any, map[string]string) {
	section := map[string]any{}
	shown := map[string]string{}
	for _, path := range def.Paths(data.Order) {
		fd, ok := data.Fields[path]
		if !ok {
			continue
		}
		var val any
		var raw string
		switch fd.Field.Kind {
		case schema.Bool:
			on := checked(v, path)
			raw, val = strconv.FormatBool(on), on
		case schema.Int:
			raw = strings.TrimSpace(v.Get(path))
			val = formNumber(raw)
		case schema.IntList:
			raw = v.Get(path)
			items := listItems(raw)
			if len(items) > 0 {
				list := make([]any, len(items))
				for i, it := range items {
					list[i] = formNumber(it)
				}
				val = list
			}
		default:
			continue
		}
		shown[path] = raw
		if val != nil && sameSetting(fd.Field.Kind, raw, fd.Value) && fd.Source != schema.SourceStored {
			continue
		}
		schema.SetPath(section, strings.TrimPrefix(path, def.Key+"."), val)
	}
	return map[string]any{def.Key: section}, shown
}

// ifMatch turns the revision a card was rendered from into If-Match.
func ifMatch(revision string) string {
	n, err := strconv.ParseInt(strings.TrimSpace(revision), 10, 64)
	if err != nil {
		return ""
	}
	return settings.ETag(n)
}

// resiliencePage renders the page with every card fresh except card (when
// given), and card alone for htmx.
func (h *ResilienceSettings) resiliencePage(c echo.Context, status int, data views.SettingsData, card *views.SettingsCardVM) error {
	cards := make([]views.SettingsCardVM, 0, len(views.SettingsCardDefs))
	for _, def := range views.SettingsCardDefs {
		if card != nil && def.Section == card.Def.Section {
			cards = append(cards, *card)
			continue
		}
		cards = append(cards, views.NewSettingsCardVM(def, data, nil))
	}
	saves := h.lastSaves(c.Request().Context())
	withSaves(cards, saves)
	page := views.ResiliencePage(cards)
	fragment := page
	if card != nil {
		one := []views.SettingsCardVM{*card}
		withSaves(one, saves)
		fragment = views.SettingsCard(one[0])
	}
	return h.pageParts(c, status, resilienceTitle, resilienceHref, fragment, page)
}

// findCard is the card of the :section parameter.
func findCard(c echo.Context) (views.SettingsCardDef, error) {
	def, ok := views.FindSettingsCard(c.Param("section"))
	if !ok {
		return def, services.ErrNotFound
	}
	return def, nil
}

// Show shows every card.
func (h *ResilienceSettings) Show(c echo.Context) error {
	return h.resiliencePage(c, http.StatusOK, h.settingsData(), nil)
}

// Card shows one card: its current values, or with ?defaults=1
// the built-in defaults, unsaved ("Restore defaults").
func (h *ResilienceSettings) Card(c echo.Context) error {
	def, err := findCard(c)
	if err != nil {
		return err
	}
	data := h.settingsData()
	var card views.SettingsCardVM
	if c.QueryParam("defaults") != "" {
		card = views.NewSettingsCardVM(def, data, views.DefaultValues(def, data))
		if card.Rules != nil {
			card.Rules.Rows = nil
		}
		card.DefaultsLoaded = true
	} else {
		card = views.NewSettingsCardVM(def, data, nil)
	}
	return h.resiliencePage(c, http.StatusOK, data, &card)
}

// Update saves one card (a PATCH of the resilience document, twin
// PATCH /api/resilience with only that section, If-Match from the card).
func (h *ResilienceSettings) Update(c echo.Context) error {
	def, err := findCard(c)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	v := form(c)
	data := h.settingsData()
	var patch map[string]any
	var shown map[string]string
	var rows []views.ErrorRuleRowVM
	if def.Section == views.SectionErrorRules {
		rows = ruleRowsFromForm(v)
		patch = map[string]any{def.Key: rulesPatch(rows)}
	} else {
		patch, shown = sectionPatch(def, v, data)
	}
	body, err := json.Marshal(patch)
	if err != nil {
		return err
	}
	_, err = h.Settings.Patch(ctx, body, ifMatch(v.Get("revision")))
	if verr, ok := validation(err); ok {
		card := views.NewSettingsCardVM(def, data, shown)
		if card.Rules != nil {
			card.Rules.Rows = rows
		}
		card.Revision = revisionOf(v.Get("revision"), data.Revision)
		card.Errors = views.SettingsErrors(def, data, verr.Fields, shown)
		return h.resiliencePage(c, http.StatusUnprocessableEntity, data, &card)
	}
	if errors.Is(err, settings.ErrPreconditionFailed) {
		// Another writer saved first: the card reloads itself with the
		// current values (htmx does not swap a 409).
		trigger(c, views.EventSettingsStalePrefix+def.Section, nil)
		toast(c, "warning", msgSettingsConflict)
		card := views.NewSettingsCardVM(def, data, nil)
		return h.resiliencePage(c, http.StatusConflict, data, &card)
	}
	if err != nil {
		return err
	}
	trigger(c, views.EventSettingsSaved, map[string]string{"section": def.Section})
	toast(c, "success", def.Title+" saved.")
	return afterMutation(c, resilienceHref+"#"+views.RowID(views.RowSettingsCard, def.Section), func() error {
		fresh := h.settingsData()
		card := views.NewSettingsCardVM(def, fresh, nil)
		card.Saved = true
		if h.Clock != nil {
			// This save is not in the audit log yet (it is written in batches).
			kind, name := services.AuditActorSession, ""
			if k, ok := APIKeyOf(c); ok {
				kind, name = services.AuditActorKey, k.Name
			}
			saved := savedBy(h.Clock.Now(), kind, name, h.Clock.Now())
			card.LastSaved = &saved
		}
		for _, other := range views.SettingsCardDefs {
			if other.Section != def.Section {
				card.OOBRevisions = append(card.OOBRevisions, other.Section)
			}
		}
		return render(c, http.StatusOK, views.SettingsCard(card), nil)
	})
}

// revisionOf keeps the revision the form was rendered from, so a 422
// re-render does not silently adopt a newer one.
func revisionOf(s string, current int64) int64 {
	if n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64); err == nil {
		return n
	}
	return current
}

// RulesBuilder re-renders the error rules card after an edit (add,
// remove, move a row); nothing is saved.
func (h *ResilienceSettings) RulesBuilder(c echo.Context) error {
	def, _ := views.FindSettingsCard(views.SectionErrorRules)
	v := form(c)
	data := h.settingsData()
	card := views.NewSettingsCardVM(def, data, nil)
	card.Revision = revisionOf(v.Get("revision"), data.Revision)
	rows, focus := views.ApplyRuleOp(ruleRowsFromForm(v), v.Get("op"), data.RuleOptions)
	verb, _, _ := strings.Cut(v.Get("op"), ":")
	card.Rules.Rows = rows
	if focus >= 0 {
		card.Rules.AutofocusID = views.RuleFocusID(verb, focus)
	}
	card.Unsaved = true
	return h.resiliencePage(c, http.StatusOK, data, &card)
}
