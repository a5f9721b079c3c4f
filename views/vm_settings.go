package views

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/a-h/templ"

	"switchyard/services/human"
	"switchyard/services/settings/schema"
)

// ---------------------------------------------------------------------------
// Settings → Resilience (50-dashboard §6.9): one card per section of the
// resilience settings document. Titles, texts, labels and legends are
// presentation and live here; which fields a card shows, in which order,
// and every default, range, env name, value and source come from the
// document's schema and snapshot through SettingsData.

// SettingsCardDef is the presentation of one card: its section, the
// document key whose fields it edits, its texts, and the fields of the
// section that another page edits. Which fields the card shows, in which
// order and groups, comes from the document's schema (SettingsData.Order).
type SettingsCardDef struct {
	Section string // URL segment, e.g. "model-lockout"
	Key     string // top-level document key, e.g. "modelLockout"
	Title   string
	Intro   string
	Notes   []string
	Omit    []string // fields of the section shown elsewhere
}

// SettingsGroupDef is a set of fields shown together (a fieldset when it has
// a legend, e.g. one auth class of a per-profile section).
type SettingsGroupDef struct {
	Legend string
	Paths  []string
}

// groupLegends name the sub-objects of a section that a card shows as a
// fieldset.
var groupLegends = map[string]string{
	"oauth":              "OAuth connections",
	"apikey":             "API-key connections",
	"local":              "Local connections",
	"throughputWatchdog": "Throughput watchdog",
}

// Groups lays the card's fields out in schema order: the section's own
// fields first, then one fieldset per sub-object (an auth class, the
// throughput watchdog) under its legend.
func (d SettingsCardDef) Groups(order []string) []SettingsGroupDef {
	var out []SettingsGroupDef
	at := map[string]int{}
	for _, path := range order {
		rest, ok := strings.CutPrefix(path, d.Key+".")
		if !ok || containsString(d.Omit, path) {
			continue
		}
		sub, _, nested := strings.Cut(rest, ".")
		if !nested {
			sub = ""
		}
		i, seen := at[sub]
		if !seen {
			i = len(out)
			at[sub] = i
			out = append(out, SettingsGroupDef{Legend: groupLegends[sub]})
		}
		out[i].Paths = append(out[i].Paths, path)
	}
	return out
}

// Paths lists every field the card edits, in display order.
func (d SettingsCardDef) Paths(order []string) []string {
	var out []string
	for _, g := range d.Groups(order) {
		out = append(out, g.Paths...)
	}
	return out
}

// SettingFieldTestID is the data-testid of a card field's wrapper, by path.
func SettingFieldTestID(path string) string { return "field-" + fieldAnchor(path) }

// SettingSourceTestID is the data-testid of a card field's source text, by path.
func SettingSourceTestID(path string) string { return "source-" + fieldAnchor(path) }

// SettingsCardTestID is the data-testid of a card ("model-lockout-card").
func SettingsCardTestID(section string) string { return section + "-card" }

