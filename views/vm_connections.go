package views

import (
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/a-h/templ"

	"switchyard/services"
	"switchyard/services/human"
	"switchyard/services/quota"
	"switchyard/services/resilience"
)

// ---------------------------------------------------------------------------
// Shared view-model pieces of the resource pages (times, forms, confirmations).

// TimeVM is an instant shown as relative text with the absolute UTC time in
// the title (50-dashboard §4, Timestamps).
type TimeVM struct {
	ISO string // RFC 3339, for <time datetime>
	Rel string // "3 min ago"
	Abs string // "2026-03-01 10:00:00 UTC"
}

// NewTimeVM describes t as seen at now; a nil t gives nil.
func NewTimeVM(t *time.Time, now time.Time) *TimeVM {
	if t == nil || t.IsZero() {
		return nil
	}
	return &TimeVM{ISO: RFC3339(*t), Rel: Ago(*t, now), Abs: t.UTC().Format("2006-01-02 15:04:05 UTC")}
}

// ConfirmVM is an inline confirmation panel (50-dashboard §3.6): what will
// happen in words, the destructive button and Cancel (focused).
type ConfirmVM struct {
	RowKind string // RowConn, RowCombo, RowKey: the panel sits in RowID(<kind>-slot, ID)
	ID      string
	Title   string   // "Delete connection main?"
	Lines   []string // consequences, one sentence each
	Groups  []ConfirmGroupVM
	Action  string // button text
	Method  string // "delete" or "post"
	URL     string
	Target  string // css selector swapped with the response
	Vals    string // hx-vals JSON, or ""
	Cancel  string // href of the no-script Cancel link
	Colspan int
}

// ConfirmGroupVM is a named list inside a confirmation ("Combos that pin it").
type ConfirmGroupVM struct {
	Title string
	Names []string
}

// InputVM describes one form control; Name is both the form field name and
// the key of its validation message.
type InputVM struct {
	Name         string
	Label        string
	Type         string // text (default), number, url, password, date
	Value        string
	Help         string
	Placeholder  string
	Autocomplete string
	List         string // datalist id
	Class        string
	Required     bool
	ReadOnly     bool
	Min, Max     string
}

// NewFieldErrors turns a service's field messages into form errors: keys are
// renamed where the form uses another field (rename may be nil) and every
// message reads as a sentence.
func NewFieldErrors(fields map[string]string, rename map[string]string) FieldErrors {
	out := FieldErrors{}
	for k, v := range fields {
		if r, ok := rename[k]; ok {
			k = r
		}
		if _, dup := out[k]; !dup {
			out[k] = sentence(v)
		}
	}
	return out
}

// sentence capitalises the first letter and ends the text with a full stop.
func sentence(s string) string {
	s = strings.TrimSpace(s)
	if s == "" {
		return s
	}
	r, n := utf8.DecodeRuneInString(s)
	s = string(unicode.ToUpper(r)) + s[n:]
	if !strings.HasSuffix(s, ".") && !strings.HasSuffix(s, "?") && !strings.HasSuffix(s, "!") {
		s += "."
	}
	return s
}

// firstInvalid is the first field of order that has an error, else the first
// erroneous key alphabetically (a message without a field of its own).
func firstInvalid(order []string, errs FieldErrors) string {
	for _, f := range order {
		if errs.Has(f) {
			return f
		}
	}
	keys := sortedKeys(errs)
	if len(keys) > 0 {
		return keys[0]
	}
	return ""
}

// fieldAttrs are the id, name and accessibility attributes of a control:
// aria-invalid and aria-describedby when it has an error, autofocus when it is
// the first invalid field.
func fieldAttrs(name string, errs FieldErrors, focus string, hasHelp bool) templ.Attributes {
	return controlAttrs(name, name, errs, focus, hasHelp)
}

// controlAttrs is fieldAttrs for a control whose form name differs from the
// field its messages belong to (the "Any" switch of an allowlist).
func controlAttrs(field, name string, errs FieldErrors, focus string, hasHelp bool) templ.Attributes {
	id := fieldAnchor(field)
	a := templ.Attributes{"id": id, "name": name}
	var desc []string
	if hasHelp {
		desc = append(desc, id+"-help")
	}
	if errs.Has(field) {
		a["aria-invalid"] = "true"
		desc = append(desc, id+"-error")
		if focus == field {
			a["autofocus"] = true
		}
	}
	if len(desc) > 0 {
		a["aria-describedby"] = strings.Join(desc, " ")
	}
	return a
}

