package views

import (
	"regexp"
	"strconv"
	"strings"

	"github.com/a-h/templ"
)

// Settings → Resilience → Provider error rules (50-dashboard §6.9): the
// editor of the operator rules, values as the form holds them.

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