// SettingsCardDefs are the cards of Settings → Resilience in page order.
var SettingsCardDefs = []SettingsCardDef{
	{Section: SectionRequestQueue, Key: "requestQueue", Title: "Request queue",
		Intro: "Paces requests per connection: a rate limit, a minimum gap, a concurrency cap and a bounded queue in front of each protected connection.",
		Notes: []string{"Protection is switched on per connection (Connections → Edit → Rate-limit protection); these values apply to every protected connection that does not override them."}},
	{Section: SectionConnectionCooldown, Key: "connectionCooldown", Title: "Connection cooldown",
		Intro: "Takes one connection out of rotation for a while after a connection-scoped failure, doubling the pause on each repeat up to a cap.",
		Notes: []string{"An upstream Retry-After hint always wins over this ladder (capped by the longest honoured hint below)."}},
	{Section: SectionProviderBreaker, Key: "providerBreaker", Title: "Provider breaker",
		Intro: "Counts failures per provider; at degraded-at the provider is tried last, at open-at it is skipped until the reset timeout lets a few trial requests through."},
	{Section: SectionProviderCooldown, Key: "providerCooldown", Title: "Provider cooldown window gate",
		Intro: "Holds a whole provider back from combo requests after too many failures within a time window."},
	{Section: SectionWaitForCooldown, Key: "waitForCooldown", Title: "Wait for cooldown",
		Intro: "A request for a single model waits for a short connection cooldown to end instead of failing at once."},
	{Section: SectionComboCooldownWait, Key: "comboCooldownWait", Title: "Combo cooldown wait",
		Intro: "A combo request whose every target is cooling waits for the soonest one instead of failing at once."},
	{Section: SectionConnectionConcurrency, Key: "connectionConcurrency", Title: "Connection concurrency",
		Intro: "Limits how many requests run on one connection at a time; the limit itself (max_concurrent) is set per connection on the Connections page."},
	{Section: SectionSessionAffinity, Key: "sessionAffinity", Title: "Session affinity",
		Intro: "Keeps the requests of one client session on the connection that served it last, so provider prompt caches stay warm.",
		Notes: []string{"Sessions are recognised by the X-Switchyard-Session, x-codex-session-id, session-id (Codex), X-Session-Id and x-claude-code-session-id request headers."}},
	{Section: SectionStreamRecovery, Key: "streamRecovery", Title: "Stream recovery and throughput watchdog",
		Intro: "Reopens a stream that fails before its first byte reached the client, and aborts upstream streams that keep sending events but too little useful text."},
	{Section: SectionEmergencyFallback, Key: "emergencyFallback", Title: "Emergency fallback",
		Intro: "When every target of a request is exhausted, Switchyard makes one last attempt on a fallback model; responses say so in X-Switchyard-Warning.",
		Notes: []string{"The switch and the fallback model are on Settings → Feature flags."},
		Omit:  []string{"emergencyFallback.enabled", "emergencyFallback.target"}},
	{Section: SectionModelLockout, Key: "modelLockout", Title: "Model lockout",
		Intro: "Locks one model on one connection after a model-scoped failure, so the connection keeps serving its other models. When off, such a failure only moves the request on; neither the model nor the connection is cooled."},
	{Section: SectionErrorRules, Key: "providerErrorRules", Title: "Provider error rules",
		Intro: "Your own rules for classifying upstream errors, consulted in order before the built-in ones; the first match wins."},
}

// FindSettingsCard returns the card of a section.
func FindSettingsCard(section string) (SettingsCardDef, bool) {
	for _, d := range SettingsCardDefs {
		if d.Section == section {
			return d, true
		}
	}
	return SettingsCardDef{}, false
}

// settingLabel is how a field is named on its card.
type settingLabel struct {
	Label string
	Unit  string // "ms" for durations
	Note  string // first sentence of the help text
}