// inputAttrs adds the InputVM's own attributes to fieldAttrs.
func inputAttrs(in InputVM, errs FieldErrors, focus string) templ.Attributes {
	a := fieldAttrs(in.Name, errs, focus, in.Help != "")
	t := in.Type
	if t == "" {
		t = "text"
	}
	a["type"] = t
	a["value"] = in.Value
	if in.Placeholder != "" {
		a["placeholder"] = in.Placeholder
	}
	if in.Autocomplete != "" {
		a["autocomplete"] = in.Autocomplete
	}
	if in.List != "" {
		a["list"] = in.List
	}
	if in.Class != "" {
		a["class"] = in.Class
	}
	if in.Required {
		a["required"] = true
	}
	if in.ReadOnly {
		a["readonly"] = true
	}
	if in.Min != "" {
		a["min"] = in.Min
	}
	if in.Max != "" {
		a["max"] = in.Max
	}
	if t == "number" {
		a["inputmode"] = "numeric"
		a["step"] = "1"
	}
	return a
}

// ---------------------------------------------------------------------------
// Connections page.

// connColumns is the number of columns of the connections table.
const connColumns = 9

// ConnectionsPageVM is the whole Connections page.
type ConnectionsPageVM struct {
	List  ConnectionsListVM
	Panel *ConnectionFormVM // the open add/edit form, or nil
}

// ConnectionsListVM is the grouped connection table (or its empty state).
type ConnectionsListVM struct {
	Groups  []ConnectionGroupVM
	Confirm *ConfirmVM // a confirmation open in a row slot (full-page render)
	OOB     bool       // rendered as an out-of-band swap
}

// Empty reports no connection at all.
func (vm ConnectionsListVM) Empty() bool { return len(vm.Groups) == 0 }

// ConnectionGroupVM is one provider's header and rows.
type ConnectionGroupVM struct {
	ProviderID string
	Name       string
	Alias      string
	Format     string
	AuthClass  string
	Rows       []ConnectionRowVM
	Breaker    *GroupBreakerVM // the provider's breaker (live), nil when not known
}

// ConnectionRowVM is one row of the connections table.
type ConnectionRowVM struct {
	ID          string
	Name        string
	Provider    string
	Enabled     bool
	StatusClass string // badge modifier: healthy, cooling, locked, terminal, disabled
	StatusText  string
	StatusIcon  string
	Terminal    bool  // banned, expired or credits exhausted: Reset state is offered
	CooldownMs  int64 // > 0 while cooling (never for a terminal connection)
	CoolUntil   string
	Backoff     int
	BackoffMax  int // maxBackoffSteps of the connection's profile, 0 when unknown
	Reason      string
	Locked      []LockedModelVM // active model lockouts, one per model (WithLive)
	ErrorHead   string          // "429 rate_limit"
	ErrorShort  string          // ≤ 120 characters
	ErrorFull   string          // set when ErrorShort was cut
	ErrorAt     *TimeVM
	Priority    int
	Concurrency string          // max_concurrent slots in use / limit ("1 / 2"), or "∞"
	ConcLimit   int             // max_concurrent, 0 when unset
	ConcWaiting int             // requests waiting for a slot (WithSlots)
	Quota       []QuotaWindowVM // learned quota windows (WithQuota); every long window unknown until then
	Protection  string
	Proxy       string // masked
	EgressGroup string
	LastUsed    *TimeVM
	LastTest    *TimeVM
	TestText    string
	TestResult  *ConnTestResultVM // the result of a test just run from this row
	Confirm     *ConfirmVM
}

