package views

import (
	"strconv"
	"strings"

	"switchyard/services/human"
	"switchyard/services/resilience"
	"switchyard/services/settings/schema"
)

// Settings → Resilience layout (issue 21 item 9): the twelve cards in
// five sections with an in-page nav, durations in human units next to the
// milliseconds, each card's last save, and the Model lockout card's
// escalation preview.

// SettingsSectionDef is a group of cards under one heading of the page.
type SettingsSectionDef struct {
	ID       string // anchor, e.g. "settings-cooldowns"
	Title    string
	Sections []string // card sections, in page order
}

// SettingsSections group the cards of SettingsCardDefs (their order kept)
// by what the admin is tuning.
var SettingsSections = []SettingsSectionDef{
	{ID: "settings-pacing", Title: "Pacing", Sections: []string{SectionRequestQueue}},
	{ID: "settings-failures", Title: "Cooldowns and breakers", Sections: []string{SectionConnectionCooldown, SectionProviderBreaker, SectionProviderCooldown}},
	{ID: "settings-waiting", Title: "Waiting", Sections: []string{SectionWaitForCooldown, SectionComboCooldownWait, SectionConnectionConcurrency}},
	{ID: "settings-sessions", Title: "Sessions and streams", Sections: []string{SectionSessionAffinity, SectionStreamRecovery, SectionEmergencyFallback}},
	{ID: "settings-models", Title: "Models and errors", Sections: []string{SectionModelLockout, SectionErrorRules}},
}

// SettingsSectionVM is one section of the page with its cards.
type SettingsSectionVM struct {
	Def   SettingsSectionDef
	Cards []SettingsCardVM
}

// GroupSettingsCards lays cards out in SettingsSections; a card no section
// names (a new one) goes into a last "More" section, so none is lost.
func GroupSettingsCards(cards []SettingsCardVM) []SettingsSectionVM {
	bySection := map[string]SettingsCardVM{}
	for _, c := range cards {
		bySection[c.Def.Section] = c
	}
	placed := map[string]bool{}
	var out []SettingsSectionVM
	for _, def := range SettingsSections {
		s := SettingsSectionVM{Def: def}
		for _, sec := range def.Sections {
			if c, ok := bySection[sec]; ok {
				s.Cards = append(s.Cards, c)
				placed[sec] = true
			}
		}
		if len(s.Cards) > 0 {
			out = append(out, s)
		}
	}
	more := SettingsSectionVM{Def: SettingsSectionDef{ID: "settings-more", Title: "More"}}
	for _, c := range cards {
		if !placed[c.Def.Section] {
			more.Cards = append(more.Cards, c)
		}
	}
	if len(more.Cards) > 0 {
		out = append(out, more)
	}
	return out
}

// SettingsSaveVM is a card's last save, read from the audit log: when, and
// who when it was a key (the admin session needs no name).
type SettingsSaveVM struct {
	At  *TimeVM
	Key string // key name, "" for the admin session
}

// NoSaveText is the last-saved line of a card without an entry in the audit
// log: never saved (every value a default or from the environment), or
// saved before the oldest entry the log keeps.
func (vm SettingsCardVM) NoSaveText() string {
	for _, g := range vm.Groups {
		for _, f := range g.Fields {
			if f.Source == schema.SourceStored {
				return "Saved before the audit log's oldest entry"
			}
		}
	}
	if vm.Rules != nil && len(vm.Rules.Rows) > 0 {
		return "Saved before the audit log's oldest entry"
	}
	return "Never saved"
}

// Human is a duration field's value in human units ("2 min", "1 h 30 min"),
// from the same formatter as the help text's defaults; "" for other fields,
// for values under a second and for 0 (which means off or no limit).
func (f SettingsFieldVM) Human() string {
	if f.Unit != "ms" {
		return ""
	}
	ms, err := strconv.ParseInt(strings.TrimSpace(f.Value), 10, 64)
	if err != nil || ms < 1000 {
		return ""
	}
	return human.Duration(millis(ms), human.Length)
}

// HumanID is the element id of the human-units text (an aria-describedby
// target of the input).
func (f SettingsFieldVM) HumanID() string { return f.ID() + "-human" }

// lockoutPreviewSteps bounds the preview: the longest ladder (20 steps)
// would not fit on a line, and the first steps and the cap say enough.
const lockoutPreviewSteps = 8

// LockoutPreview words the Model lockout card's escalation for repeated
// failures from the values the card shows, through the ladder the lockouts
// use (resilience.LockoutConfig.LadderLength): "2 min → 4 min → 8 min →
// 16 min → 30 min (cap)". ok is false when the values are not usable (the
// card then shows why instead).
func (vm SettingsCardVM) LockoutPreview() (text string, ok bool) {
	if vm.Def.Section != SectionModelLockout {
		return "", false
	}
	values := map[string]string{}
	for _, g := range vm.Groups {
		for _, f := range g.Fields {
			values[strings.TrimPrefix(f.Path, vm.Def.Key+".")] = strings.TrimSpace(f.Value)
		}
	}
	num := func(k string) (int64, bool) {
		n, err := strconv.ParseInt(values[k], 10, 64)
		return n, err == nil && n >= 0
	}
	base, ok1 := num("baseCooldownMs")
	maxMs, ok2 := num("maxCooldownMs")
	steps, ok3 := num("maxBackoffSteps")
	if !ok1 || !ok2 || !ok3 || base < 1000 || maxMs < base || steps > 1000 {
		return "Enter a base cooldown of at least 1000 ms and a maximum at least as long to see the lock lengths.", false
	}
	cfg := resilience.LockoutConfig{BaseCooldownMs: base, MaxCooldownMs: maxMs, MaxBackoffSteps: int(steps),
		UseExponentialBackoff: values["useExponentialBackoff"] == "true" || values["useExponentialBackoff"] == "on"}
	lengths, capped := cfg.Ladder(lockoutPreviewSteps + 1)
	if len(lengths) == 1 {
		return human.Duration(lengths[0], human.Length) + " on every repeat failure", true
	}
	parts := make([]string, 0, len(lengths))
	for i, d := range lengths {
		if i == lockoutPreviewSteps {
			parts = append(parts, "…")
			break
		}
		parts = append(parts, human.Duration(d, human.Length))
	}
	text = strings.Join(parts, " → ")
	if capped {
		text += " (cap)"
	}
	return text, true
}
