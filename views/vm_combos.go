package views

import (
	"encoding/json"
	"sort"
	"strconv"
	"strings"

	"github.com/a-h/templ"

	"switchyard/services"
	"switchyard/services/human"
	"switchyard/services/stats"
)

// comboColumns is the number of columns of the combos table.
const comboColumns = 5

// CombosPageVM is the Combos list page (50-dashboard §6.5).
type CombosPageVM struct {
	List  CombosListVM
	Saved string // name of the combo just saved, shown after the redirect
}

// CombosListVM is the ordered combo table (or its empty state).
type CombosListVM struct {
	Rows           []ComboRowVM
	Confirm        *ConfirmVM
	Panel          *ComboPanelVM // routing preview or test results open under a row (full-page render)
	OOB            bool
	HasConnections bool
}

// Empty reports no combo at all.
func (vm CombosListVM) Empty() bool { return len(vm.Rows) == 0 }

// WithConfirm opens a confirmation panel under its row.
func (vm CombosListVM) WithConfirm(cf *ConfirmVM) CombosListVM {
	vm.Confirm = cf
	return vm
}

// ComboRowVM is one combo in the list.
type ComboRowVM struct {
	ID          string
	Name        string
	Description string
	Strategy    string
	Enabled     bool
	Hidden      bool
	Targets     []TargetChipVM
	First, Last bool
	UpVals      string // hx-vals of Move up: the full id order after the move
	DownVals    string
	FocusUp     bool // autofocus after a reorder
	FocusDown   bool
	// Traffic is the last hour of the combo's requests (WithTraffic); nil
	// when the request log was not read.
	Traffic *TrafficVM
	// Weights is the weights bar, for strategies that draw by weight; nil
	// otherwise (50-dashboard §6.5).
	Weights []WeightSegmentVM
}

// WithTraffic sets each row's requests and success rate over the request
// log entries given (the last hour), grouped by combo name.
func (l CombosListVM) WithTraffic(entries []services.RequestLogEntry, truncated bool) CombosListVM {
	by := map[string][]services.RequestLogEntry{}
	for _, e := range entries {
		if e.ComboName != "" {
			by[e.ComboName] = append(by[e.ComboName], e)
		}
	}
	for i := range l.Rows {
		t := comboTraffic(by[l.Rows[i].Name])
		l.Rows[i].Traffic = &t
	}
	return l
}

// comboTraffic counts a combo's requests and successes by the Overview's
// rule (stats.Succeeded; client aborts apart).
func comboTraffic(entries []services.RequestLogEntry) TrafficVM {
	var t TrafficVM
	for i := range entries {
		e := &entries[i]
		t.Requests++
		switch {
		case e.Outcome == services.RequestOutcomeAborted:
			t.Aborted++
		case stats.Succeeded(e):
			t.Successes++
		}
	}
	return t
}

// TrafficText is "N requests · success %" for the list, "no requests" or "—".
func (r ComboRowVM) TrafficText() string {
	switch {
	case r.Traffic == nil:
		return "—"
	case r.Traffic.Requests == 0:
		return "no requests"
	}
	return human.Plural(r.Traffic.Requests, "request", "requests") + " · " +
		r.Traffic.SuccessRateText() + " success"
}

// TargetChipVM is one target as "provider/model (connection)".
type TargetChipVM struct {
	Text     string
	Disabled bool
	// WeightText is "weight 3 · 60.0 %" for strategies that use weights
	// (the share among the enabled targets), else "".
	WeightText string
	Ready      *ReadinessVM    // whether routing could use it now (WithReadiness)
	Metrics    TargetMetricsVM // live dispatch metrics (WithMetrics); unknown until then
}

// NewCombosListVM builds the list in order. focus ("up:<id>" or
// "down:<id>") names the button that moved a row, which keeps focus.
func NewCombosListVM(combos []services.Combo, conns []services.Connection, focus string) CombosListVM {
	connName := map[string]string{}
	for _, c := range conns {
		connName[c.ID] = c.Name
	}
	comboName := map[string]string{}
	ids := make([]string, len(combos))
	for i, c := range combos {
		comboName[c.ID] = c.Name
		ids[i] = c.ID
	}
	vm := CombosListVM{HasConnections: len(conns) > 0}
	for i, c := range combos {
		r := ComboRowVM{ID: c.ID, Name: c.Name, Description: c.Description, Strategy: c.Strategy, Enabled: c.Enabled,
			Hidden: c.Hidden, First: i == 0, Last: i == len(combos)-1}
		for _, t := range c.Targets {
			chip := TargetChipVM{Disabled: !t.IsEnabled(), Metrics: UnknownTargetMetrics}
			if t.Kind == services.KindCombo {
				name := comboName[t.ComboID]
				if name == "" {
					name = t.ComboID
				}
				chip.Text = "combo " + name
			} else {
				conn := "any connection"
				if t.ConnectionID != nil {
					conn = connName[*t.ConnectionID]
					if conn == "" {
						conn = "missing connection"
					}
				}
				chip.Text = t.Provider + "/" + t.Model + " (" + conn + ")"
			}
			r.Targets = append(r.Targets, chip)
		}
		if info, ok := services.LookupStrategy(c.Strategy); ok && info.UsesWeights {
			r.Weights = weightSegments(c.Targets, r.Targets)
		}
		if !r.First {
			r.UpVals = reorderVals(ids, i, i-1, "up:"+c.ID)
		}
		if !r.Last {
			r.DownVals = reorderVals(ids, i, i+1, "down:"+c.ID)
		}
		switch focus {
		case "up:" + c.ID:
			r.FocusUp, r.FocusDown = !r.First, r.First
		case "down:" + c.ID:
			r.FocusDown, r.FocusUp = !r.Last, r.Last
		}
		vm.Rows = append(vm.Rows, r)
	}
	return vm
}