// NewConnectionsListVM groups connections (already in catalogue order) by provider.
func NewConnectionsListVM(conns []services.Connection, providers []services.Provider, now time.Time) ConnectionsListVM {
	byID := map[string]services.Provider{}
	for _, p := range providers {
		byID[p.ID] = p
	}
	var vm ConnectionsListVM
	for _, c := range conns {
		if n := len(vm.Groups); n == 0 || vm.Groups[n-1].ProviderID != c.Provider {
			p, ok := byID[c.Provider]
			if !ok {
				p = services.Provider{ID: c.Provider, Name: c.Provider, AuthClass: c.AuthClass}
			}
			vm.Groups = append(vm.Groups, ConnectionGroupVM{ProviderID: p.ID, Name: p.Name, Alias: p.Alias,
				Format: string(p.Format), AuthClass: authClassLabel(p.AuthClass)})
		}
		g := &vm.Groups[len(vm.Groups)-1]
		g.Rows = append(g.Rows, NewConnectionRowVM(c, now))
	}
	return vm
}

// WithConfirm opens a confirmation panel under the row it belongs to.
func (vm ConnectionsListVM) WithConfirm(cf *ConfirmVM) ConnectionsListVM {
	vm.Confirm = cf
	return vm
}

func authClassLabel(a services.AuthClass) string {
	switch a {
	case services.AuthAPIKey:
		return "API key"
	case services.AuthOAuth:
		return "OAuth"
	case services.AuthLocal:
		return "Local"
	}
	return string(a)
}

// NewConnectionRowVM derives a row's cells at now.
func NewConnectionRowVM(c services.Connection, now time.Time) ConnectionRowVM {
	r := ConnectionRowVM{ID: c.ID, Name: c.Name, Provider: c.Provider, Enabled: c.Enabled, Priority: c.Priority,
		Backoff: c.State.BackoffLevel, Reason: strings.ReplaceAll(c.State.LastErrorReason, "_", " "),
		Concurrency: "∞", EgressGroup: c.EgressGroup, Proxy: c.MaskedProxyURL(), Quota: NewQuotaWindowsVM(quota.View{}, now)}
	switch st := c.Status(now); st {
	case services.StatusDisabled:
		r.StatusClass, r.StatusText, r.StatusIcon = "disabled", "disabled", "ban"
	case services.StatusCooling:
		r.StatusClass, r.StatusText, r.StatusIcon = "cooling", "cooling", "clock"
	case services.StatusActive:
		r.StatusClass, r.StatusText, r.StatusIcon = "healthy", "healthy", "check"
	default:
		r.StatusClass, r.StatusText, r.StatusIcon = "terminal", "terminal: "+strings.ReplaceAll(st, "_", " "), "alert"
	}
	r.Terminal = c.State.TerminalStatus != ""
	if u := c.State.RateLimitedUntil; u != nil && u.After(now) && !r.Terminal {
		r.CooldownMs = u.Sub(now).Milliseconds()
		r.CoolUntil = RFC3339(*u)
	}
	if c.State.LastError != "" || c.State.LastErrorStatus != 0 {
		r.ErrorHead = errorHead(c.State)
		r.ErrorShort, r.ErrorFull = shortText(c.State.LastError)
		r.ErrorAt = NewTimeVM(c.State.LastErrorAt, now)
	}
	if c.MaxConcurrent != nil {
		r.ConcLimit = *c.MaxConcurrent
		r.Concurrency = ConcurrencyText(0, r.ConcLimit)
	}
	switch {
	case c.RateLimitProtection == nil:
		r.Protection = "inherit"
	case *c.RateLimitProtection:
		r.Protection = "on"
		if rpm := c.RateLimitOverrides.RequestsPerMinute; rpm != nil {
			r.Protection = "on · " + strconv.Itoa(*rpm) + " rpm"
		}
	default:
		r.Protection = "off"
	}
	r.LastUsed = NewTimeVM(c.LastUsedAt, now)
	if t := c.LastTest; t != nil {
		r.LastTest = NewTimeVM(&t.At, now)
		if t.OK {
			r.TestText = "OK · " + human.Duration(millis(t.LatencyMs), human.Latency)
		} else {
			r.TestText = "failed"
			if t.Status != 0 {
				r.TestText += " · " + strconv.Itoa(t.Status)
			}
		}
	}
	return r
}

// ProviderOptionGroup is an <optgroup> of the provider select.
type ProviderOptionGroup struct {
	Label   string
	Options []ProviderOption
}

// ProviderOption is one provider in the select.
type ProviderOption struct {
	Value string
	Label string
}