// settingLabels name the fields; per-profile paths use "<p>" for the profile.
var settingLabels = map[string]settingLabel{
	"requestQueue.autoEnableApiKeyProviders": {Label: "Protect API-key connections automatically", Note: "Connections whose protection is left on Inherit are paced when they use an API key."},
	"requestQueue.requestsPerMinute":         {Label: "Requests per minute"},
	"requestQueue.minTimeBetweenRequestsMs":  {Label: "Minimum time between requests", Unit: "ms"},
	"requestQueue.concurrentRequests":        {Label: "Concurrent requests"},
	"requestQueue.maxWaitMs":                 {Label: "Execution timeout", Unit: "ms", Note: "From dispatch to the upstream's response headers (first byte for streams); time spent queued does not count."},
	"requestQueue.queueWaitMs":               {Label: "Queue wait", Unit: "ms", Note: "0 = no limit."},
	"requestQueue.maxQueueDepth":             {Label: "Maximum queue depth", Note: "0 = unbounded."},
	"connectionCooldown.maxRetryHintMs":      {Label: "Longest honoured retry hint", Unit: "ms", Note: "Caps an upstream Retry-After or reset hint."},
	"connectionCooldown.<p>.baseCooldownMs":  {Label: "Base cooldown", Unit: "ms"},
	"connectionCooldown.<p>.maxBackoffSteps": {Label: "Maximum backoff steps"},
	"connectionCooldown.<p>.maxCooldownMs":   {Label: "Maximum cooldown", Unit: "ms"},
	"providerBreaker.<p>.failureThreshold":   {Label: "Open at (failures)"},
	"providerBreaker.<p>.degradationThreshold": {Label: "Degraded at (failures)",
		Note: "Must be lower than open-at."},
	"providerBreaker.<p>.resetTimeoutMs":                        {Label: "Reset timeout", Unit: "ms"},
	"providerBreaker.<p>.halfOpenRequests":                      {Label: "Trial requests when half-open"},
	"providerBreaker.<p>.escalateAfterCycles":                   {Label: "Escalate after cycles"},
	"providerBreaker.<p>.maxBackoffMultiplier":                  {Label: "Maximum backoff multiplier"},
	"providerCooldown.enabled":                                  {Label: "Hold providers back after repeated failures"},
	"providerCooldown.minRetryCooldownMs":                       {Label: "Minimum retry cooldown", Unit: "ms"},
	"providerCooldown.maxRetryCooldownMs":                       {Label: "Maximum retry cooldown", Unit: "ms"},
	"providerCooldown.<p>.failureThreshold":                     {Label: "Failures within the window"},
	"providerCooldown.<p>.failureWindowMs":                      {Label: "Failure window", Unit: "ms"},
	"providerCooldown.<p>.cooldownMs":                           {Label: "Cooldown", Unit: "ms"},
	"waitForCooldown.enabled":                                   {Label: "Wait for short cooldowns"},
	"waitForCooldown.maxRetries":                                {Label: "Maximum retries"},
	"waitForCooldown.maxRetryWaitMs":                            {Label: "Longest single wait", Unit: "ms"},
	"waitForCooldown.budgetMs":                                  {Label: "Total wait budget", Unit: "ms"},
	"comboCooldownWait.enabled":                                 {Label: "Wait for the soonest target"},
	"comboCooldownWait.maxWaitMs":                               {Label: "Longest single wait", Unit: "ms"},
	"comboCooldownWait.maxAttempts":                             {Label: "Maximum attempts"},
	"comboCooldownWait.budgetMs":                                {Label: "Total wait budget", Unit: "ms"},
	"connectionConcurrency.enabled":                             {Label: "Gate requests by connection slots", Note: "Off = no slot gating at all."},
	"connectionConcurrency.failOpen":                            {Label: "Fail open", Note: "When the slot queue is full or the wait times out, dispatch anyway instead of failing."},
	"connectionConcurrency.slotWaitMs":                          {Label: "Slot wait timeout", Unit: "ms"},
	"connectionConcurrency.queueDepth":                          {Label: "Slot queue depth", Note: "0 = never queue."},
	"sessionAffinity.ttlMs":                                     {Label: "Pin lifetime", Unit: "ms", Note: "0 = off."},
	"streamRecovery.earlyRetryMax":                              {Label: "Reopens before the first byte", Note: "Same-connection retries of a stream that failed before anything reached the client."},
	"streamRecovery.throughputWatchdog.enabled":                 {Label: "Abort streams that stall"},
	"streamRecovery.throughputWatchdog.warmupMs":                {Label: "Warm-up", Unit: "ms"},
	"streamRecovery.throughputWatchdog.windowMs":                {Label: "Measuring window", Unit: "ms"},
	"streamRecovery.throughputWatchdog.minUsefulBytesPerSecond": {Label: "Minimum useful bytes per second"},
	"streamRecovery.throughputWatchdog.minUsefulBytes":          {Label: "Minimum useful bytes per window"},
	"emergencyFallback.skipForToolRequests":                     {Label: "Skip requests that use tools"},
	"emergencyFallback.maxOutputTokens":                         {Label: "Maximum output tokens"},
	"modelLockout.enabled":                                      {Label: "Lock models after model-scoped failures"},
	"modelLockout.errorCodes":                                   {Label: "Upstream statuses that count", Note: "Comma-separated."},
	"modelLockout.baseCooldownMs":                               {Label: "Base cooldown", Unit: "ms"},
	"modelLockout.maxCooldownMs":                                {Label: "Maximum cooldown", Unit: "ms"},
	"modelLockout.maxBackoffSteps":                              {Label: "Maximum backoff steps"},
	"modelLockout.useExponentialBackoff":                        {Label: "Double the lockout on each repeat failure"},
}

// labelOf names a field; a field of a fieldset (an auth-class profile) is
// named by its "<p>" entry.
func labelOf(path string) settingLabel {
	if l, ok := settingLabels[path]; ok {
		return l
	}
	if parts := strings.Split(path, "."); len(parts) == 3 && groupLegends[parts[1]] != "" {
		if l, ok := settingLabels[parts[0]+".<p>."+parts[2]]; ok {
			return l
		}
	}
	return settingLabel{Label: path[strings.LastIndexByte(path, '.')+1:]}
}

// SettingsFieldData is one field of the settings document as the service
// reports it: its schema entry, effective value, built-in default and
// source, values formatted as a form control holds them.
type SettingsFieldData struct {
	Field   schema.Field
	Value   string // "120000", "true", "403, 404"
	Default string
	Source  string // default, env, stored, derived
}

