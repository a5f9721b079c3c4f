package resilience

import (
	"fmt"

	"switchyard/services/settings"
	"switchyard/services/settings/schema"
)

// The cross-field rules of 40-admin-api §2.3, checked on the merged
// effective document. A problem is reported on the field the PATCH changed,
// so the admin sees it where they typed.

// resilienceCross checks the cross-field rules on the merged document.
func resilienceCross(d *Document, c settings.Check, opts SettingsOptions) []settings.Problem {
	x := crossCheck{c: c}
	for _, p := range settingsProfiles {
		pre := "connectionCooldown." + p.name + "."
		x.atLeast(pre+"baseCooldownMs", pre+"maxCooldownMs")
	}
	for _, p := range settingsProfiles {
		x.breakerProfile("providerBreaker." + p.name + ".")
	}
	x.atLeast("providerCooldown.minRetryCooldownMs", "providerCooldown.maxRetryCooldownMs")
	x.atLeast("modelLockout.baseCooldownMs", "modelLockout.maxCooldownMs")
	x.waits("waitForCooldown", "maxRetries", "maxRetryWaitMs")
	x.waits("comboCooldownWait", "maxAttempts", "maxWaitMs")
	x.fallback(d.EmergencyFallback, opts)
	return x.out
}

type crossCheck struct {
	c   settings.Check
	out []settings.Problem
}

func (x *crossCheck) add(path, msg string, related ...string) {
	x.out = append(x.out, settings.Problem{Path: path, Message: msg, Related: related})
}

// atLeast: high ≥ low, reported on the field the PATCH changed.
func (x *crossCheck) atLeast(lowPath, highPath string) {
	low, high := x.c.Values.Int(lowPath), x.c.Values.Int(highPath)
	if high >= low {
		return
	}
	if x.c.Touched(lowPath) && !x.c.Touched(highPath) {
		x.add(lowPath, fmt.Sprintf("must not be greater than %s (%d)", schema.Last(highPath), high), highPath)
		return
	}
	x.add(highPath, fmt.Sprintf("must be at least %s (%d)", schema.Last(lowPath), low), lowPath)
}

// breakerProfile: a set degradationThreshold is below failureThreshold (or
// both are 1).
func (x *crossCheck) breakerProfile(pre string) {
	degPath, failPath := pre+"degradationThreshold", pre+"failureThreshold"
	if src := x.c.Sources[degPath]; src != schema.SourceStored && src != schema.SourceEnv {
		return
	}
	deg, fail := x.c.Values.Int(degPath), x.c.Values.Int(failPath)
	if deg < fail || deg == 1 && fail == 1 {
		return
	}
	switch {
	case x.c.Touched(failPath) && !x.c.Touched(degPath):
		x.add(failPath, fmt.Sprintf("must be higher than degradationThreshold (%d)", deg), degPath)
	case fail == 1:
		x.add(degPath, "must be 1 when failureThreshold is 1", failPath)
	default:
		x.add(degPath, fmt.Sprintf("must be lower than failureThreshold (%d)", fail), failPath)
	}
}

// waits: an enabled wait needs count and cap ≥ 1 and budget ≥ cap.
func (x *crossCheck) waits(section, countName, capName string) {
	enabledPath, countPath, capPath := section+".enabled", section+"."+countName, section+"."+capName
	if !x.c.Values.Bool(enabledPath) {
		return
	}
	onlyEnabled := func(path string) bool { return x.c.Touched(enabledPath) && !x.c.Touched(path) }
	for _, path := range []string{countPath, capPath} {
		if x.c.Values.Int(path) >= 1 {
			continue
		}
		if onlyEnabled(path) {
			x.add(enabledPath, fmt.Sprintf("needs %s of at least 1 (now %d)", path, x.c.Values.Int(path)), path)
		} else {
			x.add(path, fmt.Sprintf("must be at least 1 while %s is true", enabledPath), enabledPath)
		}
	}
	budgetPath := section + ".budgetMs"
	budget, limit := x.c.Values.Int(budgetPath), x.c.Values.Int(capPath)
	if budget >= limit {
		return
	}
	switch {
	case x.c.Touched(capPath) && !x.c.Touched(budgetPath):
		x.add(capPath, fmt.Sprintf("must not be greater than budgetMs (%d) while %s is true", budget, enabledPath), budgetPath)
	case onlyEnabled(budgetPath):
		x.add(enabledPath, fmt.Sprintf("needs budgetMs of at least %s (%d)", capName, limit), budgetPath)
	default:
		x.add(budgetPath, fmt.Sprintf("must be at least %s (%d) while %s is true", capName, limit, enabledPath), capPath)
	}
}

// fallback: turning the emergency fallback on needs a resolving target.
func (x *crossCheck) fallback(ef EmergencyFallbackSettings, opts SettingsOptions) {
	const efEnabled, efTarget = "emergencyFallback.enabled", "emergencyFallback.target"
	if !ef.Enabled || x.c.Patched == nil || !(x.c.Touched(efEnabled) || x.c.Touched(efTarget)) {
		return
	}
	var resolveErr error
	if ef.Target != "" && opts.ResolveTarget != nil {
		resolveErr = opts.ResolveTarget(x.c.Ctx, ef.Target)
	}
	switch {
	case x.c.Touched(efEnabled) && (ef.Target == "" || resolveErr != nil && !x.c.Touched(efTarget)):
		x.add(efEnabled, "set emergencyFallback.target first")
	case resolveErr != nil:
		x.add(efTarget, "does not resolve: "+resolveErr.Error())
	}
}
