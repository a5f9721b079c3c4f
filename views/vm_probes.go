package views

import (
	"math"
	"strconv"
	"strings"
	"time"

	"switchyard/services"
	"switchyard/services/gateway"
	"switchyard/services/human"
)

// View models of the connection Test button, the combo readiness dots, the
// combo Test results and the routing preview (50-dashboard §6.4, §6.5).

// ConnTestResultVM is the result line a connection test leaves in its row:
// "OK · 412 ms · 37 models" or "401 Unauthorized — check the API key · 230 ms".
type ConnTestResultVM struct {
	OK   bool
	Text string
}

// NewConnTestResultVM words a connection test result.
func NewConnTestResultVM(r services.TestResult) ConnTestResultVM {
	if r.OK {
		text := "OK · " + human.Duration(millis(r.LatencyMs), human.Latency)
		if len(r.Models) > 0 {
			text += " · " + human.Plural(len(r.Models), "model", "models")
		}
		return ConnTestResultVM{OK: true, Text: text}
	}
	msg, _ := shortText(r.Message)
	switch {
	case msg == "":
		msg = "Failed"
	case r.Status == 0:
		msg = "Failed — " + msg
	}
	if r.Status != 0 || r.LatencyMs > 0 {
		msg += " · " + human.Duration(millis(r.LatencyMs), human.Latency)
	}
	return ConnTestResultVM{Text: msg}
}

// Readiness states of a combo target (its dot).
const (
	ReadyState       = "ready"
	CoolingState     = "cooling"
	UnavailableState = "unavailable"
	DisabledState    = "disabled"
)

// ReadinessVM is whether routing could use a combo target right now, and
// why not: the dot and its text.
type ReadinessVM struct {
	State   string // ReadyState, CoolingState, UnavailableState, DisabledState
	Text    string // "ready", "breaker open", "all connections cooling" …
	RetryIn *CountdownVM
}

// DotClass is the dot's modifier: filled when ready, a ring while waiting,
// a dotted ring when unavailable, neutral when switched off.
func (r ReadinessVM) DotClass() string {
	switch r.State {
	case ReadyState:
		return "dot--ready"
	case CoolingState:
		return "dot--skipped"
	case UnavailableState:
		return "dot--down"
	}
	return ""
}

// Ready reports a target routing could use now.
func (r ReadinessVM) Ready() bool { return r.State == ReadyState }

// WithReadiness puts the readiness of every target on its chip; ready maps
// a combo id to one entry per target, in target order.
func (vm CombosListVM) WithReadiness(ready map[string][]ReadinessVM) CombosListVM {
	rows := make([]ComboRowVM, len(vm.Rows))
	for i, r := range vm.Rows {
		chips := make([]TargetChipVM, len(r.Targets))
		copy(chips, r.Targets)
		for j := range chips {
			if j < len(ready[r.ID]) {
				rd := ready[r.ID][j]
				chips[j].Ready = &rd
			}
		}
		r.Targets = chips
		rows[i] = r
	}
	vm.Rows = rows
	return vm
}

// ReadyCount is the number of targets routing could use now.
func (r ComboRowVM) ReadyCount() int {
	n := 0
	for _, t := range r.Targets {
		if t.Ready != nil && t.Ready.Ready() {
			n++
		}
	}
	return n
}

// ComboPanelVM is what is open in the slot under a combo row: the routing
// preview or the test results.
type ComboPanelVM struct {
	ComboID string
	Preview *ComboPreviewVM
	Test    *ComboTestVM
}

// ComboPreviewVM is the order a combo's strategy would use right now.
type ComboPreviewVM struct {
	ComboID   string
	ComboName string
	Strategy  string
	Sample    bool // a random strategy: this is one draw
	Targets   []PreviewTargetVM
}

// PreviewTargetVM is one target of the preview, in the order it would be tried.
type PreviewTargetVM struct {
	Position    int // 1-based
	Target      string
	Eligible    bool
	Reason      string
	RetryIn     *CountdownVM
	Connections []PreviewConnVM
}

