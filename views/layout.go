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
	// Flash is a toast rendered with the page (a message that survived a
	// redirect, such as the welcome after first-run setup); nil for none.
	Flash *FlashVM
}

// FlashVM is a toast the server renders into the toast region.
type FlashVM struct {
	Level string // success, info, warning, error
	Text  string
	// ClearParam is a query parameter that asked for the toast; app.js
	// removes it from the address, so a reload does not repeat the toast.
	ClearParam string
}

// WelcomeFlash is the toast of 50-dashboard §6.1 after first-run setup.
var WelcomeFlash = FlashVM{Level: "success", Text: "Admin password set. Welcome to Switchyard.", ClearParam: "welcome"}

// HtmxConfig is the htmx configuration of 50-dashboard §3.1: no history
// snapshots (they could hold a secret), no eval, 422 swaps.
const HtmxConfig = `{"historyCacheSize":0,"refreshOnHistoryMiss":true,"allowEval":false,"allowScriptTags":false,"includeIndicatorStyles":false,"selfRequestsOnly":true,"responseHandling":[{"code":"204","swap":false},{"code":"[23]..","swap":true},{"code":"422","swap":true},{"code":"[45]..","swap":false,"error":true},{"code":"...","swap":false}]}`

// FieldErrors maps field names to messages for form re-rendering.
type FieldErrors map[string]string

// Has reports an error for field.
func (f FieldErrors) Has(field string) bool { _, ok := f[field]; return ok }

// IsCurrent reports whether href is the active page.
func (vm LayoutVM) IsCurrent(href string) bool { return vm.Active == href }

// flashIcon is the sprite icon of a toast level (app.js uses the same).
func flashIcon(level string) string {
	switch level {
	case "success":
		return "check"
	case "warning", "error":
		return "alert"
	}
	return "info"
}
