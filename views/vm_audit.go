package views

import (
	"net/url"
	"strings"
	"time"

	"switchyard/services"
)

// ---------------------------------------------------------------------------
// Audit log (issue 21 item 5): who changed what, when and from where.

// AuditPageVM is the Audit log page.
type AuditPageVM struct {
	Filters AuditFiltersVM
	List    AuditListVM
}

// AuditAreas are the "What" choices: route prefixes of the management API
// and the dashboard.
var AuditAreas = []OptionVM{
	{"", "Everything"},
	{"/api/", "Management API: all"},
	{"/api/connections", "Management API: connections"},
	{"/api/combos", "Management API: combos"},
	{"/api/keys", "Management API: API keys"},
	{"/api/resilience", "Management API: resilience state and settings"},
	{"/api/settings", "Management API: general settings"},
	{"/api/feature-flags", "Management API: feature flags"},
	{"/api/concurrency", "Management API: queues and slots"},
	{"/connections", "Dashboard: connections"},
	{"/combos", "Dashboard: combos"},
	{"/keys", "Dashboard: API keys"},
	{"/runtime", "Dashboard: runtime actions"},
	{"/settings", "Dashboard: settings"},
	{"/logout", "Dashboard: sign-outs"},
}

// AuditMethods are the method choices.
var AuditMethods = []OptionVM{{"", "Any"}, {"POST", "POST"}, {"PUT", "PUT"}, {"PATCH", "PATCH"}, {"DELETE", "DELETE"}}

// AuditFiltersVM is the filter form, values as typed. Actor is "" (anyone),
// "session" (the admin) or "key:<id>".
type AuditFiltersVM struct {
	Range, Since, Until, Actor, Route, Method, Target string
	Keys                                              []OptionVM
	Errors                                            FieldErrors
}

// Query is the filters as URL parameters (blank ones left out).
func (f AuditFiltersVM) Query() url.Values {
	q := url.Values{}
	set := func(k, v string) {
		if v = strings.TrimSpace(v); v != "" {
			q.Set(k, v)
		}
	}
	set("range", f.Range)
	if f.Custom() {
		set("since", f.Since)
		set("until", f.Until)
	}
	set("actor", f.Actor)
	set("route", f.Route)
	set("method", f.Method)
	set("targetId", f.Target)
	return q
}

// Active reports whether any filter is set.
func (f AuditFiltersVM) Active() bool { return len(f.Query()) > 0 }

// Custom reports whether the from/to fields apply.
func (f AuditFiltersVM) Custom() bool {
	return f.Range == "custom" || f.Range == "" && (f.Since != "" || f.Until != "")
}

// ActorOptions are the actor choices: anyone, the admin, each key.
func (f AuditFiltersVM) ActorOptions() []OptionVM {
	out := []OptionVM{{"", "Anyone"}, {services.AuditActorSession, "The admin (dashboard or session)"}}
	return append(out, f.Keys...)
}

// AuditListVM is the table region: rows, pagination and empty states.
type AuditListVM struct {
	Rows      []AuditRowVM
	OlderURL  string
	NewestURL string
	Filtered  bool
	Errors    FieldErrors
}

// AuditRowVM is one admin action.
type AuditRowVM struct {
	ID        string
	Time      *TimeVM
	Actor     string // "admin session 3f2c1ab09d8e" or the key's name
	KeyPrefix string
	ClientIP  string
	UserAgent string
	Method    string
	Route     string
	Action    string
	Target    string
	Changes   []AuditChangeVM
}

// AuditChangeVM is one changed field.
type AuditChangeVM struct {
	Path, Before, After string
}

// NewAuditRowVM describes one entry.
func NewAuditRowVM(e services.AuditEntry, now time.Time) AuditRowVM {
	at := e.CreatedAt
	r := AuditRowVM{ID: e.ID, Time: NewTimeVM(&at, now), ClientIP: e.ClientIP, UserAgent: e.UserAgent, Method: e.Method,
		Route: e.Route, Action: e.Action, Target: e.TargetID}
	if e.ActorKind == services.AuditActorKey {
		r.Actor, r.KeyPrefix = e.ActorName, e.KeyPrefix
		if r.Actor == "" {
			r.Actor = e.ActorID
		}
	} else {
		r.Actor = "admin session " + e.ActorID
	}
	for _, c := range e.Changes {
		r.Changes = append(r.Changes, AuditChangeVM{Path: c.Path, Before: auditValue(c.Before), After: auditValue(c.After)})
	}
	return r
}

// auditValue shows a JSON value as typed, "unset" for null, cut to 120 characters.
func auditValue(raw []byte) string {
	s := string(raw)
	if s == "" || s == "null" {
		return "unset"
	}
	short, _ := shortText(s)
	return short
}

// AuditURL is the page with query q and cursor.
func AuditURL(q url.Values, cursor string) string {
	out := url.Values{}
	for k, v := range q {
		out[k] = v
	}
	if cursor != "" {
		out.Set("cursor", cursor)
	}
	if len(out) == 0 {
		return "/audit"
	}
	return "/audit?" + out.Encode()
}

func auditFocus(f AuditFiltersVM) string {
	return firstInvalid([]string{"since", "until"}, f.Errors)
}
