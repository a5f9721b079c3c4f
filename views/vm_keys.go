package views

import (
	"strconv"
	"strings"
	"time"

	"switchyard/services"
)

// keyColumns is the number of columns of the keys table.
const keyColumns = 9

// KeysPageVM is the API keys page (50-dashboard §6.6).
type KeysPageVM struct {
	List   KeysListVM
	Form   *KeyFormVM   // the open create/edit form, or nil
	Secret *KeySecretVM // the one-time secret panel, or nil
}

// KeysListVM is the key table (or its empty state).
type KeysListVM struct {
	Rows    []KeyRowVM
	Confirm *ConfirmVM
	OOB     bool
}

// Empty reports no key at all.
func (vm KeysListVM) Empty() bool { return len(vm.Rows) == 0 }

// WithConfirm opens a confirmation panel under its row.
func (vm KeysListVM) WithConfirm(cf *ConfirmVM) KeysListVM {
	vm.Confirm = cf
	return vm
}

// KeyRowVM is one key in the list. The secret is never part of it.
type KeyRowVM struct {
	ID        string
	Name      string
	Prefix    string // "sk-sy-Ab12Cd…"
	State     string // active, disabled, revoked, expired
	StateIcon string
	Revoked   bool
	RevokedAt *TimeVM
	Scopes    []string
	Allows    string // "3 combos, all models, all connections"
	Created   *TimeVM
	Expires   *TimeVM
	LastUsed  *TimeVM
}

// NewKeysListVM builds the list (newest first, as the service returns it).
func NewKeysListVM(keys []services.APIKey, now time.Time) KeysListVM {
	var vm KeysListVM
	for _, k := range keys {
		vm.Rows = append(vm.Rows, NewKeyRowVM(k, now))
	}
	return vm
}

// NewKeyRowVM derives a key row at now.
func NewKeyRowVM(k services.APIKey, now time.Time) KeyRowVM {
	created := k.CreatedAt
	r := KeyRowVM{ID: k.ID, Name: k.Name, Prefix: k.Prefix + "…", State: k.State(now), Revoked: k.RevokedAt != nil,
		RevokedAt: NewTimeVM(k.RevokedAt, now), Scopes: k.Scopes, Created: NewTimeVM(&created, now),
		Expires: NewTimeVM(k.ExpiresAt, now), LastUsed: NewTimeVM(k.LastUsedAt, now)}
	switch r.State {
	case services.KeyActive:
		r.StateIcon = "check"
	case services.KeyRevoked:
		r.StateIcon = "ban"
	case services.KeyExpired:
		r.StateIcon = "clock"
	default:
		r.StateIcon = "x"
	}
	r.Allows = strings.Join([]string{
		allowSummary(k.AllowedModels, "model", "models"),
		allowSummary(k.AllowedCombos, "combo", "combos"),
		allowSummary(k.AllowedConnections, "connection", "connections"),
	}, ", ")
	return r
}

// allowSummary words one allowlist: nil is "all models", [] is "no models".
func allowSummary(list []string, one, many string) string {
	switch {
	case list == nil:
		return "all " + many
	case len(list) == 0:
		return "no " + many
	case len(list) == 1:
		return "1 " + one
	}
	return strconv.Itoa(len(list)) + " " + many
}

// KeyRevokeConfirm is the revoke confirmation of a key.
func KeyRevokeConfirm(k services.APIKey) *ConfirmVM {
	return &ConfirmVM{RowKind: RowKey, ID: k.ID, Title: "Revoke key " + k.Name + "?",
		Lines:  []string{"Requests with this key fail from the next request on. A revoked key cannot be restored; create a new one instead."},
		Action: "Revoke key", Method: "post", URL: "/keys/" + k.ID + "/revoke", Target: "#" + KeysListID, Cancel: "/keys", Colspan: keyColumns}
}

// KeyDeleteConfirm is the delete confirmation of a revoked key.
func KeyDeleteConfirm(k services.APIKey) *ConfirmVM {
	return &ConfirmVM{RowKind: RowKey, ID: k.ID, Title: "Delete key " + k.Name + "?",
		Lines:  []string{"The key disappears from this list. Request logs keep its id, name and prefix."},
		Action: "Delete key", Method: "delete", URL: "/keys/" + k.ID, Target: "#" + KeysListID, Cancel: "/keys", Colspan: keyColumns}
}

// ScopeVM is one scope checkbox with its meaning.
type ScopeVM struct {
	Value   string
	Meaning string
}

// KeyScopes are the scopes a key may carry, with their meaning (50-dashboard §6.6).
var KeyScopes = []ScopeVM{
	{services.ScopeInference, "May call the client API (/v1)"},
	{services.ScopeManage, "May call the management API (/api) with this key"},
	{services.ScopeMetrics, "May read /metrics and nothing else"},
	{services.ScopeLeaseExclusive, "May hold exclusive connection leases; needs at least one allowed connection"},
}

// KeyConnGroupVM is one provider's connections in the allowlist.
type KeyConnGroupVM struct {
	Provider string
	Conns    []ProviderOption
}

