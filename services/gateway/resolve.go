package gateway

import (
	"fmt"
	"sort"
	"strings"
	"unicode/utf8"

	"switchyard/services"
)

// Route is a resolved model name: a combo, or a direct provider/model target
// routed as an anonymous one-target combo.
type Route struct {
	Combo     *services.Combo // nil for a direct target
	Provider  services.Provider
	Model     string // upstream model id for a direct target
	Requested string
}

// Canonical is "provider/model" of a direct route.
func (r Route) Canonical() string { return r.Provider.ID + "/" + r.Model }

// ValidateModel checks the model string (10-gateway-api §4.1).
func ValidateModel(m string) *services.GatewayError {
	bad := len(m) == 0 || len(m) > 256 || !utf8.ValidString(m)
	for _, r := range m {
		// U+FFFD is what JSON decoding makes of invalid UTF-8 and lone
		// surrogates: such a name was not valid UTF-8 as sent, and was
		// forwarded upstream as replacement characters before (issue 17 item 14).
		if r < 0x20 || (r >= 0x7f && r <= 0x9f) || r == utf8.RuneError {
			bad = true
		}
	}
	if bad {
		return services.NewGatewayError(services.CodeInvalidRequest, "model must be a string of 1 to 256 bytes of valid UTF-8 without control characters.").WithParam("model")
	}
	return nil
}

// Resolve maps a model name to a route (10-gateway-api §4.2) and applies the
// key's model/combo policy. usable reports whether a provider has a
// connection this key may use (for bare names and suggestions).
func Resolve(s *Snapshot, key services.APIKey, model string) (Route, *services.GatewayError) {
	if err := ValidateModel(model); err != nil {
		return Route{}, err
	}
	// 1. Exact enabled combo name.
	if c, ok := s.ComboByName(model); ok {
		return comboRoute(c, key, model)
	}
	// 2. combo/<name>.
	if name, ok := strings.CutPrefix(model, "combo/"); ok {
		if c, ok := s.ComboByName(name); ok {
			return comboRoute(c, key, model)
		}
		return Route{}, notFound(s, key, model)
	}
	// 3. provider/model split on the first slash.
	if prefix, rest, ok := strings.Cut(model, "/"); ok && rest != "" {
		if p, ok := s.Catalogue.Lookup(prefix); ok {
			r := Route{Provider: p, Model: rest, Requested: model}
			if !key.AllowsModel(r.Canonical()) {
				return Route{}, forbiddenModel(model)
			}
			return r, nil
		}
	}
	// 4. Bare name listed by a provider with a usable connection.
	if !strings.Contains(model, "/") {
		for _, p := range s.Catalogue.All() {
			if !containsStr(p.Models, model) || !usableProvider(s, key, p.ID) {
				continue
			}
			r := Route{Provider: p, Model: model, Requested: model}
			if !key.AllowsModel(r.Canonical()) {
				return Route{}, forbiddenModel(model)
			}
			return r, nil
		}
	}
	return Route{}, notFound(s, key, model)
}

func comboRoute(c *services.Combo, key services.APIKey, requested string) (Route, *services.GatewayError) {
	if !key.AllowsCombo(c.Name) {
		return Route{}, forbiddenModel(requested)
	}
	return Route{Combo: c, Requested: requested}, nil
}

func forbiddenModel(model string) *services.GatewayError {
	return services.NewGatewayError(services.CodeModelNotAllowed, fmt.Sprintf("This API key may not use model %q.", model))
}

// usableProvider reports an enabled, non-terminal connection the key may use.
func usableProvider(s *Snapshot, key services.APIKey, provider string) bool {
	for _, c := range s.Connections(provider) {
		if c.Enabled && c.State.TerminalStatus == "" && key.AllowsConnection(c.ID) {
			return true
		}
	}
	return false
}

// notFound builds 404 model_not_found with up to five suggestions ranked by
// Levenshtein distance (10-gateway-api §4.3).
func notFound(s *Snapshot, key services.APIKey, model string) *services.GatewayError {
	var names []string
	for _, c := range s.Combos() {
		if c.Enabled && key.AllowsCombo(c.Name) {
			names = append(names, c.Name, "combo/"+c.Name)
		}
	}
	// Bare names too, as rule 4 resolves them: the first usable provider
	// listing the name claims it, and the key must allow that provider/model.
	claimed := map[string]bool{}
	for _, p := range s.Catalogue.All() {
		if !usableProvider(s, key, p.ID) {
			continue
		}
		for _, m := range p.Models {
			allowed := key.AllowsModel(p.ID + "/" + m)
			if allowed {
				names = append(names, p.ID+"/"+m)
			}
			if !strings.Contains(m, "/") && !claimed[m] {
				claimed[m] = true
				if allowed {
					names = append(names, m)
				}
			}
		}
	}
	limit := len(model) / 3
	if limit < 2 {
		limit = 2
	}
	type cand struct {
		name string
		d    int
	}
	var cands []cand
	seen := map[string]bool{}
	for _, n := range names {
		if seen[n] {
			continue
		}
		seen[n] = true
		if d := levenshtein(model, n); d <= limit {
			cands = append(cands, cand{n, d})
		}
	}
	sort.Slice(cands, func(i, j int) bool {
		a, b := cands[i], cands[j]
		if a.d != b.d {
			return a.d < b.d
		}
		if len(a.name) != len(b.name) {
			return len(a.name) < len(b.name)
		}
		return a.name < b.name
	})
	sugg := []string{}
	for i := 0; i < len(cands) && i < 5; i++ {
		sugg = append(sugg, cands[i].name)
	}
	msg := fmt.Sprintf("Unknown model %q.", model)
	if len(sugg) > 0 {
		msg += " Did you mean: " + strings.Join(sugg, ", ") + "?"
	}
	e := services.NewGatewayError(services.CodeModelNotFound, msg)
	e.Suggestions = sugg
	return e
}

func levenshtein(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}

func containsStr(list []string, v string) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}
