package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/a-h/templ"
	"github.com/labstack/echo/v4"

	"switchyard/services"
	"switchyard/views"
)

// This file holds what the resource pages share: reading HTML forms into
// service inputs and rendering a page whose htmx fragment differs from its
// page content.

// templComponent is what page handlers hand to render.
type templComponent = templ.Component

// form returns the parsed form: the URL query plus, for POST, PUT and PATCH,
// the url-encoded or multipart body.
func form(c echo.Context) url.Values {
	v, err := c.FormParams()
	if err != nil || v == nil {
		return url.Values{}
	}
	return v
}

// has reports whether the form carries a field (even empty).
func has(v url.Values, name string) bool {
	_, ok := v[name]
	return ok
}

// checked reads a checkbox or switch: present with "on" (or "true") is on.
func checked(v url.Values, name string) bool {
	s := v.Get(name)
	return s == "on" || s == "true" || s == "1"
}

// badNumber stands in for text that is not a whole number. Every numeric
// field a form sends has a range starting at 0 or above, so the service
// rejects it with its own range sentence and the form shows that sentence.
const badNumber = -1

// wholeNumber parses a whole number typed into a form.
func wholeNumber(s string) int {
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil {
		return badNumber
	}
	return n
}

// optInt reads a number field: absent or blank → blankAs, else the number.
func optInt(v url.Values, name string, blankAs services.Opt[int]) services.Opt[int] {
	s := strings.TrimSpace(v.Get(name))
	if s == "" {
		return blankAs
	}
	return services.Some(wholeNumber(s))
}

// intPtr reads an optional number: blank → nil.
func intPtr(v url.Values, name string) *int {
	s := strings.TrimSpace(v.Get(name))
	if s == "" {
		return nil
	}
	n := wholeNumber(s)
	return &n
}