// reorderVals is the hx-vals of a move button: every id in the new order
// (POST /combos/reorder takes the full order) and the button to refocus.
func reorderVals(ids []string, from, to int, focus string) string {
	order := append([]string(nil), ids...)
	order[from], order[to] = order[to], order[from]
	b, _ := json.Marshal(map[string]string{"ids": strings.Join(order, ","), "focus": focus})
	return string(b)
}

// ComboDeleteConfirm lists what deleting a combo touches: combos that refer
// to it (the reference is removed, so the delete is forced) and keys whose
// allowed combos name it.
func ComboDeleteConfirm(c services.Combo, refs []services.Combo, keys []services.APIKey) *ConfirmVM {
	cf := &ConfirmVM{RowKind: RowCombo, ID: c.ID, Title: "Delete combo " + c.Name + "?", Action: "Delete combo",
		Method: "delete", URL: "/combos/" + c.ID, Target: "#" + CombosListID, Cancel: "/combos", Colspan: comboColumns}
	cf.Lines = append(cf.Lines, "Clients asking for model '"+c.Name+"' will no longer reach it.")
	if len(refs) > 0 {
		names := make([]string, len(refs))
		for i, r := range refs {
			names[i] = r.Name
		}
		sort.Strings(names)
		cf.Groups = append(cf.Groups, ConfirmGroupVM{Title: "Combos that refer to it (the reference is removed from them):", Names: names})
		cf.Vals = `{"force":"1"}`
	}
	var keyNames []string
	for _, k := range keys {
		if k.AllowedCombos != nil && k.AllowsCombo(c.Name) {
			keyNames = append(keyNames, k.Name)
		}
	}
	if len(keyNames) > 0 {
		sort.Strings(keyNames)
		cf.Groups = append(cf.Groups, ConfirmGroupVM{Title: "API keys whose allowed combos include it:", Names: keyNames})
	}
	return cf
}

// StrategyOptionVM is one entry of the strategy select.
type StrategyOptionVM struct {
	Name     string
	Describe string
}

// TargetRowVM is one target row of the builder, with the values as typed.
type TargetRowVM struct {
	Index        int
	ID           string
	Kind         string // model or combo
	Provider     string
	Model        string
	ConnectionID string
	ComboID      string
	Weight       string
	Label        string
	Prompt       string
	Enabled      string // "true" or "false", carried through
	ConnOptions  []ProviderOption
	First, Last  bool
}

// field is the form name of one of the target's fields ("targets.2.model").
func (t TargetRowVM) field(name string) string {
	return "targets." + strconv.Itoa(t.Index) + "." + name
}

// ComboConfigVM holds the Advanced fields as typed (blank = the default).
type ComboConfigVM struct {
	MaxRetries       string
	RetryDelayMs     string
	TargetTimeoutMs  string
	MaxComboDepth    string
	SessionSticky    string // "", "on", "off"
	StickyRR         string
	StickyWeighted   string
	QueueConcurrency string
	QueueDepth       string
	QueueTimeoutMs   string
}

// ComboConfigFields are the form names of the Advanced fields, each a combo
// config key (30-routing §3) under "config.".
var ComboConfigFields = []string{"config.maxRetries", "config.retryDelayMs", "config.targetTimeoutMs",
	"config.maxComboDepth", "config.sessionSticky", "config.stickyRoundRobinLimit", "config.stickyWeightedLimit",
	"config.queue.concurrencyPerTarget", "config.queue.depth", "config.queue.timeoutMs"}