// Provider select values that declare a new compatible provider.
const (
	CustomOpenAI    = "custom:openai"
	CustomAnthropic = "custom:anthropic"
)

// NewProviderOptions groups the catalogue by auth class (50-dashboard §6.4).
func NewProviderOptions(providers []services.Provider) []ProviderOptionGroup {
	groups := []ProviderOptionGroup{{Label: "API key"}, {Label: "OAuth"}, {Label: "Local"}, {Label: "Custom providers"}}
	for _, p := range providers {
		o := ProviderOption{Value: p.ID, Label: p.Name}
		switch {
		case p.Custom:
			groups[3].Options = append(groups[3].Options, o)
		case p.AuthClass == services.AuthOAuth:
			groups[1].Options = append(groups[1].Options, o)
		case p.AuthClass == services.AuthLocal:
			groups[2].Options = append(groups[2].Options, o)
		default:
			groups[0].Options = append(groups[0].Options, o)
		}
	}
	groups = append(groups, ProviderOptionGroup{Label: "New compatible provider", Options: []ProviderOption{
		{Value: CustomOpenAI, Label: "Custom OpenAI-compatible"},
		{Value: CustomAnthropic, Label: "Custom Anthropic-compatible"},
	}})
	out := groups[:0]
	for _, g := range groups {
		if len(g.Options) > 0 {
			out = append(out, g)
		}
	}
	return out
}

// ConnectionFormVM is the add or edit form, holding the values as typed.
type ConnectionFormVM struct {
	Edit         bool
	ID           string
	ProviderName string // shown on edit (the provider cannot change)
	Providers    []ProviderOptionGroup
	Fields       ConnectionFieldsVM

	Name                string
	Priority            string
	MaxConcurrent       string
	RateLimitProtection string // inherit, on, off
	RPM                 string
	MinGapMs            string
	Concurrent          string
	MaxWaitMs           string
	QueueDepth          string
	QueueWaitMs         string
	QuotaReserve        string
	Tier                string
	DisableCooling      bool
	ProxyURL            string
	EgressGroup         string
	Enabled             bool
	Terminal            bool // the connection is terminal: new credentials clear it

	Errors FieldErrors
}

// ConnectionFieldsVM is the provider-dependent part of the form, swapped when
// the provider select changes.
type ConnectionFieldsVM struct {
	Provider        string // select value
	Known           bool   // a provider is chosen
	Edit            bool
	Custom          bool // declaring a new compatible provider
	CustomID        string
	CustomAuth      string // apikey or local
	AuthClass       string
	KeyPreview      string // stored key, masked ("sk-…9f2a")
	TokenPreview    string // stored OAuth access token, masked
	BaseURL         string
	BaseURLDefault  string
	BaseURLEditable bool
	// Anthropic marks an anthropic-format provider, whose base URL may be
	// the host root or end in /v1 (10-gateway-api §6.1).
	Anthropic    bool
	DefaultModel string
	Models       []string
	KeyResubmit  bool // a secret was typed before the form came back
	// ConfirmKeep shows the choice of keeping the stored credential for a
	// changed base URL or proxy (with the admin password), after the
	// service refused the change without it.
	ConfirmKeep     bool
	KeepCredentials bool
	Errors          FieldErrors
	Focus           string
}

// Form field order, for the autofocus of the first invalid field.
var connectionFieldOrder = []string{"provider", "customId", "customAuth", "name", "apiKey", "oauth.accessToken",
	"oauth.refreshToken", "keepCredentials", "currentPassword", "baseUrl", "defaultModel", "priority", "maxConcurrent", "rateLimitProtection",
	"rateLimitOverrides.requestsPerMinute", "rateLimitOverrides.minTimeBetweenRequestsMs",
	"rateLimitOverrides.concurrentRequests", "rateLimitOverrides.maxWaitMs", "rateLimitOverrides.maxQueueDepth",
	"rateLimitOverrides.queueWaitMs", "quotaReservePercent", "tier", "disableCooling", "proxyUrl", "egressGroup", "enabled"}

// Focus is the field that gets autofocus in a re-rendered form.
func (vm ConnectionFormVM) Focus() string { return firstInvalid(connectionFieldOrder, vm.Errors) }

