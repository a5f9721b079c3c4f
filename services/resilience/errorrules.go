package resilience

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"switchyard/services"
	"switchyard/services/settings/schema"
)

// Operator provider error rules (R§1.2, 40-admin-api §2.3). Each rule is
// decoded by the settings engine against ruleSchema — types, ranges and
// choices, each field with its own sentence — and the decoded rules are then
// checked as typed values for what spans fields or rules: ids unique and
// generated where missing, lockScope and ban only with their scope, known
// providers, and no rule that an earlier one always shadows.

// ruleSettingReasons are the reasons a rule may give (R§1.4 minus client_abort, local_limit).
var ruleSettingReasons = []Reason{ReasonRateLimit, ReasonQuotaExhausted, ReasonCreditsExhausted, ReasonAuthError,
	ReasonForbidden, ReasonNotFound, ReasonModelCapacity, ReasonServerError, ReasonTransient,
	ReasonRequestRejected, ReasonCallerError}

// RuleReasons are the reasons an operator rule may give, in the editor's order.
func RuleReasons() []Reason { return append([]Reason(nil), ruleSettingReasons...) }

// RuleScopes and RuleLockScopes are the scope choices of a rule.
var (
	RuleScopes     = []Scope{ScopeModel, ScopeConnection, ScopeProvider, ScopeNone}
	RuleLockScopes = []LockShape{ShapeFamily, ShapeBase, ShapeExact}
)

const (
	msgHeaderName     = "must be a header name of 1 to 64 token characters"
	msgHeaderContains = "must be 1 to 200 characters"
)

// ruleSchema is the shape of one rule.
var ruleSchema = schema.New([]schema.Field{
	{Path: "id", Kind: schema.String, Check: checkRuleID},
	{Path: "provider", Kind: schema.String, Required: "is required", Problem: "must be a provider id", Check: nonBlank("must be a provider id")},
	{Path: "status", Kind: schema.Int, Min: 100, Max: 599, Required: "is required"},
	{Path: "match", Kind: schema.String, MaxLen: 200},
	{Path: "header", Kind: schema.Record, Item: ruleHeaderSchema, Problem: `must be {"name", "contains"} or null`},
	{Path: "reason", Kind: schema.String, OneOf: names(ruleSettingReasons), Required: "is required",
		Problem: "must be one of " + strings.Join(names(ruleSettingReasons), ", ")},
	{Path: "scope", Kind: schema.String, OneOf: names(RuleScopes), Required: "is required",
		Problem: "must be one of " + strings.Join(names(RuleScopes), ", ")},
	{Path: "lockScope", Kind: schema.String, OneOf: names(RuleLockScopes), Problem: "must be family, base, exact or null"},
	{Path: "cooldownMs", Kind: schema.Int, Min: 1000, Max: 86400000},
	{Path: "ban", Kind: schema.Bool},
	{Path: "enabled", Kind: schema.Bool},
})

// ruleHeaderSchema is a rule's header condition: a header whose value contains a text.
var ruleHeaderSchema = schema.New([]schema.Field{
	{Path: "name", Kind: schema.String, Required: msgHeaderName, Problem: msgHeaderName, Check: func(v any, _ bool) (any, map[string]string) {
		if s := v.(string); utf8.RuneCountInString(s) > 64 || !isHeaderToken(s) {
			return nil, map[string]string{"": msgHeaderName}
		}
		return v, nil
	}},
	{Path: "contains", Kind: schema.String, Required: msgHeaderContains, Problem: msgHeaderContains, Check: func(v any, _ bool) (any, map[string]string) {
		if n := utf8.RuneCountInString(v.(string)); n < 1 || n > 200 {
			return nil, map[string]string{"": msgHeaderContains}
		}
		return v, nil
	}},
})

func names[S ~string](xs []S) []string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = string(x)
	}
	return out
}

func nonBlank(msg string) func(any, bool) (any, map[string]string) {
	return func(v any, _ bool) (any, map[string]string) {
		if strings.TrimSpace(v.(string)) == "" {
			return nil, map[string]string{"": msg}
		}
		return v, nil
	}
}