// lines splits a textarea into its non-blank lines.
func lines(s string) []string {
	var out []string
	for _, l := range strings.Split(strings.ReplaceAll(s, "\r\n", "\n"), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}

// dateField reads a <input type="date"> value as midnight UTC of that day.
// Text that is not a date becomes the zero time, which the service refuses
// with its own sentence ("Choose a date in the future.").
func dateField(s string) time.Time {
	t, err := time.Parse("2006-01-02", strings.TrimSpace(s))
	if err != nil {
		return time.Time{}
	}
	return t.UTC()
}

// validation returns the field errors of a service validation failure.
func validation(err error) (*services.ValidationError, bool) {
	var verr *services.ValidationError
	ok := errors.As(err, &verr)
	return verr, ok
}

// afterMutation answers a successful form post without script with a 303 to
// the list; htmx requests get the fragment instead.
func afterMutation(c echo.Context, to string, htmx func() error) error {
	if isHTMX(c.Request()) {
		return htmx()
	}
	return c.Redirect(http.StatusSeeOther, to)
}

// baseURL is the client API root as this request reached us: scheme and host
// of the request, then /v1.
func baseURL(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host + "/v1"
}

// connectionForm reads the add or edit form into the view model that
// re-renders it (values as typed, never a secret).
func connectionForm(v url.Values, providers []services.Provider, edit bool) views.ConnectionFormVM {
	vm := views.ConnectionFormVM{Edit: edit, Providers: views.NewProviderOptions(providers),
		Name: v.Get("name"), Priority: v.Get("priority"), MaxConcurrent: v.Get("maxConcurrent"),
		RateLimitProtection: v.Get("rateLimitProtection"),
		RPM:                 v.Get("rateLimitOverrides.requestsPerMinute"),
		MinGapMs:            v.Get("rateLimitOverrides.minTimeBetweenRequestsMs"),
		Concurrent:          v.Get("rateLimitOverrides.concurrentRequests"),
		MaxWaitMs:           v.Get("rateLimitOverrides.maxWaitMs"),
		QueueDepth:          v.Get("rateLimitOverrides.maxQueueDepth"),
		QueueWaitMs:         v.Get("rateLimitOverrides.queueWaitMs"),
		QuotaReserve:        v.Get("quotaReservePercent"), Tier: v.Get("tier"),
		DisableCooling: checked(v, "disableCooling"), ProxyURL: v.Get("proxyUrl"), EgressGroup: v.Get("egressGroup"),
		Enabled: checked(v, "enabled")}
	if !edit {
		f := views.NewConnectionFieldsVM(providers, v.Get("provider"))
		f.CustomID, f.CustomAuth = v.Get("customId"), v.Get("customAuth")
		if f.CustomAuth == "" {
			f.CustomAuth = string(services.AuthAPIKey)
		}
		if has(v, "baseUrl") {
			f.BaseURL = v.Get("baseUrl")
		}
		f.DefaultModel = v.Get("defaultModel")
		vm.Fields = f
	}
	return vm
}

// connectionInput turns the form into the service input. On create, blank
// optional fields are left out (the service's defaults apply); on edit a
// blank field clears its value, and an empty secret field keeps the stored
// secret. currentProxy is the masked proxy URL the edit form showed: sent
// back unchanged, it keeps the stored URL (and its password).
func connectionInput(v url.Values, create bool, currentProxy string) services.ConnectionInput {
	in := services.ConnectionInput{Name: services.Some(v.Get("name"))}
	if create {
		pid := v.Get("provider")
		switch pid {
		case views.CustomOpenAI, views.CustomAnthropic:
			auth := v.Get("customAuth")
			if auth == "" {
				auth = string(services.AuthAPIKey)
			}
			in.Custom = services.Some(services.CustomSpec{WireFormat: strings.TrimPrefix(pid, "custom:"), AuthClass: auth})
			pid = strings.TrimSpace(v.Get("customId"))
		}
		in.Provider = services.Some(pid)
	}
	if k := v.Get("apiKey"); k != "" {
		in.APIKey = services.Some(k)
	}
	if t := v.Get("oauth.accessToken"); t != "" {
		in.OAuth = services.Some(services.OAuthInput{AccessToken: t, RefreshToken: v.Get("oauth.refreshToken")})
	}
	clearOrKeep := services.Null[string]()
	if create {
		clearOrKeep = services.Opt[string]{}
	}
	if has(v, "baseUrl") {
		if s := strings.TrimSpace(v.Get("baseUrl")); s != "" {
			in.BaseURL = services.Some(s)
		} else {
			in.BaseURL = clearOrKeep
		}
	}
	if has(v, "defaultModel") {
		in.DefaultModel = services.Some(strings.TrimSpace(v.Get("defaultModel")))
	}
	in.Priority = optInt(v, "priority", services.Opt[int]{})
	in.QuotaReservePercent = optInt(v, "quotaReservePercent", services.Opt[int]{})
	in.MaxConcurrent = optInt(v, "maxConcurrent", services.Null[int]())
	switch v.Get("rateLimitProtection") {
	case "on":
		in.RateLimitProtection = services.Some(true)
	case "off":
		in.RateLimitProtection = services.Some(false)
	default:
		in.RateLimitProtection = services.Null[bool]()
	}
	in.RateLimitOverrides = services.Some(services.RateLimitOverrides{
		RequestsPerMinute:        intPtr(v, "rateLimitOverrides.requestsPerMinute"),
		MinTimeBetweenRequestsMs: intPtr(v, "rateLimitOverrides.minTimeBetweenRequestsMs"),
		ConcurrentRequests:       intPtr(v, "rateLimitOverrides.concurrentRequests"),
		MaxWaitMs:                intPtr(v, "rateLimitOverrides.maxWaitMs"),
		MaxQueueDepth:            intPtr(v, "rateLimitOverrides.maxQueueDepth"),
		QueueWaitMs:              intPtr(v, "rateLimitOverrides.queueWaitMs"),
	})
	switch p := strings.TrimSpace(v.Get("proxyUrl")); {
	case !create && currentProxy != "" && p == currentProxy:
		// unchanged: keep the stored URL
	case p == "":
		in.ProxyURL = clearOrKeep
	default:
		in.ProxyURL = services.Some(p)
	}
	if g := strings.TrimSpace(v.Get("egressGroup")); g != "" {
		in.EgressGroup = services.Some(g)
	} else {
		in.EgressGroup = clearOrKeep
	}
	if t := v.Get("tier"); t != "" {
		in.Tier = services.Some(t)
	}
	in.DisableCooling = services.Some(checked(v, "disableCooling"))
	in.Enabled = services.Some(checked(v, "enabled"))
	if !create {
		if checked(v, "keepCredentials") {
			in.KeepCredentials = services.Some(true)
		}
		if pw := v.Get("currentPassword"); pw != "" {
			in.CurrentPassword = services.Some(pw)
		}
	}
	return in
}

// PasswordConfirmer re-checks the admin password under the sign-in
// throttle (services.Auth).
type PasswordConfirmer interface {
	ConfirmPassword(ctx context.Context, ip string, loopback bool, field, password string) error
}

// confirmKeep checks the admin password an admin session must give with
// keepCredentials (issue 17 item 12): a stolen session cookie is then not
// enough to send a stored key to another host. A manage key has no
// password to give; its holder is trusted with the connection's config.
func confirmKeep(c echo.Context, auth PasswordConfirmer, clientIP func(*http.Request) string, in services.ConnectionInput) error {
	if !in.KeepsCredentials() || SessionID(c) == "" {
		return nil
	}
	if _, isKey := APIKeyOf(c); isKey {
		return nil
	}
	if in.CurrentPassword.V == "" {
		return services.Invalid("currentPassword", services.MsgConfirmPassword)
	}
	r := c.Request()
	ip := clientIP(r)
	return auth.ConfirmPassword(r.Context(), ip, isLoopbackIP(ip), "currentPassword", in.CurrentPassword.V)
}

func isLoopbackIP(ip string) bool {
	a := net.ParseIP(ip)
	return a != nil && a.IsLoopback()
}

// connectionErrorFields maps service field names onto the form's controls.
func connectionErrorFields(v url.Values) map[string]string {
	m := map[string]string{"oauth": "oauth.accessToken", "custom": "provider", "custom.wireFormat": "provider", "custom.authClass": "customAuth"}
	if p := v.Get("provider"); p == views.CustomOpenAI || p == views.CustomAnthropic {
		m["provider"] = "customId"
	}
	return m
}

// comboBuilderForm reads the builder form, values as typed.
func comboBuilderForm(v url.Values) views.ComboBuilderVM {
	vm := views.ComboBuilderVM{ID: v.Get("id"), Name: v.Get("name"), Description: v.Get("description"),
		Hidden: checked(v, "hidden"), Enabled: checked(v, "enabled"), Strategy: v.Get("strategy"),
		ConfigExtra: v.Get("configExtra")}
	vm.Edit = vm.ID != ""
	for i := 0; has(v, fmt.Sprintf("targets.%d.kind", i)); i++ {
		f := func(name string) string { return v.Get(fmt.Sprintf("targets.%d.%s", i, name)) }
		vm.Targets = append(vm.Targets, views.TargetRowVM{Index: i, ID: f("id"), Kind: f("kind"), Provider: f("provider"),
			Model: f("model"), ConnectionID: f("connectionId"), ComboID: f("comboId"), Weight: f("weight"),
			Label: f("label"), Prompt: f("prompt"), Enabled: f("enabled")})
	}
	vm.Config = views.ComboConfigVM{MaxRetries: v.Get("config.maxRetries"), RetryDelayMs: v.Get("config.retryDelayMs"),
		TargetTimeoutMs: v.Get("config.targetTimeoutMs"), MaxComboDepth: v.Get("config.maxComboDepth"),
		SessionSticky: v.Get("config.sessionSticky"), StickyRR: v.Get("config.stickyRoundRobinLimit"),
		StickyWeighted: v.Get("config.stickyWeightedLimit"), QueueConcurrency: v.Get("config.queue.concurrencyPerTarget"),
		QueueDepth: v.Get("config.queue.depth"), QueueTimeoutMs: v.Get("config.queue.timeoutMs")}
	return vm
}

// comboInput turns the builder into the service input. Config numbers that
// do not parse are passed on as text, so the service's schema check words
// the problem.
func comboInput(vm views.ComboBuilderVM) services.ComboInput {
	enabled := vm.Enabled
	in := services.ComboInput{Name: strings.TrimSpace(vm.Name), Description: strings.TrimSpace(vm.Description),
		Strategy: vm.Strategy, Enabled: &enabled, Hidden: vm.Hidden, Targets: []services.Target{}}
	for _, t := range vm.Targets {
		st := services.Target{ID: t.ID, Kind: t.Kind, Provider: strings.TrimSpace(t.Provider), Model: strings.TrimSpace(t.Model),
			ComboID: t.ComboID, Prompt: t.Prompt}
		if t.Kind == services.KindCombo {
			st.Provider, st.Model = "", ""
		}
		if t.ConnectionID != "" && t.Kind != services.KindCombo {
			id := t.ConnectionID
			st.ConnectionID = &id
		}
		if w := strings.TrimSpace(t.Weight); w != "" {
			n := wholeNumber(w)
			st.Weight = &n
		}
		if l := strings.TrimSpace(t.Label); l != "" {
			st.Label = &l
		}
		if t.Enabled == "false" {
			off := false
			st.Enabled = &off
		}
		in.Targets = append(in.Targets, st)
	}
	cfg := map[string]any{}
	if vm.ConfigExtra != "" {
		_ = json.Unmarshal([]byte(vm.ConfigExtra), &cfg)
	}
	c := vm.Config
	num := func(m map[string]any, key, raw string) {
		raw = strings.TrimSpace(raw)
		if raw == "" {
			return
		}
		if f, err := strconv.ParseFloat(raw, 64); err == nil {
			m[key] = f
		} else {
			m[key] = raw
		}
	}
	num(cfg, "maxRetries", c.MaxRetries)
	num(cfg, "retryDelayMs", c.RetryDelayMs)
	num(cfg, "targetTimeoutMs", c.TargetTimeoutMs)
	num(cfg, "maxComboDepth", c.MaxComboDepth)
	num(cfg, "stickyRoundRobinLimit", c.StickyRR)
	num(cfg, "stickyWeightedLimit", c.StickyWeighted)
	switch c.SessionSticky {
	case "on":
		cfg["sessionSticky"] = true
	case "off":
		cfg["sessionSticky"] = false
	}
	queue := map[string]any{}
	num(queue, "concurrencyPerTarget", c.QueueConcurrency)
	num(queue, "depth", c.QueueDepth)
	num(queue, "timeoutMs", c.QueueTimeoutMs)
	if len(queue) > 0 {
		cfg["queue"] = queue
	}
	in.Config = cfg
	return in
}

// idList reads the full combo order: repeated "ids" fields, each of which
// may hold several comma-separated ids.
func idList(v url.Values) []string {
	var out []string
	for _, s := range v["ids"] {
		for _, id := range strings.Split(s, ",") {
			if id = strings.TrimSpace(id); id != "" {
				out = append(out, id)
			}
		}
	}
	return out
}

// keyForm reads the create or edit form, values as typed.
func keyForm(v url.Values, edit bool) views.KeyFormVM {
	set := func(vals []string) map[string]bool {
		m := map[string]bool{}
		for _, s := range vals {
			m[s] = true
		}
		return m
	}
	return views.KeyFormVM{Edit: edit, Name: v.Get("name"), Enabled: checked(v, "enabled"), Scopes: set(v["scopes"]),
		ModelsAny: checked(v, "allowedModelsAny"), Models: v.Get("allowedModels"),
		CombosAny: checked(v, "allowedCombosAny"), Combos: set(v["allowedCombos"]), ComboPatterns: v.Get("allowedCombosPatterns"),
		ConnsAny: checked(v, "allowedConnectionsAny"), Conns: set(v["allowedConnections"]),
		RPM: v.Get("requestsPerMinute"), Concurrent: v.Get("maxConcurrentRequests"), Expires: v.Get("expiresAt")}
}

// keyInput turns the key form into the service input. Each allowlist's Any
// switch decides between null (no restriction) and a list, which may be
// empty (nothing allowed).
func keyInput(v url.Values, create bool) services.KeyInput {
	list := func(vals []string) []string {
		if vals == nil {
			return []string{}
		}
		return vals
	}
	in := services.KeyInput{Name: services.Some(v.Get("name")), Enabled: services.Some(checked(v, "enabled")),
		Scopes: services.Some(list(v["scopes"]))}
	if checked(v, "allowedModelsAny") {
		in.AllowedModels = services.Null[[]string]()
	} else {
		in.AllowedModels = services.Some(list(lines(v.Get("allowedModels"))))
	}
	if checked(v, "allowedCombosAny") {
		in.AllowedCombos = services.Null[[]string]()
	} else {
		// Patterns first, so the service's "Line N" counts the textarea's lines.
		in.AllowedCombos = services.Some(list(append(lines(v.Get("allowedCombosPatterns")), v["allowedCombos"]...)))
	}
	if checked(v, "allowedConnectionsAny") {
		in.AllowedConnections = services.Null[[]string]()
	} else {
		in.AllowedConnections = services.Some(list(v["allowedConnections"]))
	}
	in.RequestsPerMinute = optInt(v, "requestsPerMinute", services.Null[int]())
	in.MaxConcurrentRequests = optInt(v, "maxConcurrentRequests", services.Null[int]())
	switch s := strings.TrimSpace(v.Get("expiresAt")); {
	case s != "":
		in.ExpiresAt = services.Some(dateField(s))
	case !create:
		in.ExpiresAt = services.Null[time.Time]()
	}
	return in
}

// keyErrorFields maps service field names onto the key form's controls.
var keyErrorFields = map[string]string{"allowedCombos": "allowedCombosPatterns"}
