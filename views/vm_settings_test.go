package views

import (
	"reflect"
	"strings"
	"testing"

	"switchyard/services/resilience"
)

func resilienceOrder() []string {
	var order []string
	for _, f := range resilience.ResilienceSpec(resilience.SettingsOptions{}, nil).Schema.Fields() {
		order = append(order, f.Path)
	}
	return order
}

// The cards lay out the resilience document's own field table: every field
// of a carded section is on its card (or named as shown elsewhere), each
// once, and every sub-object is a fieldset with a legend.
func TestSettingsCardsCoverTheSchema(t *testing.T) {
	order := resilienceOrder()
	onCard := map[string]string{}
	for _, def := range SettingsCardDefs {
		for _, g := range def.Groups(order) {
			for _, p := range g.Paths {
				if prev, dup := onCard[p]; dup {
					t.Errorf("%s is on %s and %s", p, prev, def.Section)
				}
				onCard[p] = def.Section
				if nested := strings.Count(strings.TrimPrefix(p, def.Key+"."), ".") > 0; nested && g.Legend == "" {
					t.Errorf("%s: sub-object group without a legend", p)
				}
			}
		}
		for _, p := range def.Omit {
			if !containsString(order, p) {
				t.Errorf("%s omits %s, which is not a field", def.Section, p)
			}
		}
	}
	for _, p := range order {
		section, _, _ := strings.Cut(p, ".")
		def, carded := findCardByKey(section)
		if carded && def.Section != SectionErrorRules && onCard[p] == "" && !containsString(def.Omit, p) {
			t.Errorf("%s is on no card", p)
		}
	}
}

func findCardByKey(key string) (SettingsCardDef, bool) {
	for _, d := range SettingsCardDefs {
		if d.Key == key {
			return d, true
		}
	}
	return SettingsCardDef{}, false
}

// The layout the cards had when it was written out by hand.
func TestSettingsCardLayout(t *testing.T) {
	order := resilienceOrder()
	card := func(section string) []SettingsGroupDef { d, _ := FindSettingsCard(section); return d.Groups(order) }
	want := []SettingsGroupDef{{Paths: []string{"connectionCooldown.maxRetryHintMs"}}}
	for _, p := range []struct{ key, legend string }{{"oauth", "OAuth connections"}, {"apikey", "API-key connections"}, {"local", "Local connections"}} {
		want = append(want, SettingsGroupDef{Legend: p.legend, Paths: []string{"connectionCooldown." + p.key + ".baseCooldownMs",
			"connectionCooldown." + p.key + ".maxBackoffSteps", "connectionCooldown." + p.key + ".maxCooldownMs"}})
	}
	if got := card(SectionConnectionCooldown); !reflect.DeepEqual(got, want) {
		t.Errorf("connection cooldown\n got %v\nwant %v", got, want)
	}
	for section, paths := range map[string][]string{
		SectionRequestQueue: {"requestQueue.autoEnableApiKeyProviders", "requestQueue.requestsPerMinute",
			"requestQueue.minTimeBetweenRequestsMs", "requestQueue.concurrentRequests", "requestQueue.maxWaitMs",
			"requestQueue.queueWaitMs", "requestQueue.maxQueueDepth"},
		SectionConnectionConcurrency: {"connectionConcurrency.enabled", "connectionConcurrency.failOpen",
			"connectionConcurrency.slotWaitMs", "connectionConcurrency.queueDepth"},
		SectionEmergencyFallback: {"emergencyFallback.skipForToolRequests", "emergencyFallback.maxOutputTokens"},
		SectionErrorRules:        nil,
	} {
		d, _ := FindSettingsCard(section)
		if got := d.Paths(order); !reflect.DeepEqual(got, paths) {
			t.Errorf("%s: %v, want %v", section, got, paths)
		}
	}
	sr := card(SectionStreamRecovery)
	if len(sr) != 2 || sr[0].Legend != "" || sr[1].Legend != "Throughput watchdog" || len(sr[1].Paths) != 5 {
		t.Errorf("stream recovery %v", sr)
	}
}