// SettingsData is what the resilience cards are built from.
type SettingsData struct {
	Fields map[string]SettingsFieldData
	// Order lists the document's fields in schema order (the cards' layout).
	Order    []string
	Revision int64
	// ActiveLockouts counts model lockouts in force (the Model lockout card links to Runtime).
	ActiveLockouts int
	// Rules are the stored operator error rules; RuleOptions the choices of the editor.
	Rules       []ErrorRuleRowVM
	Builtin     []BuiltinRuleVM
	RuleOptions ErrorRuleOptions
}

// FormatSettingValue renders a canonical settings value as a form control
// holds it: numbers as digits, booleans as true/false, lists comma-separated.
func FormatSettingValue(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case bool:
		return strconv.FormatBool(x)
	case string:
		return x
	case int64:
		return strconv.FormatInt(x, 10)
	case int:
		return strconv.Itoa(x)
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	case []int64:
		parts := make([]string, len(x))
		for i, n := range x {
			parts[i] = strconv.FormatInt(n, 10)
		}
		return strings.Join(parts, ", ")
	case []any:
		parts := make([]string, len(x))
		for i, n := range x {
			parts[i] = FormatSettingValue(n)
		}
		return strings.Join(parts, ", ")
	case fmt.Stringer:
		return x.String()
	}
	return fmt.Sprint(v)
}

// SettingsCardVM is one card, ready to render.
type SettingsCardVM struct {
	Def      SettingsCardDef
	Groups   []SettingsGroupVM
	Errors   FieldErrors
	Revision int64
	// Saved shows the "Saved" line; DefaultsLoaded the note of Restore defaults;
	// Unsaved the note of an edited error-rules table.
	Saved          bool
	DefaultsLoaded bool
	Unsaved        bool
	ActiveLockouts int
	Rules          *ErrorRulesVM // the error-rules card only
	// OOBRevisions are the other cards whose revision input is refreshed out
	// of band after a save (the document revision is shared).
	OOBRevisions []string
	// LastSaved is the card's last saved change (nil: not known, shows
	// nothing; At nil: none in the audit log).
	LastSaved *SettingsSaveVM
}

// SettingsGroupVM is a group of fields.
type SettingsGroupVM struct {
	Legend string
	Fields []SettingsFieldVM
}

// SettingsFieldVM is one control of a card.
type SettingsFieldVM struct {
	Path    string // form name and error key
	Label   string
	Unit    string
	Kind    schema.Kind
	Value   string
	Help    string
	Source  string
	Changed bool // differs from the built-in default
}

// On reads a switch value.
func (f SettingsFieldVM) On() bool { return f.Value == "true" || f.Value == "on" }

// IsBool reports a switch.
func (f SettingsFieldVM) IsBool() bool { return f.Kind == schema.Bool }

// ID is the control's element id.
func (f SettingsFieldVM) ID() string { return fieldAnchor(f.Path) }

// NewSettingsCardVM builds a card from the service's data. shown overrides
// the displayed value of a field (the submitted form on 422, the defaults
// after Restore defaults); nil shows the effective values.
func NewSettingsCardVM(def SettingsCardDef, data SettingsData, shown map[string]string) SettingsCardVM {
	vm := SettingsCardVM{Def: def, Revision: data.Revision, Errors: FieldErrors{}, ActiveLockouts: data.ActiveLockouts}
	for _, g := range def.Groups(data.Order) {
		gv := SettingsGroupVM{Legend: g.Legend}
		for _, path := range g.Paths {
			fd, ok := data.Fields[path]
			if !ok {
				continue
			}
			lbl := labelOf(path)
			value := fd.Value
			if s, ok := shown[path]; ok {
				value = s
			}
			gv.Fields = append(gv.Fields, SettingsFieldVM{Path: path, Label: lbl.Label, Unit: lbl.Unit, Kind: fd.Field.Kind,
				Value: value, Help: settingHelp(fd, lbl), Source: fd.Source, Changed: normaliseShown(value) != normaliseShown(fd.Default)})
		}
		vm.Groups = append(vm.Groups, gv)
	}
	if def.Section == SectionErrorRules {
		vm.Rules = &ErrorRulesVM{Rows: data.Rules, Builtin: data.Builtin, Options: data.RuleOptions}
	}
	return vm
}

