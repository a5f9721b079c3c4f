package views

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/a-h/templ"

	"switchyard/services"
)

// ---------------------------------------------------------------------------
// Settings → Resilience (50-dashboard §6.9): one card per section of the
// resilience settings document. What a card shows and in which groups is
// presentation and lives here; every default, range, env name, value and
// source comes from the settings service through SettingsData.

// SettingsCardDef is the layout of one card: its section, the document key
// it edits, texts and the fields in display groups.
type SettingsCardDef struct {
	Section string // URL segment, e.g. "model-lockout"
	Key     string // top-level document key, e.g. "modelLockout"
	Title   string
	Intro   string
	Notes   []string
	Groups  []SettingsGroupDef
}

// SettingsGroupDef is a set of fields shown together (a fieldset when it has
// a legend, e.g. one auth class of a per-profile section).
type SettingsGroupDef struct {
	Legend string
	Paths  []string
}

// Paths lists every field the card edits, in display order.
func (d SettingsCardDef) Paths() []string {
	var out []string
	for _, g := range d.Groups {
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

// settingsProfiles are the auth-class profiles of per-profile sections.
var settingsProfiles = []struct{ key, legend string }{
	{"oauth", "OAuth connections"},
	{"apikey", "API-key connections"},
	{"local", "Local connections"},
}

func profileGroups(prefix string, fields ...string) []SettingsGroupDef {
	out := make([]SettingsGroupDef, 0, len(settingsProfiles))
	for _, p := range settingsProfiles {
		g := SettingsGroupDef{Legend: p.legend}
		for _, f := range fields {
			g.Paths = append(g.Paths, prefix+"."+p.key+"."+f)
		}
		out = append(out, g)
	}
	return out
}

// SettingsCardDefs are the cards of Settings → Resilience in page order.
var SettingsCardDefs = []SettingsCardDef{
	{Section: SectionRequestQueue, Key: "requestQueue", Title: "Request queue",
		Intro: "Paces requests per connection: a rate limit, a minimum gap, a concurrency cap and a bounded queue in front of each protected connection.",
		Notes: []string{"Protection is switched on per connection (Connections → Edit → Rate-limit protection); these values apply to every protected connection that does not override them."},
		Groups: []SettingsGroupDef{{Paths: []string{"requestQueue.autoEnableApiKeyProviders", "requestQueue.requestsPerMinute",
			"requestQueue.minTimeBetweenRequestsMs", "requestQueue.concurrentRequests", "requestQueue.maxWaitMs",
			"requestQueue.queueWaitMs", "requestQueue.maxQueueDepth"}}}},
	{Section: SectionConnectionCooldown, Key: "connectionCooldown", Title: "Connection cooldown",
		Intro: "Takes one connection out of rotation for a while after a connection-scoped failure, doubling the pause on each repeat up to a cap.",
		Notes: []string{"An upstream Retry-After hint always wins over this ladder (capped by the longest honoured hint below)."},
		Groups: append([]SettingsGroupDef{{Paths: []string{"connectionCooldown.maxRetryHintMs"}}},
			profileGroups("connectionCooldown", "baseCooldownMs", "maxBackoffSteps", "maxCooldownMs")...)},
	{Section: SectionProviderBreaker, Key: "providerBreaker", Title: "Provider breaker",
		Intro: "Counts failures per provider; at degraded-at the provider is tried last, at open-at it is skipped until the reset timeout lets a few trial requests through.",
		Groups: profileGroups("providerBreaker", "failureThreshold", "degradationThreshold", "resetTimeoutMs",
			"halfOpenRequests", "escalateAfterCycles", "maxBackoffMultiplier")},
	{Section: SectionProviderCooldown, Key: "providerCooldown", Title: "Provider cooldown window gate",
		Intro: "Holds a whole provider back from combo requests after too many failures within a time window.",
		Groups: append([]SettingsGroupDef{{Paths: []string{"providerCooldown.enabled", "providerCooldown.minRetryCooldownMs",
			"providerCooldown.maxRetryCooldownMs"}}},
			profileGroups("providerCooldown", "failureThreshold", "failureWindowMs", "cooldownMs")...)},
	{Section: SectionWaitForCooldown, Key: "waitForCooldown", Title: "Wait for cooldown",
		Intro: "A request for a single model waits for a short connection cooldown to end instead of failing at once.",
		Groups: []SettingsGroupDef{{Paths: []string{"waitForCooldown.enabled", "waitForCooldown.maxRetries",
			"waitForCooldown.maxRetryWaitMs", "waitForCooldown.budgetMs"}}}},
	{Section: SectionComboCooldownWait, Key: "comboCooldownWait", Title: "Combo cooldown wait",
		Intro: "A combo request whose every target is cooling waits for the soonest one instead of failing at once.",
		Groups: []SettingsGroupDef{{Paths: []string{"comboCooldownWait.enabled", "comboCooldownWait.maxWaitMs",
			"comboCooldownWait.maxAttempts", "comboCooldownWait.budgetMs"}}}},
	{Section: SectionConnectionConcurrency, Key: "connectionConcurrency", Title: "Connection concurrency",
		Intro: "Limits how many requests run on one connection at a time; the limit itself (max_concurrent) is set per connection on the Connections page.",
		Groups: []SettingsGroupDef{{Paths: []string{"connectionConcurrency.enabled", "connectionConcurrency.failOpen",
			"connectionConcurrency.slotWaitMs", "connectionConcurrency.queueDepth"}}}},
	{Section: SectionSessionAffinity, Key: "sessionAffinity", Title: "Session affinity",
		Intro:  "Keeps the requests of one client session on the connection that served it last, so provider prompt caches stay warm.",
		Notes:  []string{"Sessions are recognised by the X-Switchyard-Session, x-codex-session-id, session-id (Codex), X-Session-Id and x-claude-code-session-id request headers."},
		Groups: []SettingsGroupDef{{Paths: []string{"sessionAffinity.ttlMs"}}}},
	{Section: SectionStreamRecovery, Key: "streamRecovery", Title: "Stream recovery and throughput watchdog",
		Intro: "Reopens a stream that fails before its first byte reached the client, and aborts upstream streams that keep sending events but too little useful text.",
		Groups: []SettingsGroupDef{{Paths: []string{"streamRecovery.earlyRetryMax"}},
			{Legend: "Throughput watchdog", Paths: []string{"streamRecovery.throughputWatchdog.enabled",
				"streamRecovery.throughputWatchdog.warmupMs", "streamRecovery.throughputWatchdog.windowMs",
				"streamRecovery.throughputWatchdog.minUsefulBytesPerSecond", "streamRecovery.throughputWatchdog.minUsefulBytes"}}}},
	{Section: SectionEmergencyFallback, Key: "emergencyFallback", Title: "Emergency fallback",
		Intro:  "When every target of a request is exhausted, Switchyard makes one last attempt on a fallback model; responses say so in X-Switchyard-Warning.",
		Notes:  []string{"The switch and the fallback model are on Settings → Feature flags."},
		Groups: []SettingsGroupDef{{Paths: []string{"emergencyFallback.skipForToolRequests", "emergencyFallback.maxOutputTokens"}}}},
	{Section: SectionModelLockout, Key: "modelLockout", Title: "Model lockout",
		Intro: "Locks one model on one connection after a model-scoped failure, so the connection keeps serving its other models. When off, such a failure only moves the request on; neither the model nor the connection is cooled.",
		Groups: []SettingsGroupDef{{Paths: []string{"modelLockout.enabled", "modelLockout.errorCodes", "modelLockout.baseCooldownMs",
			"modelLockout.maxCooldownMs", "modelLockout.maxBackoffSteps", "modelLockout.useExponentialBackoff"}}}},
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

var profileSegment = regexp.MustCompile(`\.(oauth|apikey|local)\.`)

func labelOf(path string) settingLabel {
	if l, ok := settingLabels[path]; ok {
		return l
	}
	if l, ok := settingLabels[profileSegment.ReplaceAllString(path, ".<p>.")]; ok {
		return l
	}
	return settingLabel{Label: path[strings.LastIndexByte(path, '.')+1:]}
}

// SettingsFieldData is one field of the settings document as the service
// reports it: its schema entry, effective value, built-in default and
// source, values formatted as a form control holds them.
type SettingsFieldData struct {
	Field   services.SettingField
	Value   string // "120000", "true", "403, 404"
	Default string
	Source  string // default, env, stored, derived
}

// SettingsData is what the resilience cards are built from.
type SettingsData struct {
	Fields   map[string]SettingsFieldData
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
	Kind    services.SettingKind
	Value   string
	Help    string
	Source  string
	Changed bool // differs from the built-in default
}

// On reads a switch value.
func (f SettingsFieldVM) On() bool { return f.Value == "true" || f.Value == "on" }

// IsBool reports a switch.
func (f SettingsFieldVM) IsBool() bool { return f.Kind == services.SettingBool }

// ID is the control's element id.
func (f SettingsFieldVM) ID() string { return fieldAnchor(f.Path) }

// NewSettingsCardVM builds a card from the service's data. shown overrides
// the displayed value of a field (the submitted form on 422, the defaults
// after Restore defaults); nil shows the effective values.
func NewSettingsCardVM(def SettingsCardDef, data SettingsData, shown map[string]string) SettingsCardVM {
	vm := SettingsCardVM{Def: def, Revision: data.Revision, Errors: FieldErrors{}, ActiveLockouts: data.ActiveLockouts}
	for _, g := range def.Groups {
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
	for _, p := range def.Paths() {
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
	case services.SettingBool:
		def := "off"
		if fd.Default == "true" {
			def = "on"
		}
		b = append(b, "Default "+def+".")
	case services.SettingInt:
		def := fd.Default + unit
		if lbl.Unit == "ms" {
			if n, err := strconv.ParseInt(fd.Default, 10, 64); err == nil && n >= 1000 {
				def += " (" + humanDurationMs(n) + ")"
			}
		}
		b = append(b, fmt.Sprintf("Default %s; %s–%s%s. Leave blank for the default.", def,
			strconv.FormatInt(f.Min, 10), strconv.FormatInt(f.Max, 10), unit))
	case services.SettingIntList:
		b = append(b, fmt.Sprintf("Default %s; each %d–%d, at most %d.", fd.Default, f.Min, f.Max, f.MaxItems))
	}
	if f.Env != "" {
		b = append(b, "Environment variable "+f.Env+".")
	}
	return strings.Join(b, " ")
}

// humanDurationMs renders a whole duration compactly: "2 min", "1 h 30 min", "7 days", "4.5 s".
func humanDurationMs(ms int64) string {
	switch {
	case ms%86_400_000 == 0:
		d := ms / 86_400_000
		if d == 1 {
			return "1 day"
		}
		return fmt.Sprintf("%d days", d)
	case ms%3_600_000 == 0:
		return fmt.Sprintf("%d h", ms/3_600_000)
	case ms >= 3_600_000 && ms%60_000 == 0:
		return fmt.Sprintf("%d h %d min", ms/3_600_000, ms%3_600_000/60_000)
	case ms%60_000 == 0:
		return fmt.Sprintf("%d min", ms/60_000)
	case ms%1000 == 0:
		return fmt.Sprintf("%d s", ms/1000)
	}
	return strconv.FormatFloat(float64(ms)/1000, 'f', -1, 64) + " s"
}

// SourceText names where a value comes from.
func SourceText(src string) string {
	switch src {
	case services.SourceEnv:
		return "environment"
	case services.SourceStored:
		return "saved"
	case services.SourceDerived:
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
func SettingsErrors(def SettingsCardDef, fields map[string]string, shown map[string]string) FieldErrors {
	out := FieldErrors{}
	paths := def.Paths()
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

// ---------------------------------------------------------------------------
// Provider error rules editor.

// ErrorRuleOptions are the choices of the rules editor, from the service.
type ErrorRuleOptions struct {
	Providers  []string
	Reasons    []string
	Scopes     []string
	LockScopes []string
}

// ErrorRuleRowVM is one operator rule, values as the form holds them.
type ErrorRuleRowVM struct {
	Index          int
	ID             string
	Provider       string
	Status         string
	Match          string
	HeaderName     string
	HeaderContains string
	Reason         string
	Scope          string
	LockScope      string
	CooldownMs     string
	Ban            bool
	Enabled        bool
}

// ruleFields are the controls of a rule row, in order.
var ruleFields = []string{"provider", "status", "match", "header.name", "header.contains", "reason", "scope", "lockScope", "cooldownMs", "ban", "enabled"}

// Field is the form name (and error key) of one control of the row.
func (r ErrorRuleRowVM) Field(name string) string {
	return "providerErrorRules." + strconv.Itoa(r.Index) + "." + name
}

// RowKey is the error key of problems with the whole row.
func (r ErrorRuleRowVM) RowKey() string { return "providerErrorRules." + strconv.Itoa(r.Index) }

// BuiltinRuleVM is one built-in rule, read-only.
type BuiltinRuleVM struct {
	ID, Provider, Status, Match, Header, Reason, Scope, LockScope, Cooldown string
}

// ErrorRulesVM is the editor.
type ErrorRulesVM struct {
	Rows    []ErrorRuleRowVM
	Builtin []BuiltinRuleVM
	Options ErrorRuleOptions
	// AutofocusID is the control that keeps focus after a builder edit.
	AutofocusID string
}

// ApplyRuleOp edits the rows for the builder: "add", "remove:N", "up:N",
// "down:N". It returns the index of the row whose button should keep focus
// (-1 for none).
func ApplyRuleOp(rows []ErrorRuleRowVM, op string, opts ErrorRuleOptions) ([]ErrorRuleRowVM, int) {
	verb, arg, _ := strings.Cut(op, ":")
	i, err := strconv.Atoi(arg)
	valid := err == nil && i >= 0 && i < len(rows)
	focus := -1
	switch verb {
	case "add":
		r := ErrorRuleRowVM{Enabled: true, Status: ""}
		if len(opts.Reasons) > 0 {
			r.Reason = opts.Reasons[0]
		}
		if len(opts.Scopes) > 0 {
			r.Scope = opts.Scopes[0]
		}
		rows = append(rows, r)
		focus = len(rows) - 1
	case "remove":
		if valid {
			rows = append(rows[:i:i], rows[i+1:]...)
		}
	case "up":
		if valid && i > 0 {
			rows[i-1], rows[i] = rows[i], rows[i-1]
			focus = i - 1
		}
	case "down":
		if valid && i < len(rows)-1 {
			rows[i], rows[i+1] = rows[i+1], rows[i]
			focus = i + 1
		}
	}
	for k := range rows {
		rows[k].Index = k
	}
	return rows, focus
}

var (
	reRuleField  = regexp.MustCompile(`^providerErrorRules\.(\d+)\.([A-Za-z.]+)$`)
	reRuleRow    = regexp.MustCompile(`^providerErrorRules\.(\d+)$`)
	reNeverMatch = regexp.MustCompile(`^rule (\d+) can never match: rule (\d+) above`)
)

// ruleError maps one problem of providerErrorRules to its control and
// sentence (50-dashboard §6.9, rule messages).
func ruleError(key, msg string) (string, string) {
	if m := reRuleRow.FindStringSubmatch(key); m != nil {
		if mm := reNeverMatch.FindStringSubmatch(msg); mm != nil {
			return key, "Rule " + mm[1] + " can never match: rule " + mm[2] + " above it has the same provider and status and an empty match text."
		}
		return key, sentence(msg)
	}
	m := reRuleField.FindStringSubmatch(key)
	if m == nil {
		if key == "providerErrorRules" && strings.Contains(msg, "items") {
			return key, "Use at most 50 rules."
		}
		return key, sentence(msg)
	}
	row, field := m[1], m[2]
	switch field {
	case "provider":
		return key, "Choose a provider."
	case "status":
		return key, "Status must be a number from 100 to 599."
	case "match":
		return key, "Match text is at most 200 characters."
	case "cooldownMs":
		return key, "Cooldown must be blank or from 1000 to 86400000 ms."
	case "reason":
		return key, "Choose a reason."
	case "scope":
		return key, "Choose one of the options."
	case "header":
		return "providerErrorRules." + row + ".header.name", "Enter a header name and the text it contains, or leave both blank."
	case "header.name":
		return key, "Enter a header name (letters, digits and - only, at most 64)."
	case "header.contains":
		return key, "Enter the text the header contains (1 to 200 characters)."
	}
	return key, sentence(msg)
}

// ---------------------------------------------------------------------------
// Settings → Feature flags (50-dashboard §6.10).

// FlagsPageVM is the flags page.
type FlagsPageVM struct {
	Rows []FlagRowVM
}

// FlagRowVM is one flag with its control.
type FlagRowVM struct {
	Key             string
	Label           string
	Description     string
	Field           string
	Value           bool
	Source          string
	Env             string
	RequiresRestart bool
	Errors          FieldErrors
	Saved           bool
	// Target is emergencyFallback.target (the emergency fallback row only);
	// Targets are the datalist options.
	HasTarget bool
	Target    string
	Targets   []string
}

// flagLabels name the flags of the registry; a flag not listed shows its key.
var flagLabels = map[string]string{
	"emergencyFallback":         "Emergency fallback",
	"modelLockout":              "Model lockout",
	"providerCooldown":          "Provider cooldown window gate",
	"throughputWatchdog":        "Throughput watchdog",
	"waitForCooldown":           "Wait for cooldown",
	"comboCooldownWait":         "Combo cooldown wait",
	"connectionConcurrency":     "Connection concurrency",
	"rateLimitAutoEnable":       "Protect API-key connections automatically",
	"autoDisableBannedAccounts": "Disable banned accounts",
	"logRequestBodies":          "Log request bodies",
}

// flagTexts replace a flag's one-line description where the page says more.
var flagTexts = map[string]string{
	"emergencyFallback": "When a request would fail because every target is exhausted, Switchyard makes one last attempt on this model. Such responses say so in X-Switchyard-Warning and are marked in the request log.",
	"logRequestBodies":  "Stores request and response bodies in request logs, truncated to 32 KiB each and scrubbed of secrets. Bodies may contain your users' data.",
}

// FlagKeyEmergencyFallback is the flag whose row also sets the fallback model.
const FlagKeyEmergencyFallback = "emergencyFallback"

// FlagLabel names a flag; a flag without a label shows its key.
func FlagLabel(key string) string {
	if l, ok := flagLabels[key]; ok {
		return l
	}
	return key
}

// NewFlagRowVM builds one row.
func NewFlagRowVM(key, field string, value bool, source string, env *string, restart bool, description string) FlagRowVM {
	r := FlagRowVM{Key: key, Label: FlagLabel(key), Description: description, Field: field, Value: value, Source: source,
		RequiresRestart: restart, Errors: FieldErrors{}, HasTarget: key == FlagKeyEmergencyFallback}
	if t, ok := flagTexts[key]; ok {
		r.Description = t
	}
	if env != nil {
		r.Env = *env
	}
	return r
}

// RowIDOf is the row's element id.
func (r FlagRowVM) RowIDOf() string { return RowID(RowFlag, r.Key) }

// SourceLine says where the value comes from.
func (r FlagRowVM) SourceLine() string {
	switch r.Source {
	case services.SourceEnv:
		return "Set by the environment (" + r.Env + ")"
	case services.SourceStored:
		return "Set on this dashboard"
	}
	return "Default"
}

// FlagErrors words the service's problems of one flag save.
func FlagErrors(key string, fields map[string]string) FieldErrors {
	out := FieldErrors{}
	for _, k := range sortedKeys(fields) {
		msg := fields[k]
		target := "value"
		switch {
		case k == "emergencyFallback.target":
			target = "target"
			if strings.HasPrefix(msg, "does not resolve") {
				msg = "That model or combo no longer exists."
			} else {
				msg = sentence(msg)
			}
		case msg == "set emergencyFallback.target first":
			target = "target"
			msg = "Choose the model to fall back to."
		default:
			msg = sentence(msg)
		}
		if _, dup := out[target]; !dup {
			out[target] = msg
		}
	}
	return out
}

// FlagFieldID is the element id of a flag row's control.
func FlagFieldID(key, name string) string { return RowID(RowFlag, key) + "-" + name }

// ---------------------------------------------------------------------------
// Settings → Account (50-dashboard §6.11).

// AccountPageVM is the account page.
type AccountPageVM struct {
	Password PasswordFormVM
	Sessions SessionsListVM
}

// PasswordFormVM is the change-password form; values are never echoed.
type PasswordFormVM struct {
	Errors FieldErrors
}

// Focus is the first invalid field.
func (vm PasswordFormVM) Focus() string {
	return firstInvalid([]string{"current", "new", "confirm"}, vm.Errors)
}

// SessionsListVM is the sessions table.
type SessionsListVM struct {
	Rows    []SessionRowVM
	Confirm *ConfirmVM
	OOB     bool
}

// Others counts the sessions besides this one.
func (vm SessionsListVM) Others() int {
	n := 0
	for _, r := range vm.Rows {
		if !r.Current {
			n++
		}
	}
	return n
}

// SessionRowVM is one admin session.
type SessionRowVM struct {
	IDHash    string
	Created   *TimeVM
	LastSeen  *TimeVM
	IP        string
	UserAgent string
	Current   bool
}

// NewSessionsListVM lists sessions, this one (currentHash) first, then the
// most recently seen.
func NewSessionsListVM(sessions []services.AdminSession, currentHash string, now time.Time) SessionsListVM {
	vm := SessionsListVM{}
	lastSeen := map[string]int64{}
	for _, s := range sessions {
		created, seen := s.CreatedAt, s.LastSeenAt
		vm.Rows = append(vm.Rows, SessionRowVM{IDHash: s.IDHash, Created: NewTimeVM(&created, now), LastSeen: NewTimeVM(&seen, now),
			IP: s.ClientIP, UserAgent: s.UserAgent, Current: s.IDHash == currentHash})
		lastSeen[s.IDHash] = seen.UnixMilli()
	}
	sortSessions(vm.Rows, lastSeen)
	return vm
}

// SessionsEndOthersConfirm is the confirmation of "Sign out all other sessions".
func SessionsEndOthersConfirm(others int) *ConfirmVM {
	line := "Every other browser signed in to this dashboard is signed out at once."
	if others == 1 {
		line = "The one other browser signed in to this dashboard is signed out at once."
	}
	return &ConfirmVM{RowKind: "sessions", ID: "others", Title: "Sign out all other sessions?",
		Lines: []string{line, "Management API keys are not affected."}, Action: "Sign out other sessions",
		Method: "post", URL: "/settings/account/sessions/end-others", Target: "#" + SessionsListID,
		Cancel: "/settings/account", Colspan: 5}
}

// sortSessions puts the current session first, then the most recently seen.
func sortSessions(rows []SessionRowVM, lastSeen map[string]int64) {
	sort.SliceStable(rows, func(i, j int) bool {
		if rows[i].Current != rows[j].Current {
			return rows[i].Current
		}
		return lastSeen[rows[i].IDHash] > lastSeen[rows[j].IDHash]
	})
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
	if f.Kind == services.SettingInt {
		a["inputmode"] = "numeric"
		a["class"] = "input--sm"
	} else {
		a["class"] = "input--md"
	}
	return a
}

// ruleButtonID is the id of a rule row's Up, Down or Remove button.
func ruleButtonID(op string, i int) string { return RowID(RowRule, strconv.Itoa(i)) + "-" + op }

// RuleFocusID is the builder button that keeps focus after op on row i.
func RuleFocusID(op string, i int) string {
	if op == "add" {
		return ruleButtonID("provider", i)
	}
	return ruleButtonID(op, i)
}

// ruleAttrs are fieldAttrs for a rule control, with autofocus when the
// builder asks for it.
func ruleAttrs(r ErrorRuleRowVM, name string, errs FieldErrors, focus string, autofocusID string) templ.Attributes {
	a := controlAttrs(r.Field(name), r.Field(name), errs, focus, false)
	if autofocusID != "" && autofocusID == ruleButtonID(name, r.Index) {
		a["autofocus"] = true
	}
	return a
}

// lockoutCount words the number of active model lockouts.
func lockoutCount(n int) string {
	if n == 1 {
		return "1 active lockout"
	}
	return strconv.Itoa(n) + " active lockouts"
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// flagDescribedBy ties a flag control to the row's description, help and error.
func flagDescribedBy(r FlagRowVM, name string) string {
	ids := []string{r.RowIDOf() + "-desc"}
	if name == "target" {
		ids = append(ids, FlagFieldID(r.Key, "target")+"-help")
	}
	if r.Errors.Has(name) {
		ids = append(ids, FlagFieldID(r.Key, name)+"-error")
	}
	return strings.Join(ids, " ")
}

// Stored reports a value saved on this dashboard (Reset can drop it).
func (r FlagRowVM) Stored() bool { return r.Source == services.SourceStored }