// ComboBuilderVM is the combo builder form.
type ComboBuilderVM struct {
	Edit        bool
	ID          string
	Name        string
	Description string
	Hidden      bool
	Enabled     bool
	Strategy    string
	Targets     []TargetRowVM
	Config      ComboConfigVM
	ConfigExtra string // JSON of config keys the form does not show, carried through
	Errors      FieldErrors
	Focus       string // control id that gets autofocus after a builder edit

	Strategies  []StrategyOptionVM
	Describe    string
	UsesWeights bool
	Pipeline    bool
	Providers   []ProviderOption
	Models      map[string][]string
	Combos      []ProviderOption // other combos, for combo references
	connByProv  map[string][]ProviderOption
}

// ErrorFocus is the first invalid field, which gets autofocus.
func (vm ComboBuilderVM) ErrorFocus() string {
	order := []string{"name", "description", "strategy", "targets"}
	for _, t := range vm.Targets {
		for _, f := range []string{"kind", "provider", "model", "connectionId", "comboId", "weight", "label", "prompt"} {
			order = append(order, t.field(f))
		}
	}
	order = append(order, ComboConfigFields...)
	return firstInvalid(order, vm.Errors)
}

// AdvancedOpen opens the Advanced section when it holds a value or an error.
func (vm ComboBuilderVM) AdvancedOpen() bool {
	c := vm.Config
	return hasPrefixError(vm.Errors, "config.") || c.MaxRetries != "" || c.RetryDelayMs != "" || c.TargetTimeoutMs != "" ||
		c.MaxComboDepth != "" || c.SessionSticky != "" || c.StickyRR != "" || c.StickyWeighted != "" ||
		c.QueueConcurrency != "" || c.QueueDepth != "" || c.QueueTimeoutMs != ""
}

// NewComboBuilderVM is the empty builder: priority, one empty target.
func NewComboBuilderVM() ComboBuilderVM {
	return ComboBuilderVM{Enabled: true, Strategy: "priority", Targets: []TargetRowVM{{Kind: services.KindModel, Enabled: "true"}}}
}

// EditComboBuilderVM is the builder filled from a stored combo.
func EditComboBuilderVM(c services.Combo) ComboBuilderVM {
	vm := ComboBuilderVM{Edit: true, ID: c.ID, Name: c.Name, Description: c.Description, Hidden: c.Hidden,
		Enabled: c.Enabled, Strategy: c.Strategy}
	for _, t := range c.Targets {
		r := TargetRowVM{ID: t.ID, Kind: t.Kind, Provider: t.Provider, Model: t.Model, ComboID: t.ComboID,
			Prompt: t.Prompt, Enabled: strconv.FormatBool(t.IsEnabled())}
		if t.ConnectionID != nil {
			r.ConnectionID = *t.ConnectionID
		}
		if t.Weight != nil {
			r.Weight = strconv.Itoa(*t.Weight)
		}
		if t.Label != nil {
			r.Label = *t.Label
		}
		vm.Targets = append(vm.Targets, r)
	}
	vm.Config, vm.ConfigExtra = comboConfigVM(c.Config)
	return vm
}

// comboConfigVM splits a combo config into the builder's Advanced fields and
// the JSON of every other key (kept as typed in the Advanced text box).
func comboConfigVM(cfg services.ComboConfig) (ComboConfigVM, string) {
	var vm ComboConfigVM
	vm.MaxRetries = intText(cfg.MaxRetries)
	vm.RetryDelayMs = int64Text(cfg.RetryDelayMs)
	vm.TargetTimeoutMs = int64Text(cfg.TargetTimeoutMs)
	vm.MaxComboDepth = intText(cfg.MaxComboDepth)
	vm.StickyRR = intText(cfg.StickyRoundRobinLimit)
	vm.StickyWeighted = intText(cfg.StickyWeightedLimit)
	if cfg.SessionSticky != nil {
		vm.SessionSticky = map[bool]string{true: "on", false: "off"}[*cfg.SessionSticky]
	}
	if q := cfg.Queue; q != nil {
		vm.QueueConcurrency, vm.QueueDepth, vm.QueueTimeoutMs = intText(q.ConcurrencyPerTarget), intText(q.Depth), int64Text(q.TimeoutMs)
	}
	rest := cfg
	rest.MaxRetries, rest.RetryDelayMs, rest.TargetTimeoutMs, rest.MaxComboDepth = nil, nil, nil, nil
	rest.StickyRoundRobinLimit, rest.StickyWeightedLimit, rest.SessionSticky, rest.Queue = nil, nil, nil, nil
	if rest.IsZero() {
		return vm, ""
	}
	b, _ := json.Marshal(rest)
	return vm, string(b)
}

func intText(v *int) string {
	if v == nil {
		return ""
	}
	return strconv.Itoa(*v)
}

func int64Text(v *int64) string {
	if v == nil {
		return ""
	}
	return strconv.FormatInt(*v, 10)
}