// PreviewConnVM is one connection of a previewed target.
type PreviewConnVM struct {
	Name     string
	Eligible bool
	Reason   string
}

// NewComboPreviewVM shapes the gateway's explanation of a combo; connNames
// maps connection ids to names.
func NewComboPreviewVM(c services.Combo, strategy string, sample bool, targets []gateway.ExplainTarget, connNames map[string]string, now time.Time) ComboPreviewVM {
	vm := ComboPreviewVM{ComboID: c.ID, ComboName: c.Name, Strategy: strategy, Sample: sample}
	for i, t := range targets {
		pt := PreviewTargetVM{Position: i + 1, Target: t.Target, Eligible: t.Eligible, Reason: reasonText(t.Reason)}
		if t.RetryAfterMs != nil {
			pt.RetryIn = countdownAfter(*t.RetryAfterMs, now)
		}
		for _, cn := range t.Connections {
			pt.Connections = append(pt.Connections, PreviewConnVM{Name: orID(connNames[cn.ID], cn.ID), Eligible: cn.Eligible,
				Reason: reasonText(cn.Reason)})
		}
		vm.Targets = append(vm.Targets, pt)
	}
	return vm
}

// ComboTestVM is the results table of a combo test.
type ComboTestVM struct {
	ComboID   string
	ComboName string
	Forced    bool
	Rows      []ComboTestRowVM
	HeldBack  int // targets skipped because the resilience gates hold them back
}

// ComboTestRowVM is one target of a combo test.
type ComboTestRowVM struct {
	Position   int // 1-based
	Target     string
	Connection string
	Badge      BadgeVM
	Status     string
	Latency    string
	Detail     string
}

// heldBackReasons are skip reasons a forced test goes past.
var heldBackReasons = map[string]bool{"circuit_open": true, "provider_cooldown": true, "model_lockout": true, "cooling": true, "quota_window": true,
	services.TerminalBanned: true, services.TerminalExpired: true, services.TerminalCreditsExhausted: true}

// NewComboTestVM shapes the results of a combo test.
func NewComboTestVM(c services.Combo, results []gateway.ComboTestResult, forced bool, now time.Time) ComboTestVM {
	vm := ComboTestVM{ComboID: c.ID, ComboName: c.Name, Forced: forced}
	for _, r := range results {
		row := ComboTestRowVM{Position: r.Index + 1, Target: r.Target, Connection: orID(r.ConnectionName, r.ConnectionID)}
		if r.Status != 0 {
			row.Status = strconv.Itoa(r.Status)
		}
		if r.LatencyMs != nil {
			row.Latency = human.Duration(millis(*r.LatencyMs), human.Latency)
		}
		switch r.Outcome {
		case gateway.ComboTestOK:
			row.Badge = BadgeVM{"ok", "OK", "check"}
			row.Detail = r.Message
		case gateway.ComboTestError:
			row.Badge = BadgeVM{"error", "failed", "alert"}
			row.Detail, _ = shortText(r.Message)
		default:
			row.Badge = BadgeVM{"neutral", "skipped", "clock"}
			row.Detail = skipText(r.SkipReason)
			if r.RetryAfterMs != nil {
				if cd := countdownAfter(*r.RetryAfterMs, now); cd != nil {
					row.Detail += "; eligible again in " + human.Duration(millis(cd.Ms), human.Countdown)
				}
			}
			if heldBackReasons[r.SkipReason] {
				vm.HeldBack++
			}
		}
		vm.Rows = append(vm.Rows, row)
	}
	return vm
}

