package resilience

import (
	"slices"
	"strings"
)

// CustomNodesProvider stands, in the provider list of a restatement or a
// built-in rule, for every custom openai-/anthropic-compatible node. It can
// never be a real provider id (ids start with a letter or digit).
const CustomNodesProvider = "*custom"

// Provider families of the built-in registries (20-resilience §1.1–§1.2).
var (
	ruleOpenCodeFamily = []string{"opencode", "opencode-zen", "opencode-go", "opencode-cli"}
	ruleNewAPIFamily   = []string{"agentrouter", CustomNodesProvider}
)

// Restatement is one status restatement entry (20-resilience §1.1): an
// upstream that reports a temporary quota exhaustion with a non-retryable
// status has it rewritten before rules, classifier and client read it.
type Restatement struct {
	ID string `json:"id"`
	// Providers are canonical provider ids; CustomNodesProvider covers every custom node.
	Providers    []string `json:"providers"`
	FromStatuses []int    `json:"fromStatuses"`
	ToStatus     int      `json:"toStatus"`
	// TextMarkers: lower-cased message + " " + body holds at least one.
	TextMarkers []string `json:"textMarkers"`
	// ExcludeMarkers: and none of these.
	ExcludeMarkers []string `json:"excludeMarkers"`
	// DefaultRetryAfterMs is the client's Retry-After when the upstream gave no hint
	// and this failure becomes the final answer; it never sets an internal cooldown.
	DefaultRetryAfterMs int64 `json:"defaultRetryAfterMs"`
}

// restatements is the registry, first match wins. Markers must be
// provider-specific, never generic English that overlaps the quota or credit
// markers of the classifier. Adding an entry is a data change plus a test row.
var restatements = []Restatement{
	{
		ID:                  "newapi-quota-misstatus",
		Providers:           ruleNewAPIFamily,
		FromStatuses:        []int{400, 403},
		ToStatus:            429,
		TextMarkers:         []string{markerQuotaInsufficientCN},
		ExcludeMarkers:      []string{markerNoAccessCN},
		DefaultRetryAfterMs: 60_000,
	},
}

// Restatements returns a copy of the status restatement registry in
// evaluation order (for GET /api/resilience/error-rules).
func Restatements() []Restatement {
	out := make([]Restatement, len(restatements))
	for i, r := range restatements {
		out[i] = cloneRestatement(r)
	}
	return out
}

func cloneRestatement(r Restatement) Restatement {
	r.Providers = slices.Clone(r.Providers)
	r.FromStatuses = slices.Clone(r.FromStatuses)
	r.TextMarkers = slices.Clone(r.TextMarkers)
	r.ExcludeMarkers = slices.Clone(r.ExcludeMarkers)
	return r
}

// restateFailure returns the first restatement entry matching f, or nil. text is the
// lower-cased message + " " + body.
func restateFailure(f *Failure, text string) *Restatement {
	for i := range restatements {
		r := &restatements[i]
		if !ruleProviderListed(r.Providers, f) || !slices.Contains(r.FromStatuses, f.Status) {
			continue
		}
		if !containsAnyMarker(text, r.TextMarkers) || containsAnyMarker(text, r.ExcludeMarkers) {
			continue
		}
		return r
	}
	return nil
}

// ruleProviderListed reports whether f's provider is in list; CustomNodesProvider
// matches any custom node.
func ruleProviderListed(list []string, f *Failure) bool {
	p := strings.TrimSpace(f.Provider)
	for _, id := range list {
		if id == CustomNodesProvider {
			if f.Custom {
				return true
			}
			continue
		}
		if strings.EqualFold(id, p) {
			return true
		}
	}
	return false
}

// containsAnyMarker reports whether the lower-cased text holds one of the
// (lower-case) markers.
func containsAnyMarker(text string, markers []string) bool {
	for _, m := range markers {
		if m != "" && strings.Contains(text, m) {
			return true
		}
	}
	return false
}
