package handlers

import (
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"switchyard/services"
	"switchyard/services/gateway"
	"switchyard/services/resilience"
)

// Rule tooling (40-admin-api §2.4): the rule registries, read-only, and a
// dry run of the classification pipeline. Both read the engine's own
// registries and decision code; the dry run changes nothing.

// ClassifyDryRun runs the classification pipeline without applying it
// (resilience.Engine).
type ClassifyDryRun interface {
	DryRun(f resilience.Failure) resilience.DryRun
}

// RulesAPI serves GET /api/resilience/error-rules and POST /api/resilience/classify.
type RulesAPI struct {
	*API
	Engine    ClassifyDryRun
	Catalogue Catalogue
	// Operator returns the operator rules in stored order.
	Operator func() []resilience.ErrorRule
}

// errorRuleJSON is one rule of a registry, every field present.
type errorRuleJSON struct {
	ID       string `json:"id"`
	Provider string `json:"provider"`
	// Providers lists a built-in rule's provider family ("*custom" = every
	// custom provider); null for a rule of one provider.
	Providers  []string               `json:"providers"`
	Status     int                    `json:"status"`
	Match      string                 `json:"match"`
	Header     *resilience.RuleHeader `json:"header"`
	Reason     resilience.Reason      `json:"reason"`
	Scope      resilience.Scope       `json:"scope"`
	LockScope  *resilience.LockShape  `json:"lockScope"`
	CooldownMs *int64                 `json:"cooldownMs"`
	Ban        bool                   `json:"ban"`
	Enabled    bool                   `json:"enabled"`
}

func presentRule(r resilience.ErrorRule) errorRuleJSON {
	out := errorRuleJSON{ID: r.ID, Provider: r.Provider, Providers: r.Providers, Status: r.Status, Match: r.Match, Header: r.Header,
		Reason: r.Reason, Scope: r.Scope, LockScope: nullIfZero(r.LockScope), CooldownMs: r.CooldownMs, Ban: r.Ban,
		Enabled: r.Enabled == nil || *r.Enabled}
	return out
}

// List answers GET /api/resilience/error-rules: the status
// restatements, the operator rules and the built-in rules, each in
// evaluation order.
func (h *RulesAPI) List(c echo.Context) error {
	var operator []resilience.ErrorRule
	if h.Operator != nil {
		operator = h.Operator()
	}
	out := struct {
		Restatements []resilience.Restatement `json:"restatements"`
		Operator     []errorRuleJSON          `json:"operator"`
		Builtin      []errorRuleJSON          `json:"builtin"`
	}{Restatements: resilience.Restatements(), Operator: []errorRuleJSON{}, Builtin: []errorRuleJSON{}}
	for _, r := range operator {
		out.Operator = append(out.Operator, presentRule(r))
	}
	for _, r := range resilience.BuiltinRules() {
		out.Builtin = append(out.Builtin, presentRule(r))
	}
	return writeAPIJSON(c, http.StatusOK, out)
}

// classifyBody is POST /api/resilience/classify.
type classifyBody struct {
	Provider string            `json:"provider"`
	Status   *int              `json:"status"`
	Headers  map[string]string `json:"headers"`
	Body     string            `json:"body"`
	Model    string            `json:"model"`
	// ConnectionID, when set, prices the penalty at that connection's
	// current backoff level (else: a connection without state).
	ConnectionID string `json:"connectionId"`
	// Transport names the transport failure of status 0 (dial, tls,
	// proxy, reset, headers_timeout, idle_timeout).
	Transport string `json:"transport"`
}

// transports are the transport failure kinds of status 0.
var transports = []string{resilience.TransportDial, resilience.TransportTLS, resilience.TransportProxy, resilience.TransportReset,
	resilience.TransportHeadersTimeout, resilience.TransportIdleTimeout}

// maxClassifyBody is the body the classifier reads of an upstream answer.
const maxClassifyBody = 64 << 10

type classifyRuleJSON struct {
	ID     string `json:"id"`
	Origin string `json:"origin"`
	Index  int    `json:"index"`
}

type classifyRestatedJSON struct {
	ID         string `json:"id"`
	FromStatus int    `json:"fromStatus"`
	ToStatus   int    `json:"toStatus"`
}