// NewConnectionFieldsVM fills the provider-dependent fields for the select
// value provider (a catalogue id or CustomOpenAI/CustomAnthropic).
func NewConnectionFieldsVM(providers []services.Provider, provider string) ConnectionFieldsVM {
	f := ConnectionFieldsVM{Provider: provider, CustomAuth: string(services.AuthAPIKey)}
	switch provider {
	case CustomOpenAI, CustomAnthropic:
		f.Known, f.Custom, f.BaseURLEditable, f.AuthClass = true, true, true, string(services.AuthAPIKey)
		f.Anthropic = provider == CustomAnthropic
		return f
	}
	for _, p := range providers {
		if p.ID == provider {
			f.Known = true
			f.AuthClass = string(p.AuthClass)
			f.Anthropic = p.Format == services.FormatAnthropic
			f.BaseURLDefault = p.BaseURL
			f.BaseURLEditable = p.Custom || p.AuthClass == services.AuthLocal
			if f.BaseURLEditable {
				f.BaseURL = p.BaseURL
			}
			f.Models = append([]string(nil), p.Models...)
		}
	}
	return f
}

// NewConnectionFormVM is an empty add form (provider preselected when given).
func NewConnectionFormVM(providers []services.Provider, provider string) ConnectionFormVM {
	return ConnectionFormVM{Providers: NewProviderOptions(providers), Fields: NewConnectionFieldsVM(providers, provider),
		Priority: "0", RateLimitProtection: "inherit", QuotaReserve: "0", Tier: "standard", Enabled: true}
}

// EditConnectionFormVM is the edit form of c. Secrets are never put back: the
// key shows as a masked preview and its field stays empty; the proxy URL
// shows with its password masked.
func EditConnectionFormVM(c services.Connection, providers []services.Provider) ConnectionFormVM {
	vm := ConnectionFormVM{Edit: true, ID: c.ID, ProviderName: c.Provider, Name: c.Name,
		Priority: strconv.Itoa(c.Priority), RateLimitProtection: "inherit", QuotaReserve: strconv.Itoa(c.QuotaReservePercent),
		Tier: c.Tier, DisableCooling: c.DisableCooling, ProxyURL: c.MaskedProxyURL(), EgressGroup: c.EgressGroup,
		Enabled: c.Enabled, Terminal: c.State.TerminalStatus != ""}
	f := NewConnectionFieldsVM(providers, c.Provider)
	for _, p := range providers {
		if p.ID == c.Provider {
			vm.ProviderName = p.Name
		}
	}
	f.Edit = true
	f.KeyPreview = maskedTail(c.Credentials.APIKey)
	if c.Credentials.OAuth != nil {
		f.TokenPreview = maskedTail(c.Credentials.OAuth.AccessToken)
	}
	f.BaseURL = c.BaseURL
	if f.BaseURLEditable && c.BaseURL == "" {
		f.BaseURL = f.BaseURLDefault
	}
	f.DefaultModel = c.DefaultModel
	vm.Fields = f
	if c.MaxConcurrent != nil {
		vm.MaxConcurrent = strconv.Itoa(*c.MaxConcurrent)
	}
	if p := c.RateLimitProtection; p != nil {
		vm.RateLimitProtection = map[bool]string{true: "on", false: "off"}[*p]
	}
	o := c.RateLimitOverrides
	vm.RPM, vm.MinGapMs, vm.Concurrent = optInt(o.RequestsPerMinute), optInt(o.MinTimeBetweenRequestsMs), optInt(o.ConcurrentRequests)
	vm.MaxWaitMs, vm.QueueDepth, vm.QueueWaitMs = optInt(o.MaxWaitMs), optInt(o.MaxQueueDepth), optInt(o.QueueWaitMs)
	return vm
}

func optInt(p *int) string {
	if p == nil {
		return ""
	}
	return strconv.Itoa(*p)
}

