package resilience_test

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	"switchyard/services/resilience"
	"switchyard/services/settings"
)

// FuzzSettingsDocument (60-quality R14): whatever JSON a PATCH carries,
// normalising is idempotent. The values a patch leaves (every field that
// passed its check) are stored as the document's JSON; reading that JSON
// back accepts every field and gives the same values, and storing them again
// gives the same bytes. The typed document always builds from them. Checked
// for the resilience and the general settings documents.
func FuzzSettingsDocument(f *testing.F) {
	for _, s := range []string{
		specDefaultJSON,
		`{"requestQueue": {"maxWaitMs": 25000}}`,
		`{"requestQueue": {"maxWaitMs": null}, "modelLockout": null}`,
		`{"modelLockout": {"enabled": true, "baseCooldownMs": 60000, "errorCodes": [429, 503, 429]}}`,
		`{"providerBreaker": {"oauth": {"failureThreshold": 1, "degradationThreshold": 2}}}`,
		`{"requestQueue":{"maxWaitMs":1500.5,"maxQueueDepth":1e3,"concurrentRequests":-0}}`,
		`{"requestQueue":{"maxWaitMs":99999999999999999999999}}`,
		`{"emergencyFallback": {"enabled": true, "target": "demo", "maxOutputTokens": 4096}}`,
		`{"providerErrorRules": [{"id": "r1", "provider": "openai", "status": 400, "match": "capacity", "reason": "model_capacity", "scope": "model"},` +
			`{"provider": "openai", "status": 429, "header": {"name": "x-kind", "contains": "daily"}, "reason": "quota_exhausted", "scope": "connection", "cooldownMs": 60000}]}`,
		`{"providerErrorRules": [{"provider": "", "status": 99}], "x": {}}`,
		`{"routing": {"maxAttemptsPerRequest": 5, "fallbackStrategy": "round-robin", "providerStrategies": {"openai": "least-used"}}}`,
		`{"logging": {"retentionDays": 7, "captureBodies": true}}`,
		`{"routing": {"providerStrategies": {"a": null, "b": {"c": 1}}}}`,
		`{"sessionAffinity": {"ttlMs": -1}, "autoDisableBannedAccounts": "true"}`,
	} {
		f.Add([]byte(s))
	}
	res := resilience.ResilienceSpec(resilience.SettingsOptions{}, nil)
	gen := settings.GeneralSpec(settings.GeneralOptions{})
	f.Fuzz(func(t *testing.T, body []byte) {
		patch, err := settings.DecodePatch(body)
		if err != nil {
			return
		}
		checkSettingsNormalIdempotent(t, res, patch)
		checkSettingsNormalIdempotent(t, gen, patch)
	})
}

func checkSettingsNormalIdempotent[T any](t *testing.T, spec settings.Spec[T], patch map[string]any) {
	t.Helper()
	schema := spec.Schema
	base, _ := schema.Effective(nil, nil)
	stored, _, _ := schema.Apply(nil, base, patch, true)

	b, err := json.Marshal(schema.Nest(stored))
	if err != nil {
		t.Fatalf("%s: encode stored values: %v", spec.Key, err)
	}
	var root map[string]any
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(&root); err != nil {
		t.Fatalf("%s: stored JSON does not decode: %v: %s", spec.Key, err, b)
	}
	again, _, errs := schema.Apply(nil, nil, root, false)
	if len(errs) > 0 {
		t.Fatalf("%s: stored JSON %s is refused on reload: %v", spec.Key, b, errs)
	}
	if !reflect.DeepEqual(again, stored) {
		t.Fatalf("%s: reload changed the values:\n stored %#v\n reload %#v", spec.Key, stored, again)
	}
	b2, err := json.Marshal(schema.Nest(again))
	if err != nil || !bytes.Equal(b2, b) {
		t.Fatalf("%s: storing again gives different bytes (%v):\n%s\n%s", spec.Key, err, b, b2)
	}
	eff, _ := schema.Effective(stored, nil)
	if spec.Derive != nil {
		spec.Derive(eff, map[string]string{})
	}
	if _, err := spec.Build(eff); err != nil {
		t.Fatalf("%s: the document does not build from %s: %v", spec.Key, b, err)
	}
}