// DefaultValues are the built-in defaults of a card's fields, as Restore
// defaults shows them.
func DefaultValues(def SettingsCardDef, data SettingsData) map[string]string {
	out := map[string]string{}
	for _, p := range def.Paths(data.Order) {
		if fd, ok := data.Fields[p]; ok {
			out[p] = fd.Default
		}
	}
	return out
}

// normaliseShown makes "on"/"true" and list spacing compare equal.
func normaliseShown(s string) string {
	s = strings.TrimSpace(s)
	switch s {
	case "on":
		return "true"
	case "", "off":
		return s
	}
	if strings.Contains(s, ",") {
		parts := strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' })
		return strings.Join(parts, ",")
	}
	return s
}

// settingHelp is the help text: note, default, range, env name.
func settingHelp(fd SettingsFieldData, lbl settingLabel) string {
	var b []string
	if lbl.Note != "" {
		b = append(b, lbl.Note)
	}
	f := fd.Field
	unit := ""
	if lbl.Unit != "" {
		unit = " " + lbl.Unit
	}
	switch f.Kind {
	case schema.Bool:
		def := "off"
		if fd.Default == "true" {
			def = "on"
		}
		b = append(b, "Default "+def+".")
	case schema.Int:
		def := fd.Default + unit
		if lbl.Unit == "ms" {
			if n, err := strconv.ParseInt(fd.Default, 10, 64); err == nil && n >= 1000 {
				def += " (" + human.Duration(millis(n), human.Length) + ")"
			}
		}
		b = append(b, fmt.Sprintf("Default %s; %s–%s%s. Leave blank for the default.", def,
			strconv.FormatInt(f.Min, 10), strconv.FormatInt(f.Max, 10), unit))
	case schema.IntList:
		b = append(b, fmt.Sprintf("Default %s; each %d–%d, at most %d.", fd.Default, f.Min, f.Max, f.MaxItems))
	}
	if f.Env != "" {
		b = append(b, "Environment variable "+f.Env+".")
	}
	return strings.Join(b, " ")
}

// SourceText names where a value comes from.
func SourceText(src string) string {
	switch src {
	case schema.SourceEnv:
		return "environment"
	case schema.SourceStored:
		return "saved"
	case schema.SourceDerived:
		return "derived"
	}
	return "default"
}

// Focus is the field that gets autofocus: the first invalid one in display order.
func (vm SettingsCardVM) Focus() string {
	var order []string
	for _, g := range vm.Groups {
		for _, f := range g.Fields {
			order = append(order, f.Path)
		}
	}
	if vm.Rules != nil {
		for _, r := range vm.Rules.Rows {
			for _, f := range ruleFields {
				order = append(order, r.Field(f))
			}
		}
	}
	return firstInvalid(order, vm.Errors)
}

// CardID is the card's element id.
func (vm SettingsCardVM) CardID() string { return RowID(RowSettingsCard, vm.Def.Section) }

// URL is where the card posts.
func (vm SettingsCardVM) URL() string { return "/settings/resilience/" + vm.Def.Section }

// SummaryItem is one line of a card's error summary.
type SummaryItem struct {
	Anchor string
	Text   string
}

// Summary lists the card's errors in display order, each prefixed with its
// group ("API-key connections: …") so a link out of context still reads well.
func (vm SettingsCardVM) Summary() []SummaryItem {
	var out []SummaryItem
	seen := map[string]bool{}
	for _, g := range vm.Groups {
		for _, f := range g.Fields {
			if msg, ok := vm.Errors[f.Path]; ok {
				text := msg
				if g.Legend != "" {
					text = g.Legend + ": " + msg
				}
				out = append(out, SummaryItem{Anchor: fieldAnchor(f.Path), Text: text})
				seen[f.Path] = true
			}
		}
	}
	for _, k := range sortedKeys(vm.Errors) {
		if !seen[k] {
			out = append(out, SummaryItem{Anchor: fieldAnchor(k), Text: vm.Errors[k]})
		}
	}
	return out
}

// SettingsErrors turns the service's field problems of a card's PATCH into
// the sentences of 50-dashboard §6.9, keyed by the control they belong to.
// shown are the submitted values (to tell too many status codes from bad ones).
func SettingsErrors(def SettingsCardDef, data SettingsData, fields map[string]string, shown map[string]string) FieldErrors {
	out := FieldErrors{}
	paths := def.Paths(data.Order)
	owner := func(key string) string {
		for _, p := range paths {
			if key == p || strings.HasPrefix(key, p+".") {
				return p
			}
		}
		return key
	}
	for _, key := range sortedKeys(fields) {
		msg := fields[key]
		target := owner(key)
		if def.Section == SectionErrorRules {
			target, msg = ruleError(key, msg)
		} else {
			msg = settingMessage(target, msg, shown[target])
		}
		if _, dup := out[target]; !dup {
			out[target] = msg
		}
	}
	return out
}