func checkRuleID(v any, _ bool) (any, map[string]string) {
	if id := v.(string); utf8.RuneCountInString(id) > 64 || strings.TrimSpace(id) != id {
		return nil, map[string]string{"": "must be at most 64 characters without surrounding spaces"}
	}
	return v, nil
}

// isHeaderToken reports whether s is an RFC 9110 token (a header name).
func isHeaderToken(s string) bool {
	for _, r := range s {
		if !(r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || strings.ContainsRune("!#$%&'*+-.^_`|~", r)) {
			return false
		}
	}
	return s != ""
}

// errorRulesCheck checks the decoded rules as typed values and returns
// them normalised (every field present, ids generated). known runs only
// for a PATCH (see schema.Field.Check).
func errorRulesCheck(known func(string) bool) func(any, bool) (any, map[string]string) {
	return func(v any, live bool) (any, map[string]string) {
		lookup := known
		if !live {
			lookup = nil
		}
		rules, errs := checkRuleSet(v.([]any), lookup)
		if len(errs) > 0 {
			return nil, errs
		}
		out, err := schema.Canonical(rules)
		if err != nil {
			return nil, map[string]string{"": err.Error()}
		}
		return out, nil
	}
}

// decodeRule is one rule as the engine decoded it, with the defaults of
// the fields it leaves out (a field that failed its own check is left out
// too, so the rules across fields see only valid values): enabled, and a
// generated id.
func decodeRule(item any) (ErrorRuleSetting, error) {
	r := ErrorRuleSetting{Enabled: true}
	if err := schema.ConvertInto(item, &r); err != nil {
		return r, err
	}
	if r.ID == "" {
		r.ID = "r_" + services.NewTargetID()
	}
	return r, nil
}

// ruleKey is what an always-matching rule claims: its provider and status.
type ruleKey struct {
	provider string
	status   int
}

// checkRuleSet decodes each rule and checks the rules that span fields
// and rules; nil items (not objects) are skipped. Problems are keyed
// ".<index>[.<field>]".
func checkRuleSet(items []any, known func(string) bool) ([]ErrorRuleSetting, map[string]string) {
	errs := map[string]string{}
	out := make([]ErrorRuleSetting, 0, len(items))
	ids := map[string]int{}
	catchAll := map[ruleKey]int{} // first enabled rule matching everything for (provider, status)
	for n, item := range items {
		if item == nil {
			continue
		}
		p := "." + strconv.Itoa(n)
		r, err := decodeRule(item)
		if err != nil {
			errs[p] = err.Error()
			continue
		}
		if first, dup := ids[r.ID]; dup {
			errs[p+".id"] = fmt.Sprintf("must be unique: rule %d has the same id", first+1)
		} else {
			ids[r.ID] = n
		}
		for field, msg := range r.fieldProblems(known) {
			errs[p+"."+field] = msg
		}
		if msg := shadowed(catchAll, r, n); msg != "" {
			errs[p] = msg
		}
		out = append(out, r)
	}
	return out, errs
}

// fieldProblems are the rules between one rule's fields.
func (r ErrorRuleSetting) fieldProblems(known func(string) bool) map[string]string {
	errs := map[string]string{}
	if r.Provider != "" && known != nil && !known(r.Provider) {
		errs["provider"] = fmt.Sprintf("unknown provider %q", r.Provider)
	}
	if r.LockScope != nil && r.Scope != ScopeModel {
		errs["lockScope"] = "only applies with scope model"
	}
	if r.Ban && r.Scope != ScopeConnection {
		errs["ban"] = "only applies with scope connection"
	}
	return errs
}

// shadowed reports an enabled rule that can never match because an earlier
// enabled rule has the same provider and status, no match text and no
// header; it records r when r is such a catch-all itself.
func shadowed(catchAll map[ruleKey]int, r ErrorRuleSetting, n int) string {
	if !r.Enabled || r.Provider == "" || r.Status == 0 {
		return ""
	}
	k := ruleKey{strings.ToLower(strings.TrimSpace(r.Provider)), r.Status}
	if first, ok := catchAll[k]; ok {
		return fmt.Sprintf("rule %d can never match: rule %d above it has the same provider and status, no match text and no header", n+1, first+1)
	}
	if r.Match == "" && r.Header == nil {
		catchAll[k] = n
	}
	return ""
}