// ConnectionRefsConfirm is the delete confirmation of a connection: which
// combos pin it and which keys allow it.
func ConnectionRefsConfirm(c services.Connection, refs services.ConnectionReferences) *ConfirmVM {
	cf := &ConfirmVM{RowKind: RowConn, ID: c.ID, Title: "Delete connection " + c.Name + "?",
		Action: "Delete connection", Method: "delete", URL: "/connections/" + c.ID, Target: "#" + ConnectionsListID,
		Cancel: "/connections", Colspan: connColumns}
	cf.Lines = append(cf.Lines, "Requests stop using this connection at once and its stored credentials are erased.")
	if len(refs.Combos) > 0 {
		cf.Groups = append(cf.Groups, ConfirmGroupVM{Title: "Combos that pin this connection (their targets stop resolving):", Names: refNames(refs.Combos)})
	}
	if len(refs.Keys) > 0 {
		cf.Groups = append(cf.Groups, ConfirmGroupVM{Title: "API keys whose allowed connections contain it:", Names: refNames(refs.Keys)})
	}
	if len(refs.Combos) == 0 && len(refs.Keys) == 0 {
		cf.Lines = append(cf.Lines, "No combo pins it and no API key lists it.")
	}
	return cf
}

func refNames(refs []services.Ref) []string {
	out := make([]string, len(refs))
	for i, r := range refs {
		out[i] = r.Name
	}
	sort.Strings(out)
	return out
}

// maskedTail shows a stored secret as "•••• 9f2a": its last characters only,
// taken from Secret.Preview (the one sanctioned view of a secret).
func maskedTail(s services.Secret) string {
	p := s.Preview()
	if p == "" {
		return ""
	}
	if i := strings.LastIndex(p, "…"); i >= 0 {
		p = p[i+len("…"):]
	}
	return strings.TrimSpace("•••• " + p)
}

// hasPrefixError reports an error on any field below prefix (opens its disclosure).
func hasPrefixError(errs FieldErrors, prefix string) bool {
	for k := range errs {
		if strings.HasPrefix(k, prefix) {
			return true
		}
	}
	return false
}

func apiKeyLabel(f ConnectionFieldsVM) string {
	if f.AuthClass == string(services.AuthAPIKey) && !f.Custom {
		return "API key"
	}
	return "API key (optional)"
}

func baseURLHelp(f ConnectionFieldsVM) string {
	both := " The host root and a URL ending in /v1 both work: /v1/messages is joined as needed."
	if f.Custom {
		if f.Anthropic {
			return "The compatible server's base URL, e.g. https://api.example.com." + both
		}
		return "The compatible server's API root, e.g. ending in /v1."
	}
	if f.BaseURLDefault != "" {
		if f.Anthropic {
			return "Leave blank to use " + f.BaseURLDefault + "." + both
		}
		return "Leave blank to use " + f.BaseURLDefault + "."
	}
	return ""
}

// ConnColumns is the number of columns of the connections table (a
// confirmation panel in a row slot spans them all).
const ConnColumns = connColumns

// ---------------------------------------------------------------------------
// Live cells of the Connections page.

// LockedModelVM is one locked model in a connection's "N models locked" list.
type LockedModelVM struct {
	Model    string
	Reason   string
	Expires  *CountdownVM
	Enforced bool
	Vals     string
	until    string
}

// WithLive adds what only the engine knows to a row: its model lockouts and
// the backoff ladder's length. A locked model is not the connection
// locked: the status badge stays the connection's own (a connection that
// serves its other models is healthy) and the "N models locked" count
// beside it lists them.
func (r ConnectionRowVM) WithLive(locks []resilience.LockoutStatus, backoffMax int, now time.Time) ConnectionRowVM {
	r.BackoffMax = backoffMax
	r.Locked = nil
	seen := map[string]bool{}
	for _, l := range locks {
		if !l.Active || seen[l.Model] {
			continue // one entry per model: Re-enable clears every key shape of it
		}
		seen[l.Model] = true
		r.Locked = append(r.Locked, LockedModelVM{Model: l.Model, Reason: reasonText(string(l.Reason)),
			Expires: NewCountdownVM(l.Until, now), Enforced: l.Enforced, Vals: reEnableVals(l.Provider, r.ID, l.Model),
			until: RFC3339(l.Until)})
	}
	return r
}

// LockedText is "2 models locked".
func (r ConnectionRowVM) LockedText() string {
	return human.Plural(len(r.Locked), "model", "models") + " locked"
}