// skipText words why a combo test skipped a target.
func skipText(reason string) string {
	switch reason {
	case "circuit_open":
		return "Skipped: the provider's breaker is open"
	case "provider_cooldown":
		return "Skipped: the provider is cooling down (window gate)"
	case "model_lockout":
		return "Skipped: the model is locked on every connection"
	case "cooling":
		return "Skipped: every connection is cooling down"
	case "quota_window":
		return "Skipped: every connection has used up its quota window"
	case "combo_reference":
		return "Skipped: a combo reference; test that combo on its own"
	case "disabled":
		return "Skipped: the target is switched off"
	case "no_enabled_connection":
		return "Skipped: the provider has no enabled connection"
	case "connection_disabled":
		return "Skipped: the pinned connection is disabled"
	case "connection_missing":
		return "Skipped: the pinned connection no longer exists"
	case "unknown_provider":
		return "Skipped: the provider is unknown"
	case "":
		return "Skipped"
	}
	return "Skipped: " + strings.ReplaceAll(reason, "_", " ")
}

// orDash shows "—" for an empty cell.
func orDash(s string) string {
	if s == "" {
		return "—"
	}
	return s
}

// DisabledWhileSaving is the hx-disabled-elt of a settings card's form: its
// Save button (and the hidden default button of the rules editor), by id, so
// a double click or a second Enter sends one request, and the requests of
// the card's other controls (Restore defaults, rule edits), which inherit
// the attribute, find the same buttons.
func (vm SettingsCardVM) DisabledWhileSaving() string {
	sel := "#" + RowID(RowSettingsSave, vm.Def.Section)
	if vm.Rules != nil {
		sel += ", #" + RowID(RowSettingsSubmit, vm.Def.Section)
	}
	return sel
}

// DisabledWhileSaving is the hx-disabled-elt of a feature flag's form: its
// Save and Reset buttons, by id, so either sends one request at a time.
func (r FlagRowVM) DisabledWhileSaving() string {
	sel := "#" + RowID(RowFlagSave, r.Key)
	if r.Stored() {
		sel += ", #" + RowID(RowFlagReset, r.Key)
	}
	return sel
}

// TargetMetricsVM are the live dispatch metrics of one combo target
// (30-routing §8.1: the last 100 upstream outcomes of its connections), each
// "—" while unknown.
type TargetMetricsVM struct {
	Samples     string // number of outcomes held
	SuccessRate string // "91.7 %"; unknown without samples
	AvgLatency  string // mean over successful dispatches
	P95Latency  string // unknown below 10 successful dispatches
}

// UnknownTargetMetrics is the metrics of a target nothing is known of (a
// combo reference, or a page rendered without the gateway).
var UnknownTargetMetrics = TargetMetricsVM{Samples: "0", SuccessRate: "—", AvgLatency: "—", P95Latency: "—"}

// NewTargetMetricsVM words a target's dispatch metrics.
func NewTargetMetricsVM(s gateway.TargetStats) TargetMetricsVM {
	vm := UnknownTargetMetrics
	vm.Samples = human.Thousands(int64(s.Samples))
	if s.SuccessRate != nil {
		vm.SuccessRate = PercentText(*s.SuccessRate)
	}
	if s.AvgLatencyMs != nil {
		vm.AvgLatency = human.Duration(millis(int64(math.Round(*s.AvgLatencyMs))), human.Latency)
	}
	if s.P95LatencyMs != nil {
		vm.P95Latency = human.Duration(millis(int64(math.Round(*s.P95LatencyMs))), human.Latency)
	}
	return vm
}

// WithMetrics puts the dispatch metrics of every target on its chip;
// metrics maps a combo id to one entry per target, in target order.
func (vm CombosListVM) WithMetrics(metrics map[string][]TargetMetricsVM) CombosListVM {
	rows := make([]ComboRowVM, len(vm.Rows))
	for i, r := range vm.Rows {
		chips := make([]TargetChipVM, len(r.Targets))
		copy(chips, r.Targets)
		for j := range chips {
			if j < len(metrics[r.ID]) {
				chips[j].Metrics = metrics[r.ID][j]
			}
		}
		r.Targets = chips
		rows[i] = r
	}
	vm.Rows = rows
	return vm
}