var (
	reRange      = regexp.MustCompile(`^must be between (-?\d+) and (-?\d+)$`)
	reAtLeast    = regexp.MustCompile(`^must be at least (\w+) \((-?\d+)\)`)
	reNotGreater = regexp.MustCompile(`^must not be greater than (\w+) \((-?\d+)\)`)
	reNeedsAtLst = regexp.MustCompile(`^needs (\w+) of at least (\w+) \((-?\d+)\)`)
	reLower      = regexp.MustCompile(`^must be lower than failureThreshold \((\d+)\)`)
	reHigher     = regexp.MustCompile(`^must be higher than degradationThreshold \((\d+)\)`)
)

// settingMessage words one problem of a resilience field.
func settingMessage(path, msg, shown string) string {
	last := path[strings.LastIndexByte(path, '.')+1:]
	if last == "errorCodes" {
		n := len(strings.FieldsFunc(shown, func(r rune) bool { return r == ',' || r == ' ' || r == ';' }))
		switch {
		case n > 20:
			return "Use at most 20 status codes."
		case n == 0:
			return "Enter at least one status code, such as 429."
		}
		return "Status codes must be numbers from 400 to 599, separated by commas."
	}
	switch {
	case msg == "must be a whole number":
		return "Enter a whole number."
	case msg == "must be true or false":
		return "Choose one of the options."
	case reRange.MatchString(msg):
		return sentence(msg)
	case strings.Contains(msg, "of at least 1") || strings.HasPrefix(msg, "must be at least 1 while"):
		return "Set retries and wait above 0, or switch this off."
	case msg == "must be 1 when failureThreshold is 1":
		return "Degraded-at must be 1 when open-at is 1."
	}
	if m := reLower.FindStringSubmatch(msg); m != nil {
		return "Degraded-at must be lower than open-at (" + m[1] + ")."
	}
	if m := reHigher.FindStringSubmatch(msg); m != nil {
		return "Open-at must be higher than degraded-at (" + m[1] + ")."
	}
	if m := reNeedsAtLst.FindStringSubmatch(msg); m != nil && m[1] == "budgetMs" {
		return "The budget must be at least one wait (" + m[3] + " ms)."
	}
	if m := reAtLeast.FindStringSubmatch(msg); m != nil {
		switch {
		case m[1] == "baseCooldownMs":
			return "The maximum cooldown must be at least the base cooldown (" + m[2] + " ms)."
		case m[1] == "minRetryCooldownMs":
			return "The maximum retry cooldown must be at least the minimum (" + m[2] + " ms)."
		case last == "budgetMs":
			return "The budget must be at least one wait (" + m[2] + " ms)."
		}
	}
	if m := reNotGreater.FindStringSubmatch(msg); m != nil {
		switch m[1] {
		case "maxCooldownMs":
			return "The base cooldown must not be greater than the maximum cooldown (" + m[2] + " ms)."
		case "maxRetryCooldownMs":
			return "The minimum retry cooldown must not be greater than the maximum (" + m[2] + " ms)."
		case "budgetMs":
			return "One wait must not be longer than the budget (" + m[2] + " ms)."
		}
	}
	return sentence(msg)
}

// settingAttrs are the attributes of a card's control: id, name,
// accessibility, and for numbers and lists a text input that keeps what was
// typed (a number input would blank a typo, and blank means "default").
func settingAttrs(f SettingsFieldVM, errs FieldErrors, focus string) templ.Attributes {
	a := controlAttrs(f.Path, f.Path, errs, focus, f.Help != "")
	if f.IsBool() {
		return a
	}
	a["type"] = "text"
	a["value"] = f.Value
	a["autocomplete"] = "off"
	if f.Human() != "" {
		if d, ok := a["aria-describedby"].(string); ok {
			a["aria-describedby"] = f.HumanID() + " " + d
		} else {
			a["aria-describedby"] = f.HumanID()
		}
	}
	if f.Kind == schema.Int {
		a["inputmode"] = "numeric"
		a["class"] = "input--sm"
	} else {
		a["class"] = "input--md"
	}
	return a
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