// KeyFormVM is the create or edit form, values as typed.
type KeyFormVM struct {
	Edit          bool
	ID            string
	Name          string
	Enabled       bool
	Scopes        map[string]bool
	ModelsAny     bool
	Models        string // one pattern per line
	CombosAny     bool
	Combos        map[string]bool // ticked combo names
	ComboPatterns string
	ConnsAny      bool
	Conns         map[string]bool // ticked connection ids
	RPM           string
	Concurrent    string
	Expires       string // YYYY-MM-DD
	Errors        FieldErrors

	ComboNames []string
	ConnGroups []KeyConnGroupVM
}

var keyFieldOrder = []string{"name", "enabled", "scopes", "allowedModels", "allowedCombosPatterns", "allowedCombos",
	"allowedConnections", "requestsPerMinute", "maxConcurrentRequests", "expiresAt"}

// Focus is the first invalid field.
func (vm KeyFormVM) Focus() string { return firstInvalid(keyFieldOrder, vm.Errors) }

// NewKeyFormVM is the empty create form: enabled, inference, no restriction.
func NewKeyFormVM() KeyFormVM {
	return KeyFormVM{Enabled: true, Scopes: map[string]bool{services.ScopeInference: true},
		ModelsAny: true, CombosAny: true, ConnsAny: true}
}

// EditKeyFormVM is the edit form of k. Allowed combos that name an existing
// combo are ticked; the other entries are shown as patterns.
func EditKeyFormVM(k services.APIKey, combos []services.Combo) KeyFormVM {
	vm := KeyFormVM{Edit: true, ID: k.ID, Name: k.Name, Enabled: k.Enabled, Scopes: map[string]bool{},
		ModelsAny: k.AllowedModels == nil, Models: strings.Join(k.AllowedModels, "\n"),
		CombosAny: k.AllowedCombos == nil, Combos: map[string]bool{},
		ConnsAny: k.AllowedConnections == nil, Conns: map[string]bool{},
		RPM: optInt(k.RequestsPerMinute), Concurrent: optInt(k.MaxConcurrentRequests)}
	for _, s := range k.Scopes {
		vm.Scopes[s] = true
	}
	names := map[string]bool{}
	for _, c := range combos {
		names[c.Name] = true
	}
	var patterns []string
	for _, p := range k.AllowedCombos {
		if names[p] {
			vm.Combos[p] = true
		} else {
			patterns = append(patterns, p)
		}
	}
	vm.ComboPatterns = strings.Join(patterns, "\n")
	for _, id := range k.AllowedConnections {
		vm.Conns[id] = true
	}
	if k.ExpiresAt != nil {
		vm.Expires = k.ExpiresAt.UTC().Format("2006-01-02")
	}
	return vm
}

// Fill adds the combo names and connections to choose from.
func (vm *KeyFormVM) Fill(combos []services.Combo, conns []services.Connection) {
	vm.ComboNames = nil
	for _, c := range combos {
		vm.ComboNames = append(vm.ComboNames, c.Name)
	}
	vm.ConnGroups = nil
	for _, c := range conns {
		if n := len(vm.ConnGroups); n == 0 || vm.ConnGroups[n-1].Provider != c.Provider {
			vm.ConnGroups = append(vm.ConnGroups, KeyConnGroupVM{Provider: c.Provider})
		}
		g := &vm.ConnGroups[len(vm.ConnGroups)-1]
		g.Conns = append(g.Conns, ProviderOption{Value: c.ID, Label: c.Name})
	}
}

// KeySecretVM is the one-time secret panel.
type KeySecretVM struct {
	Name   string
	Secret string
	Curl   string
}

// NewKeySecretVM builds the panel with a ready curl line for baseURL (…/v1).
func NewKeySecretVM(name, secret, baseURL, model string) *KeySecretVM {
	return &KeySecretVM{Name: name, Secret: secret, Curl: "curl " + baseURL + "/chat/completions \\\n" +
		"  -H \"Authorization: Bearer " + secret + "\" \\\n" +
		"  -H \"Content-Type: application/json\" \\\n" +
		"  -d '{\"model\": \"" + model + "\", \"messages\": [{\"role\": \"user\", \"content\": \"Hello\"}]}'"}
}

// ExampleModel is the model used in snippets: the first enabled combo, else
// the first model of an enabled connection, else "<model>" (50-dashboard §6.3).
func ExampleModel(combos []services.Combo, conns []services.Connection, providers []services.Provider) string {
	for _, c := range combos {
		if c.Enabled {
			return c.Name
		}
	}
	models := map[string][]string{}
	for _, p := range providers {
		models[p.ID] = p.Models
	}
	for _, c := range conns {
		if !c.Enabled {
			continue
		}
		if c.DefaultModel != "" {
			return c.Provider + "/" + c.DefaultModel
		}
		if m := models[c.Provider]; len(m) > 0 {
			return c.Provider + "/" + m[0]
		}
	}
	return "<model>"
}
