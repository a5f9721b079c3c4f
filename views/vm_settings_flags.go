package views

import (
	"strings"

	"switchyard/services/settings/schema"
)

// Settings → Feature flags (50-dashboard §6.10).

// FlagsPageVM is the flags page.
type FlagsPageVM struct {
	Rows []FlagRowVM
}

// FlagRowVM is one flag with its control.
type FlagRowVM struct {
	Key             string
	Label           string
	Description     string
	Field           string
	Value           bool
	Source          string
	Env             string
	RequiresRestart bool
	Errors          FieldErrors
	Saved           bool
	// Target is emergencyFallback.target (the emergency fallback row only);
	// Targets are the datalist options.
	HasTarget bool
	Target    string
	Targets   []string
}

// flagLabels name the flags of the registry; a flag not listed shows its key.
var flagLabels = map[string]string{
	"emergencyFallback":         "Emergency fallback",
	"modelLockout":              "Model lockout",
	"providerCooldown":          "Provider cooldown window gate",
	"throughputWatchdog":        "Throughput watchdog",
	"waitForCooldown":           "Wait for cooldown",
	"comboCooldownWait":         "Combo cooldown wait",
	"connectionConcurrency":     "Connection concurrency",
	"rateLimitAutoEnable":       "Protect API-key connections automatically",
	"autoDisableBannedAccounts": "Disable banned connections",
	"logRequestBodies":          "Log request bodies",
}

// flagTexts replace a flag's one-line description where the page says more.
var flagTexts = map[string]string{
	"emergencyFallback": "When a request would fail because every target is exhausted, Switchyard makes one last attempt on this model. Such responses say so in X-Switchyard-Warning and are marked in the request log.",
	"logRequestBodies":  "Stores request and response bodies in request logs, truncated to 32 KiB each and scrubbed of secrets. Bodies may contain your users' data.",
}

// FlagKeyEmergencyFallback is the flag whose row also sets the fallback model.
const FlagKeyEmergencyFallback = "emergencyFallback"

// FlagLabel names a flag; a flag without a label shows its key.
func FlagLabel(key string) string {
	if l, ok := flagLabels[key]; ok {
		return l
	}
	return key
}

// NewFlagRowVM builds one row.
func NewFlagRowVM(key, field string, value bool, source string, env *string, restart bool, description string) FlagRowVM {
	r := FlagRowVM{Key: key, Label: FlagLabel(key), Description: description, Field: field, Value: value, Source: source,
		RequiresRestart: restart, Errors: FieldErrors{}, HasTarget: key == FlagKeyEmergencyFallback}
	if t, ok := flagTexts[key]; ok {
		r.Description = t
	}
	if env != nil {
		r.Env = *env
	}
	return r
}

// RowIDOf is the row's element id.
func (r FlagRowVM) RowIDOf() string { return RowID(RowFlag, r.Key) }

// SourceLine says where the value comes from.
func (r FlagRowVM) SourceLine() string {
	switch r.Source {
	case schema.SourceEnv:
		return "Set by the environment (" + r.Env + ")"
	case schema.SourceStored:
		return "Set on this dashboard"
	}
	return "Default"
}

// FlagErrors words the service's problems of one flag save.
func FlagErrors(key string, fields map[string]string) FieldErrors {
	out := FieldErrors{}
	for _, k := range sortedKeys(fields) {
		msg := fields[k]
		target := "value"
		switch {
		case k == "emergencyFallback.target":
			target = "target"
			if strings.HasPrefix(msg, "does not resolve") {
				msg = "That model or combo no longer exists."
			} else {
				msg = sentence(msg)
			}
		case msg == "set emergencyFallback.target first":
			target = "target"
			msg = "Choose the model to fall back to."
		default:
			msg = sentence(msg)
		}
		if _, dup := out[target]; !dup {
			out[target] = msg
		}
	}
	return out
}

// FlagFieldID is the element id of a flag row's control.
func FlagFieldID(key, name string) string { return RowID(RowFlag, key) + "-" + name }

// flagDescribedBy ties a flag control to the row's description, help and error.
func flagDescribedBy(r FlagRowVM, name string) string {
	ids := []string{r.RowIDOf() + "-desc"}
	if name == "target" {
		ids = append(ids, FlagFieldID(r.Key, "target")+"-help")
	}
	if r.Errors.Has(name) {
		ids = append(ids, FlagFieldID(r.Key, name)+"-error")
	}
	return strings.Join(ids, " ")
}

// Stored reports a value saved on this dashboard (Reset can drop it).
func (r FlagRowVM) Stored() bool { return r.Source == schema.SourceStored }