// Signatures of the live cells: GET /connections/statuses re-sends a cell
// only when what it shows differs from the signature the page holds, so an
// open "models locked" list or error detail stays open between polls.

// StatusSig covers the badge, the reset action and the locked models.
func (r ConnectionRowVM) StatusSig() string {
	parts := []any{r.StatusClass, r.StatusText, r.Terminal}
	for _, l := range r.Locked {
		parts = append(parts, l.Model, l.Reason, l.until, l.Enforced)
	}
	return sig(parts...)
}

// CooldownSig covers the deadline (not the remaining time: it ticks in the
// browser), backoff and reason.
func (r ConnectionRowVM) CooldownSig() string {
	return sig(r.CoolUntil, r.Backoff, r.BackoffMax, r.Reason, r.CooldownMs > 0)
}

// ErrorSig covers the last error and its relative time.
func (r ConnectionRowVM) ErrorSig() string {
	at := ""
	if r.ErrorAt != nil {
		at = r.ErrorAt.ISO + r.ErrorAt.Rel
	}
	return sig(r.ErrorHead, r.ErrorShort, r.ErrorFull, at)
}

// WithSlots adds the slot gate's live counts to a row with max_concurrent:
// slots in use against the limit ("1 / 2") and requests waiting for one.
func (r ConnectionRowVM) WithSlots(inFlight, waiting int) ConnectionRowVM {
	if r.ConcLimit > 0 {
		r.Concurrency, r.ConcWaiting = ConcurrencyText(inFlight, r.ConcLimit), waiting
	}
	return r
}

// ConcurrencySig covers the concurrency cell.
func (r ConnectionRowVM) ConcurrencySig() string { return sig(r.Concurrency, r.ConcWaiting) }

// BreakerSig covers a provider group's breaker badge.
func (g ConnectionGroupVM) BreakerSig() string {
	if g.Breaker == nil {
		return sig("")
	}
	until := ""
	if g.Breaker.RetryIn != nil {
		until = g.Breaker.RetryIn.ISO
	}
	return sig(g.Breaker.Badge, until)
}

// GroupBreakerVM is the provider breaker badge of a connections group header.
type GroupBreakerVM struct {
	Badge   BadgeVM
	RetryIn *CountdownVM
}

// NewGroupBreakerVM describes a provider's breaker for its group header.
func NewGroupBreakerVM(b resilience.BreakerStatus, now time.Time) *GroupBreakerVM {
	g := &GroupBreakerVM{Badge: NewBreakerBadge(b.State)}
	if b.State == resilience.BreakerOpen {
		g.RetryIn = countdownAfter(b.RetryAfterMs, now)
	}
	return g
}

// LiveCell is one cell of GET /connections/statuses: its id and current signature.
type LiveCell struct {
	ID  string
	Sig string
}

// ConnectionStatusesVM is the answer of GET /connections/statuses: the rows
// and group headers whose cells changed, and which cells of them to send.
type ConnectionStatusesVM struct {
	Groups []ConnectionGroupVM // Rows filtered to those with a changed cell
	Send   map[string]bool     // cell ids to send
}

// NewConnectionStatusesVM keeps the cells whose signature differs from have
// (cell id → signature the page holds); an empty have sends everything.
func NewConnectionStatusesVM(list ConnectionsListVM, have map[string]string) ConnectionStatusesVM {
	vm := ConnectionStatusesVM{Send: map[string]bool{}}
	changed := func(id, s string) bool {
		if have[id] == s {
			return false
		}
		vm.Send[id] = true
		return true
	}
	for _, g := range list.Groups {
		out := g
		out.Rows = nil
		brk := changed(RowID(RowProviderBrk, g.ProviderID), g.BreakerSig())
		for _, r := range g.Rows {
			c := changed(RowID(RowConnStatus, r.ID), r.StatusSig())
			c = changed(RowID(RowConnCooldown, r.ID), r.CooldownSig()) || c
			c = changed(RowID(RowConnError, r.ID), r.ErrorSig()) || c
			c = changed(RowID(RowConnConc, r.ID), r.ConcurrencySig()) || c
			if c {
				out.Rows = append(out.Rows, r)
			}
		}
		if brk || len(out.Rows) > 0 {
			vm.Groups = append(vm.Groups, out)
		}
	}
	return vm
}
