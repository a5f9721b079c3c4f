package services_test

import (
	"encoding/json"
	"testing"

	"switchyard/services"
)

// The audit diff lists changed leaves by path, before and after, and never a
// credential's value.
func TestAuditDiff(t *testing.T) {
	before := `{"modelLockout": {"enabled": false, "baseCooldownMs": 120000, "errorCodes": [429, 503]},
	  "emergencyFallback": {"maxOutputTokens": 4096}, "pricing": {"models": {}},
	  "upstream": {"apiKey": "sk-old", "proxyUrl": "http://u:p@h"}, "same": 1}`
	after := `{"modelLockout": {"enabled": true, "baseCooldownMs": 120000, "errorCodes": [429]},
	  "emergencyFallback": {"maxOutputTokens": 1024}, "pricing": {"models": {"fake/m1": {"inputPerMTok": 1, "outputPerMTok": 2}}},
	  "upstream": {"apiKey": "sk-new", "proxyUrl": null, "accessToken": "t"}, "same": 1}`
	got := services.AuditDiff([]byte(before), []byte(after))
	b, _ := json.Marshal(got)
	want := `[{"path":"emergencyFallback.maxOutputTokens","before":4096,"after":1024},` +
		`{"path":"modelLockout.enabled","before":false,"after":true},` +
		`{"path":"modelLockout.errorCodes","before":[429,503],"after":[429]},` +
		`{"path":"pricing.models.fake/m1.inputPerMTok","before":null,"after":1},` +
		`{"path":"pricing.models.fake/m1.outputPerMTok","before":null,"after":2},` +
		`{"path":"upstream.accessToken","before":null,"after":"[redacted]"},` +
		`{"path":"upstream.apiKey","before":"[redacted]","after":"[redacted]"},` +
		`{"path":"upstream.proxyUrl","before":"[redacted]","after":null}]`
	if string(b) != want {
		t.Fatalf("diff\n got %s\nwant %s", b, want)
	}
	if d := services.AuditDiff([]byte(before), []byte(before)); len(d) != 0 {
		t.Fatalf("no change gave %v", d)
	}
}
