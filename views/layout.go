package views

// NavItem is one sidebar entry.
type NavItem struct {
	Label string
	Href  string
	Group string // "" or "Settings"
}

// Nav is the sidebar in order (50-dashboard §2).
var Nav = []NavItem{
	{"Overview", "/", ""},
	{"Connections", "/connections", ""},
	{"Combos", "/combos", ""},
	{"API keys", "/keys", ""},
	{"Request logs", "/logs", ""},
	{"Audit log", "/audit", ""},
	{"Runtime", "/runtime", ""},
	{"Resilience", "/settings/resilience", "Settings"},
	{"Feature flags", "/settings/flags", "Settings"},
	{"Model prices", "/settings/prices", "Settings"},
	{"Account", "/settings/account", "Settings"},
	{"Health", "/health", ""},
}

// LayoutVM is what every full page needs besides its content.
type LayoutVM struct {
	Title     string // page name; <title> is "<Title> · Switchyard"
	Active    string // href of the current nav entry
	Version   string
	Demo      bool
	PlainHTTP bool // listener not on loopback and no TLS: warn
	SignedIn  bool
}

// HtmxConfig is the htmx configuration of 50-dashboard §3.1: no history
// snapshots (they could hold a secret), no eval, 422 swaps.
const HtmxConfig = `{"historyCacheSize":0,"refreshOnHistoryMiss":true,"allowEval":false,"allowScriptTags":false,"includeIndicatorStyles":false,"selfRequestsOnly":true,"responseHandling":[{"code":"204","swap":false},{"code":"[23]..","swap":true},{"code":"422","swap":true},{"code":"[45]..","swap":false,"error":true},{"code":"...","swap":false}]}`

// FieldErrors maps field names to messages for form re-rendering.
type FieldErrors map[string]string

// Has reports an error for field.
func (f FieldErrors) Has(field string) bool { _, ok := f[field]; return ok }

// IsCurrent reports whether href is the active page.
func (vm LayoutVM) IsCurrent(href string) bool { return vm.Active == href }
