package app_test

import (
	"net/http"
	"testing"
)

func TestAPINestedUnknownFieldIsRefusedAndKeepsState(t *testing.T) {
	a := newAPIApp(t)
	conn := a.mustJSON(t, "POST", "/api/connections", `{"provider":"openai","name":"one","apiKey":"sk-test-000000000000","rateLimitOverrides":{"requestsPerMinute":5}}`, 201)
	id := conn["id"].(string)
	wantError(t, a.admin("PATCH", "/api/connections/"+id, `{"rateLimitOverrides":{"requestsPerMinut":7}}`), http.StatusBadRequest, "validation_failed")
	got := a.mustJSON(t, "GET", "/api/connections/"+id, "", 200)
	if rpm := got["rateLimitOverrides"].(map[string]any)["requestsPerMinute"]; rpm != float64(5) {
		t.Fatalf("override changed by a refused patch: %v", rpm)
	}
}

func TestAPINullOnBooleanIsRefused(t *testing.T) {
	a := newAPIApp(t)
	combo := a.mustJSON(t, "POST", "/api/combos", `{"name":"c1","targets":[{"provider":"openai","model":"gpt-4o"}]}`, 201)
	id := combo["id"].(string)
	wantError(t, a.admin("PATCH", "/api/combos/"+id, `{"enabled":null}`), http.StatusBadRequest, "validation_failed")
	if got := a.mustJSON(t, "GET", "/api/combos/"+id, "", 200); got["enabled"] != true {
		t.Fatal("combo disabled by a null")
	}
	key := a.mustJSON(t, "POST", "/api/keys", `{"name":"k"}`, 201)
	kid := key["key"].(map[string]any)["id"].(string)
	wantError(t, a.admin("PATCH", "/api/keys/"+kid, `{"enabled":null}`), http.StatusBadRequest, "validation_failed")
}

func TestAPILeaseKeyKeepsAtLeastOneConnection(t *testing.T) {
	a := newAPIApp(t)
	c1 := a.mustJSON(t, "POST", "/api/connections", `{"provider":"glm","name":"g1","apiKey":"sk-glm-0000000000000001"}`, 201)["id"].(string)
	c2 := a.mustJSON(t, "POST", "/api/connections", `{"provider":"glm","name":"g2","apiKey":"sk-glm-0000000000000002"}`, 201)["id"].(string)
	a.mustJSON(t, "POST", "/api/keys", `{"name":"agent","scopes":["inference","lease:exclusive"],"allowedConnections":["`+c1+`","`+c2+`"]}`, 201)
	a.mustJSON(t, "DELETE", "/api/connections/"+c1, "", 204)
	wantError(t, a.admin("DELETE", "/api/connections/"+c2, ""), http.StatusConflict, "conflict")
}