// Apply performs a builder edit (50-dashboard §6.5): "add-target",
// "remove-target:N", "up:N", "down:N", "strategy"; anything else only
// re-renders. N counts from 0. Nothing is saved.
func (vm *ComboBuilderVM) Apply(op string) {
	verb, arg, _ := strings.Cut(op, ":")
	n, err := strconv.Atoi(arg)
	valid := err == nil && n >= 0 && n < len(vm.Targets)
	switch {
	case verb == "add-target":
		vm.Targets = append(vm.Targets, TargetRowVM{Kind: services.KindModel, Enabled: "true"})
		vm.Focus = fieldAnchor("targets." + strconv.Itoa(len(vm.Targets)-1) + ".provider")
	case verb == "remove-target" && valid:
		vm.Targets = append(vm.Targets[:n], vm.Targets[n+1:]...)
		vm.Focus = ComboAddTargetID
	case verb == "up" && valid && n > 0:
		vm.Targets[n-1], vm.Targets[n] = vm.Targets[n], vm.Targets[n-1]
		vm.Focus = targetButtonID("up", n-1)
		if n-1 == 0 {
			vm.Focus = targetButtonID("down", 0)
		}
	case verb == "down" && valid && n < len(vm.Targets)-1:
		vm.Targets[n+1], vm.Targets[n] = vm.Targets[n], vm.Targets[n+1]
		vm.Focus = targetButtonID("down", n+1)
		if n+1 == len(vm.Targets)-1 {
			vm.Focus = targetButtonID("up", n+1)
		}
	case verb == "strategy":
		vm.Focus = ComboStrategyID
	}
	for i := range vm.Targets {
		vm.Targets[i].Index = i
	}
}

func targetButtonID(op string, i int) string { return "target-" + strconv.Itoa(i) + "-" + op }

// Fill adds what the form needs besides the typed values: strategy list and
// explanation, provider, connection, model and combo options;
// strategies is the registered list (services.Strategies), in picker order.
func (vm *ComboBuilderVM) Fill(strategies []services.StrategyInfo, providers []services.Provider, conns []services.Connection, combos []services.Combo) {
	vm.Strategies = nil
	for _, s := range strategies {
		vm.Strategies = append(vm.Strategies, StrategyOptionVM{Name: s.Name, Describe: s.Describe})
		if s.Name == vm.Strategy {
			vm.Describe, vm.UsesWeights, vm.Pipeline = s.Describe, s.UsesWeights, s.Name == "pipeline"
		}
	}
	vm.Providers, vm.Models = nil, map[string][]string{}
	for _, p := range providers {
		vm.Providers = append(vm.Providers, ProviderOption{Value: p.ID, Label: p.Name})
		vm.Models[p.ID] = p.Models
	}
	vm.connByProv = map[string][]ProviderOption{}
	for _, c := range conns {
		vm.connByProv[c.Provider] = append(vm.connByProv[c.Provider], ProviderOption{Value: c.ID, Label: c.Name})
	}
	vm.Combos = nil
	for _, c := range combos {
		if c.ID != vm.ID {
			vm.Combos = append(vm.Combos, ProviderOption{Value: c.ID, Label: c.Name})
		}
	}
	for i := range vm.Targets {
		t := &vm.Targets[i]
		t.Index, t.First, t.Last = i, i == 0, i == len(vm.Targets)-1
		t.ConnOptions = vm.connByProv[t.Provider]
		if t.Kind == "" {
			t.Kind = services.KindModel
		}
		if t.Enabled == "" {
			t.Enabled = "true"
		}
	}
}

// ModelProviders are the providers used by the targets, for their datalists.
func (vm ComboBuilderVM) ModelProviders() []string {
	seen := map[string]bool{}
	var out []string
	for _, t := range vm.Targets {
		if t.Kind == services.KindModel && t.Provider != "" && !seen[t.Provider] && len(vm.Models[t.Provider]) > 0 {
			seen[t.Provider] = true
			out = append(out, t.Provider)
		}
	}
	return out
}

// autofocusIf adds autofocus to the control the last builder edit concerned.
func autofocusIf(on bool) templ.Attributes {
	if on {
		return templ.Attributes{"autofocus": true}
	}
	return templ.Attributes{}
}

// ComboWarningText words a save warning of the combos service (50-dashboard §6.5).
func ComboWarningText(w string) string {
	switch {
	case w == "all weights are 0":
		return "All weights are 0, so every target is equally likely."
	case strings.HasPrefix(w, "name shadows model "):
		return "Clients asking for model " + strings.TrimPrefix(w, "name shadows model ") + " will now get this combo."
	}
	return sentence(w)
}

// comboNameRule is the naming rule shown as help under the name field.
const comboNameRule = services.ComboNameRule

func hasOption(opts []ProviderOption, v string) bool {
	for _, o := range opts {
		if o.Value == v {
			return true
		}
	}
	return false
}
