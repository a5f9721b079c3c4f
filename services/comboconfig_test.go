package services_test

import (
	"encoding/json"
	"reflect"
	"testing"

	"switchyard/services"
)

// fullComboConfig sets every key of 30-routing §3.
const fullComboConfig = `{"maxRetries": 2, "retryDelayMs": 1500, "targetTimeoutMs": 60000, "maxComboDepth": 4,
 "sessionSticky": false, "stickyRoundRobinLimit": 3, "stickyWeightedLimit": 2,
 "queue": {"concurrencyPerTarget": 0, "depth": 5, "timeoutMs": 1000},
 "resetAware": {"fiveHourWeight": 0.4, "weeklyWeight": 0.6, "fiveHourMix": [0.5, 0.5], "weeklyMix": [0, 1],
   "guardRemaining": 0.1, "tieBand": 0},
 "resetWindow": {"windows": ["5h", "weekly"], "tieBandMs": 60000},
 "auto": {"weights": {"quota": 1, "health": 0.5}, "modePack": "cost-saver", "explorationRate": 0.1, "tieBand": 0.02},
 "cache": {"minPrefixBytes": 2048},
 "contextRelay": {"handoffThreshold": 0.8, "handoffModel": "gpt-mini", "handoffProviders": [],
   "maxMessagesForSummary": 20, "handoffTtlMs": 600000},
 "fusion": {"judge": {"provider": "openai", "model": "gpt-5"}, "minPanel": 2, "stragglerGraceMs": 0, "panelHardTimeoutMs": 30000}}`

func decodeRaw(t *testing.T, s string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// The typed config stores and serves the same JSON as the plain object it
// replaces: every key kept (zero values and empty lists included), keys in
// sorted order, numbers as sent.
func TestComboConfigKeepsItsJSON(t *testing.T) {
	raw := decodeRaw(t, fullComboConfig)
	cfg, errs := services.DecodeComboConfig(raw)
	if len(errs) > 0 {
		t.Fatalf("problems %v", errs)
	}
	want, _ := json.Marshal(raw) // a map encodes with sorted keys
	if got := services.ConfigJSON(cfg); got != string(want) {
		t.Fatalf("JSON\n got %s\nwant %s", got, want)
	}
	var back services.ComboConfig
	if err := json.Unmarshal([]byte(services.ConfigJSON(cfg)), &back); err != nil || !reflect.DeepEqual(back, cfg) {
		t.Fatalf("round trip: %v\n%+v\n%+v", err, back, cfg)
	}
	if *cfg.Queue.ConcurrencyPerTarget != 0 || cfg.ContextRelay.HandoffProviders == nil || *cfg.Fusion.Judge.Model != "gpt-5" {
		t.Fatalf("typed fields: %+v", cfg)
	}
	empty, errs := services.DecodeComboConfig(map[string]any{"maxRetries": nil, "queue": map[string]any{"depth": nil}, "auto": nil})
	if len(errs) > 0 || !empty.IsZero() || services.ConfigJSON(empty) != "{}" {
		t.Fatalf("nulls: %s %v", services.ConfigJSON(empty), errs)
	}
}

// Every key words its problem as 30-routing §3's check always did.
func TestComboConfigProblems(t *testing.T) {
	_, errs := services.DecodeComboConfig(decodeRaw(t, `{"maxRetries": 9, "retryDelayMs": 1.5, "targetTimeoutMs": "x",
	 "sessionSticky": 1, "queue": {"depth": -1, "nope": 1}, "cache": 3, "bogus": true,
	 "resetAware": {"fiveHourWeight": 2, "fiveHourMix": [0.5], "weeklyMix": "a"},
	 "resetWindow": {"windows": []},
	 "auto": {"weights": {"quota": -1}, "modePack": 5, "tieBand": 0.9},
	 "contextRelay": {"handoffModel": "", "handoffProviders": [1]},
	 "fusion": {"judge": {"provider": "openai"}}}`))
	want := map[string]string{
		"maxRetries":                    "must be a whole number between 0 and 5",
		"retryDelayMs":                  "must be a whole number between 0 and 60000",
		"targetTimeoutMs":               "must be a whole number between 1000 and 900000",
		"sessionSticky":                 "must be true or false",
		"queue.depth":                   "must be a whole number between 0 and 100",
		"queue.nope":                    "unknown field",
		"cache":                         "must be an object",
		"bogus":                         "unknown field",
		"resetAware.fiveHourWeight":     "must be a number between 0 and 1",
		"resetAware.fiveHourMix":        "must be a pair of numbers between 0 and 1",
		"resetAware.weeklyMix":          "must be a pair of numbers between 0 and 1",
		"resetWindow.windows":           "must be a non-empty list of 5h, daily, weekly, monthly",
		"auto.weights":                  "must be an object of factor → number ≥ 0",
		"auto.modePack":                 "must be one of ship-fast, cost-saver, quality-first, offline-friendly, reliability-first",
		"auto.tieBand":                  "must be a number between 0 and 0.5",
		"contextRelay.handoffModel":     "must be a model name",
		"contextRelay.handoffProviders": "must be a list of provider ids",
		"fusion.judge":                  `must be {"provider", "model"} or {"comboId"}`,
	}
	if !reflect.DeepEqual(errs, want) {
		for k, v := range errs {
			if want[k] != v {
				t.Errorf("%s: %q, want %q", k, v, want[k])
			}
		}
		for k := range want {
			if _, ok := errs[k]; !ok {
				t.Errorf("%s: no problem", k)
			}
		}
	}
	for _, judge := range []string{`{"comboId": "cb_1"}`, `{"provider": "openai", "model": "m"}`} {
		if _, errs := services.DecodeComboConfig(decodeRaw(t, `{"fusion": {"judge": `+judge+`}}`)); len(errs) > 0 {
			t.Errorf("judge %s: %v", judge, errs)
		}
	}
	for _, judge := range []string{`{"comboId": null}`, `{"comboId": "x", "model": "m"}`, `{"provider": 1, "model": "m"}`, `"x"`} {
		if _, errs := services.DecodeComboConfig(decodeRaw(t, `{"fusion": {"judge": `+judge+`}}`)); errs["fusion.judge"] == "" {
			t.Errorf("judge %s accepted", judge)
		}
	}
}