type classificationJSON struct {
	Status int               `json:"status"`
	Reason resilience.Reason `json:"reason"`
	// Scope is the scope the failure would be penalised at, after the
	// lockout override (LockoutOverride says whether it applied).
	Scope           resilience.Scope      `json:"scope"`
	LockScope       *resilience.LockShape `json:"lockScope"`
	CooldownMs      *int64                `json:"cooldownMs"`
	HintMs          *int64                `json:"hintMs"`
	HintSource      *string               `json:"hintSource"`
	Terminal        *string               `json:"terminal"`
	Breaker         string                `json:"breaker"`
	Failover        resilience.Failover   `json:"failover"`
	Detail          *string               `json:"detail"`
	LockoutOverride bool                  `json:"lockoutOverride"`
}

type classifyEffectJSON struct {
	Kind       string  `json:"kind"`
	CooldownMs *int64  `json:"cooldownMs"`
	LockKey    *string `json:"lockKey"`
}

type classifyJSON struct {
	Restated       *classifyRestatedJSON `json:"restated"`
	Rule           *classifyRuleJSON     `json:"rule"`
	ClassifierRow  *int                  `json:"classifierRow"`
	Classification classificationJSON    `json:"classification"`
	// Effect is what the failure would apply; null when nothing.
	Effect *classifyEffectJSON `json:"effect"`
}

// Classify answers POST /api/resilience/classify: the failure described by
// the body run through the classification pipeline as a dispatch to the
// provider would be, and the penalty it would apply; nothing changes.
func (h *RulesAPI) Classify(c echo.Context) error {
	var in classifyBody
	if err := decodeJSON(c, &in); err != nil {
		return err
	}
	fields := map[string]string{}
	p, known := h.Catalogue.Catalogue().Lookup(strings.TrimSpace(in.Provider))
	switch {
	case strings.TrimSpace(in.Provider) == "":
		fields["provider"] = "required"
	case !known:
		fields["provider"] = "unknown provider"
	}
	status := 0
	switch {
	case in.Status == nil:
		fields["status"] = "required"
	case *in.Status == 0:
		if !containsString(transports, in.Transport) {
			fields["transport"] = "status 0 is a transport failure: must be one of " + strings.Join(transports, ", ")
		}
	case *in.Status < 100 || *in.Status > 599:
		fields["status"] = "must be between 100 and 599 (0 for a transport failure)"
	default:
		status = *in.Status
		if in.Transport != "" {
			fields["transport"] = "only with status 0"
		}
	}
	if len(in.Body) > maxClassifyBody {
		fields["body"] = "must be at most 65536 bytes"
	}
	if len(fields) > 0 {
		return &services.ValidationError{Fields: fields}
	}
	hdr := http.Header{}
	for k, v := range in.Headers {
		hdr.Add(k, v)
	}
	f := gateway.DryRunFailure(p, in.ConnectionID, in.Model, status, in.Transport, hdr, []byte(in.Body), h.Clock.Now())
	return writeAPIJSON(c, http.StatusOK, presentDryRun(h.Engine.DryRun(f), f))
}

func presentDryRun(d resilience.DryRun, f resilience.Failure) classifyJSON {
	cl := d.Classification
	out := classifyJSON{Classification: classificationJSON{Status: cl.Status, Reason: cl.Reason, Scope: cl.Scope,
		LockScope: nullIfZero(cl.LockScope), HintSource: nullIfZero(cl.HintSource), Terminal: nullIfZero(cl.Terminal),
		Breaker: "not_counted", Failover: cl.Failover, Detail: nullIfZero(cl.Detail), LockoutOverride: d.LockoutOverride}}
	if cl.Breaker {
		out.Classification.Breaker = "counted"
	}
	if cl.Hint > 0 {
		ms := cl.Hint.Milliseconds()
		out.Classification.HintMs = &ms
	}
	if d.Restatement != nil {
		out.Restated = &classifyRestatedJSON{ID: d.Restatement.ID, FromStatus: f.Status, ToStatus: d.Restatement.ToStatus}
	}
	if d.Rule != nil {
		out.Rule = &classifyRuleJSON{ID: d.Rule.ID, Origin: d.RuleOrigin, Index: d.RuleIndex}
	}
	if d.ClassifierRow > 0 {
		out.ClassifierRow = &d.ClassifierRow
	}
	if d.Effect != "" {
		e := &classifyEffectJSON{Kind: d.Effect, LockKey: nullIfZero(d.LockKey)}
		if d.Cooldown > 0 {
			ms := d.Cooldown.Milliseconds()
			e.CooldownMs = &ms
			out.Classification.CooldownMs = &ms
		}
		out.Effect = e
	}
	return out
}

func containsString(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
