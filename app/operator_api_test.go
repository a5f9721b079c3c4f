package app_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"switchyard/internal/fakeupstream"
	"switchyard/internal/testkit"
)

// operatorAdmin is an admin client of a gateway fixture's management API.
func operatorAdmin(t *testing.T, f *gwFixture) *apiApp {
	t.Helper()
	return &apiApp{App: f.app, cookie: f.app.Login()}
}

// chat sends one non-streamed chat to model and drains the answer.
func chatModel(t *testing.T, f *gwFixture, model string, headers ...string) *http.Response {
	t.Helper()
	resp := f.post(t, `{"model":"`+model+`","messages":[{"role":"user","content":"hi"}]}`, headers...)
	io.ReadAll(resp.Body)
	return resp
}

func jsonObjects(t *testing.T, v any) []map[string]any {
	t.Helper()
	raw, ok := v.([]any)
	if !ok {
		t.Fatalf("not an array: %v", v)
	}
	out := make([]map[string]any, len(raw))
	for i, x := range raw {
		out[i] = x.(map[string]any)
	}
	return out
}

// GET /api/logs and /api/logs/{id} (40-admin-api §8): the list shape, every
// filter, keyset pagination, the detail with its attempt log; the
// connection filter finds a request on the connection that failed, not
// only on the one that served.
func TestAPIRequestLogsListFiltersAndDetail(t *testing.T) {
	f := newGW(t, "fk-bad", "fk-good")
	a := operatorAdmin(t, f)
	f.fu.ScriptModel("fk-bad", "m1", fakeupstream.Step{Status: 503, ErrorMessage: "down for maintenance", Times: 100})
	failover := chatModel(t, f, "fake/m1")
	if failover.StatusCode != 200 {
		t.Fatalf("failover request: %d", failover.StatusCode)
	}
	f.app.Clock.Advance(time.Second)
	direct := chatModel(t, f, "fake/m2")
	f.app.Clock.Advance(time.Second)
	resp := f.post(t, streamBody)
	io.ReadAll(resp.Body)
	waitLogs(t, f, 3)
	bad, good := f.conns["fk-bad"].ID, f.conns["fk-good"].ID
	failoverID := failover.Header.Get("X-Switchyard-Request-Id")

	list := a.mustJSON(t, "GET", "/api/logs", "", 200)
	items := itemsOf(t, list)
	if len(items) != 3 || list["nextCursor"] != nil {
		t.Fatalf("list %v", list)
	}
	// Newest first; the failover row in the shape of §8.
	row := items[2]
	if row["id"] != failoverID || row["requestId"] != failoverID || row["method"] != "POST" || row["path"] != "/v1/chat/completions" ||
		row["requestedModel"] != "fake/m1" || row["status"] != 200.0 || row["attempts"] != 2.0 || row["stream"] != false ||
		row["outcome"] != "failover" || row["emergencyFallback"] != false {
		t.Fatalf("failover row %v", row)
	}
	served := row["served"].(map[string]any)
	if served["provider"] != "fake" || served["model"] != "m1" || served["connectionId"] != good {
		t.Errorf("served %v", served)
	}
	if k := row["apiKey"].(map[string]any); k["name"] != "client" || !strings.HasPrefix(k["prefix"].(string), "sk-sy-") {
		t.Errorf("apiKey %v", k)
	}
	wantNull(t, row, "errorCode", "streamOutcome", "ttfbMs", "combo", "estimatedCostUsd")
	if _, ok := row["warnings"].([]any); !ok {
		t.Errorf("warnings %v", row["warnings"])
	}
	if items[0]["stream"] != true || items[0]["streamOutcome"] != "completed" || items[0]["ttfbMs"] == nil {
		t.Errorf("stream row %v", items[0])
	}

	ids := func(query string) string {
		t.Helper()
		var out []string
		for _, it := range itemsOf(t, a.mustJSON(t, "GET", "/api/logs?"+query, "", 200)) {
			out = append(out, it["id"].(string))
		}
		return strings.Join(out, ",")
	}
	directID, streamID := direct.Header.Get("X-Switchyard-Request-Id"), resp.Header.Get("X-Switchyard-Request-Id")
	for query, want := range map[string]string{
		"connectionId=" + bad:   failoverID, // the connection that failed: its attempt counts
		"connectionId=" + good:  streamID + "," + directID + "," + failoverID,
		"outcome=failover":      failoverID,
		"outcome=success":       streamID + "," + directID,
		"model=fake/m2":         directID,
		"provider=fake":         streamID + "," + directID + "," + failoverID,
		"stream=true":           streamID,
		"stream=false":          directID + "," + failoverID,
		"requestId=" + directID: directID,
		"since=" + url.QueryEscape(f.app.Clock.Now().Add(-1500*time.Millisecond).Format(time.RFC3339Nano)): streamID + "," + directID,
		"until=" + url.QueryEscape(f.app.Clock.Now().Add(-1500*time.Millisecond).Format(time.RFC3339Nano)): failoverID,
		"keyId=k_nobody": "",
	} {
		if got := ids(query); got != want {
			t.Errorf("?%s: %s, want %s", query, got, want)
		}
	}
	// Keyset pagination, one row a page.
	page := a.mustJSON(t, "GET", "/api/logs?limit=1", "", 200)
	seen := []string{}
	for {
		it := itemsOf(t, page)
		if len(it) != 1 {
			t.Fatalf("page %v", page)
		}
		seen = append(seen, it[0]["id"].(string))
		next, _ := page["nextCursor"].(string)
		if next == "" {
			break
		}
		page = a.mustJSON(t, "GET", "/api/logs?limit=1&cursor="+url.QueryEscape(next), "", 200)
	}
	if strings.Join(seen, ",") != streamID+","+directID+","+failoverID {
		t.Errorf("pages %v", seen)
	}
	// Bad filters are 400 naming the parameter.
	for query, field := range map[string]string{"since=yesterday": "since", "stream=maybe": "stream", "limit=0": "limit",
		"outcome=nope": "outcome", "cursor=zzz": "cursor",
		"since=2026-03-02T00:00:00Z&until=2026-03-01T00:00:00Z": "since"} {
		e := wantError(t, a.admin("GET", "/api/logs?"+query, ""), http.StatusBadRequest, "validation_failed")
		if _, ok := e.Error.Fields[field]; !ok {
			t.Errorf("?%s: fields %v", query, e.Error.Fields)
		}
	}

	// The detail: the list fields plus the attempt log, waits and bodies.
	d := a.mustJSON(t, "GET", "/api/logs/"+failoverID, "", 200)
	if d["id"] != failoverID || d["attempts"] != 2.0 {
		t.Fatalf("detail %v", d)
	}
	log := jsonObjects(t, d["attemptLog"])
	if len(log) != 2 {
		t.Fatalf("attemptLog %v", d["attemptLog"])
	}
	first, last := log[0], log[1]
	if first["index"] != 0.0 || first["target"] != "fake/m1" || first["connectionId"] != bad || first["status"] != 503.0 ||
		first["reason"] != "server_error" || first["durationMs"] == nil {
		t.Errorf("first attempt %v", first)
	}
	if last["index"] != 1.0 || last["connectionId"] != good || last["status"] != 200.0 || last["reason"] != nil {
		t.Errorf("last attempt %v", last)
	}
	if eff, ok := first["effects"].([]any); !ok || eff == nil {
		t.Errorf("effects %v", first["effects"])
	}
	if w, ok := d["waits"].([]any); !ok || len(w) != 0 {
		t.Errorf("waits %v", d["waits"])
	}
	wantNull(t, d, "requestHeaders", "responseHeaders", "requestBody", "upstreamRequestBody", "responseBody")
	wantError(t, a.admin("GET", "/api/logs/req_nosuch", ""), http.StatusNotFound, "not_found")
	// A manage key reads it too.
	_, manage := a.NewKey("ops", "manage")
	if rec := a.bearer(manage, "GET", "/api/logs?connectionId="+bad, ""); rec.Code != 200 {
		t.Fatalf("manage key: %d", rec.Code)
	}
}

// GET /api/metrics/summary (40-admin-api §4.3): the Overview's figures from
// the in-memory buckets, with the estimated cost per key, connection and
// model once a price is known.
func TestAPIMetricsSummary(t *testing.T) {
	f := newGW(t, "fk-a")
	a := operatorAdmin(t, f)
	// A price for the fake provider's m1 (it has no list price).
	a.mustJSON(t, "PATCH", "/api/settings", `{"pricing":{"models":{"fake/m1":{"inputPerMTok":1000,"outputPerMTok":2000}}}}`, 200)
	f.fu.ScriptModel("fk-a", "bad", fakeupstream.Step{Status: 503, ErrorMessage: "down", Times: 10})
	for _, m := range []string{"fake/m1", "fake/m1", "fake/m2", "fake/bad"} {
		chatModel(t, f, m)
	}
	rows := waitLogs(t, f, 4)
	var tokensIn, tokensOut int64
	var m1Nano int64
	for _, r := range rows {
		tokensIn += r.PromptTokens
		tokensOut += r.CompletionTokens
		if r.Model == "m1" {
			if !r.EstimatedCost.Known {
				t.Fatalf("m1 row without a cost: %+v", r)
			}
			m1Nano += r.EstimatedCost.NanoUSD
			if want := r.PromptTokens*1000*1000 + r.CompletionTokens*2000*1000; r.EstimatedCost.NanoUSD != want {
				t.Errorf("m1 cost %d nano-USD, want %d", r.EstimatedCost.NanoUSD, want)
			}
		} else if r.EstimatedCost.Known {
			t.Errorf("%s priced %+v without a price", r.Model, r.EstimatedCost)
		}
	}
	s := a.mustJSON(t, "GET", "/api/metrics/summary?window=1h", "", 200)
	if s["window"] != "1h" || s["requests"] != 4.0 || s["succeeded"] != 3.0 || s["failed"] != 1.0 || s["successRate"] != 0.75 ||
		s["failovers"] != 0.0 || s["tokensIn"] != float64(tokensIn) || s["tokensOut"] != float64(tokensOut) || s["sinceStart"] != true {
		t.Fatalf("summary %v", s)
	}
	if s["latencyP50Ms"] == nil || s["latencyP95Ms"] == nil {
		t.Errorf("latency %v %v", s["latencyP50Ms"], s["latencyP95Ms"])
	}
	wantNull(t, s, "ttfbP50Ms", "ttfbP95Ms")
	points := jsonObjects(t, s["perMinute"])
	if len(points) != 60 || points[59]["ok"] != 3.0 || points[59]["failed"] != 1.0 {
		t.Errorf("perMinute: %d points, last %v", len(points), points[len(points)-1])
	}
	failing := jsonObjects(t, s["topFailingTargets"])
	if len(failing) != 1 || failing[0]["provider"] != "fake" || failing[0]["model"] != "bad" || failing[0]["failures"] != 1.0 ||
		failing[0]["lastError"] != "503 server_error" || failing[0]["connectionId"] != f.conns["fk-a"].ID {
		t.Errorf("failing %v", failing)
	}
	cost := s["estimatedCost"].(map[string]any)
	if cost["estimate"] != true || cost["usd"] != float64(m1Nano)/1e9 || cost["unpricedRequests"] != 1.0 {
		t.Errorf("cost %v (m1 %d nano)", cost, m1Nano)
	}
	byKey := jsonObjects(t, cost["byKey"])
	if len(byKey) != 1 || byKey[0]["name"] != "client" || byKey[0]["requests"] != 4.0 || byKey[0]["usd"] != float64(m1Nano)/1e9 {
		t.Errorf("byKey %v", byKey)
	}
	byConn := jsonObjects(t, cost["byConnection"])
	if len(byConn) != 1 || byConn[0]["connectionId"] != f.conns["fk-a"].ID || byConn[0]["connectionName"] != "conn-0" {
		t.Errorf("byConnection %v", byConn)
	}
	// Per model, the priced one first; a failed request counts without cost.
	byModel := jsonObjects(t, cost["byModel"])
	if len(byModel) != 3 || byModel[0]["model"] != "fake/m1" || byModel[0]["requests"] != 2.0 || byModel[1]["model"] != "fake/bad" ||
		byModel[1]["unpricedRequests"] != 0.0 || byModel[2]["model"] != "fake/m2" || byModel[2]["usd"] != 0.0 || byModel[2]["unpricedRequests"] != 1.0 {
		t.Errorf("byModel %v", byModel)
	}
	// Two hours on, the hour is empty and the day still holds them.
	f.app.Clock.Advance(2 * time.Hour)
	if s := a.mustJSON(t, "GET", "/api/metrics/summary", "", 200); s["requests"] != 0.0 || s["successRate"] != nil || s["sinceStart"] != false {
		t.Errorf("empty hour %v", s["requests"])
	}
	day := a.mustJSON(t, "GET", "/api/metrics/summary?window=24h", "", 200)
	if day["requests"] != 4.0 || len(jsonObjects(t, day["perMinute"])) != 1440 || day["sinceStart"] != true {
		t.Errorf("24 h: %v requests", day["requests"])
	}
	wantError(t, a.admin("GET", "/api/metrics/summary?window=7d", ""), http.StatusBadRequest, "validation_failed")
}

// POST /api/resilience/classify runs the engine's pipeline on a described
// failure and changes nothing; GET /api/resilience/error-rules lists the
// registries (40-admin-api §2.4).
func TestAPIClassifyDryRunAndErrorRules(t *testing.T) {
	f := newGW(t, "fk-a")
	a := operatorAdmin(t, f)
	connID := f.conns["fk-a"].ID
	before := rtState(t, f.app)

	// The spec's example: opencode's remaining-requests header of 0.
	c := a.mustJSON(t, "POST", "/api/resilience/classify", `{"provider":"opencode","status":429,
		"headers":{"x-ratelimit-remaining-requests":"0"},"body":"{\"error\":{\"message\":\"slow down\"}}","model":"qwen3-coder"}`, 200)
	rule := c["rule"].(map[string]any)
	cl := c["classification"].(map[string]any)
	if rule["id"] != "opencode-remaining-zero" || rule["origin"] != "builtin" || c["restated"] != nil ||
		cl["reason"] != "quota_exhausted" || cl["scope"] != "connection" || cl["breaker"] != "not_counted" || cl["failover"] != "next" {
		t.Fatalf("opencode %v", c)
	}
	wantNull(t, cl, "lockScope", "hintMs", "hintSource", "terminal", "detail")

	// A 503 on the fake connection, priced at its own backoff level: the
	// apikey profile's base cooldown, counted by the breaker.
	c = a.mustJSON(t, "POST", "/api/resilience/classify", `{"provider":"fake","status":503,"model":"m1","connectionId":"`+connID+`"}`, 200)
	cl = c["classification"].(map[string]any)
	eff := c["effect"].(map[string]any)
	if cl["reason"] != "server_error" || cl["breaker"] != "counted" || cl["cooldownMs"] != 3000.0 || eff["kind"] != "connection_cooldown" ||
		c["rule"] != nil || c["classifierRow"] != 20.0 {
		t.Fatalf("503 %v", c)
	}
	// A retry hint from the headers.
	c = a.mustJSON(t, "POST", "/api/resilience/classify", `{"provider":"openai","status":429,"headers":{"Retry-After":"7"}}`, 200)
	if cl := c["classification"].(map[string]any); cl["reason"] != "rate_limit" || cl["hintMs"] != 7000.0 || cl["hintSource"] != "header" || cl["cooldownMs"] != 7000.0 {
		t.Fatalf("retry-after %v", c)
	}
	// A transport failure, and a caller error that changes nothing.
	c = a.mustJSON(t, "POST", "/api/resilience/classify", `{"provider":"openai","status":0,"transport":"reset"}`, 200)
	if cl := c["classification"].(map[string]any); cl["reason"] != "transient" {
		t.Fatalf("reset %v", c)
	}
	c = a.mustJSON(t, "POST", "/api/resilience/classify", `{"provider":"openai","status":400,"body":"{\"error\":{\"message\":\"unknown field foo\"}}"}`, 200)
	if cl := c["classification"].(map[string]any); cl["reason"] != "caller_error" || c["effect"] != nil || cl["failover"] != "stop" {
		t.Fatalf("caller error %v", c)
	}
	// Operator rules come first, and the list shows them.
	patchResilience(t, f.app, `{"providerErrorRules":[{"id":"r_quota","provider":"fake","status":429,"match":"credit","reason":"quota_exhausted","scope":"connection","cooldownMs":60000}]}`)
	c = a.mustJSON(t, "POST", "/api/resilience/classify", `{"provider":"fake","status":429,"body":"out of credit"}`, 200)
	if r := c["rule"].(map[string]any); r["id"] != "r_quota" || r["origin"] != "operator" || r["index"] != 0.0 ||
		c["classification"].(map[string]any)["cooldownMs"] != 60000.0 {
		t.Fatalf("operator rule %v", c)
	}
	if after := rtState(t, f.app); after != before {
		t.Fatalf("the dry run changed state:\nbefore %s\nafter  %s", before, after)
	}

	for body, field := range map[string]string{
		`{"status":429}`:                                       "provider",
		`{"provider":"nope","status":429}`:                     "provider",
		`{"provider":"openai"}`:                                "status",
		`{"provider":"openai","status":700}`:                   "status",
		`{"provider":"openai","status":0}`:                     "transport",
		`{"provider":"openai","status":0,"transport":"bogus"}`: "transport",
	} {
		e := wantError(t, a.admin("POST", "/api/resilience/classify", body), http.StatusBadRequest, "validation_failed")
		if _, ok := e.Error.Fields[field]; !ok {
			t.Errorf("%s: fields %v", body, e.Error.Fields)
		}
	}
	wantError(t, a.admin("POST", "/api/resilience/classify", `{"provider":"openai","status":429,"bogus":1}`), http.StatusBadRequest, "validation_failed")

	rules := a.mustJSON(t, "GET", "/api/resilience/error-rules", "", 200)
	operator := jsonObjects(t, rules["operator"])
	if len(operator) != 1 || operator[0]["id"] != "r_quota" || operator[0]["enabled"] != true {
		t.Errorf("operator %v", operator)
	}
	builtin := jsonObjects(t, rules["builtin"])
	if len(builtin) < 10 || builtin[0]["id"] != "opencode-endpoint-unavailable" || builtin[0]["providers"] == nil {
		t.Errorf("builtin %v", builtin[:1])
	}
	if rs := jsonObjects(t, rules["restatements"]); len(rs) != 1 || rs[0]["id"] != "newapi-quota-misstatus" {
		t.Errorf("restatements %v", rs)
	}
}

// The admin health document's sections of 40-admin-api §4.1 that the
// report lacked: leases, affinity, queues, slots, learned tool limits and
// the emergency fallback (degraded when its target stops resolving).
func TestAPIHealthReportSections(t *testing.T) {
	f := newGW(t, "fk-a")
	a := operatorAdmin(t, f)
	h := a.mustJSON(t, "GET", "/api/monitoring/health", "", 200)
	for key, want := range map[string]string{
		"leases": `{"active":0}`, "affinity": `{"pins":0}`, "queues": `{"queued":0,"running":0}`,
		"slots": `{"failOpenGrants":0,"inFlight":0,"waiting":0}`, "learnedToolLimits": `[]`,
		"emergencyFallback": `{"enabled":false,"resolves":false,"target":""}`,
	} {
		if b, _ := json.Marshal(h[key]); string(b) != want {
			t.Errorf("%s = %s, want %s", key, b, want)
		}
	}
	// A tool limit learned from an upstream refusal.
	f.fu.ScriptModel("fk-a", "tooly", fakeupstream.Step{Status: 400, ErrorMessage: "Invalid 'tools': array too long. Expected an array with maximum length 2, but got an array with length 3 instead.", ErrorCode: "array_above_max_length"})
	resp := f.post(t, `{"model":"fake/tooly","messages":[{"role":"user","content":"hi"}],"tools":[`+
		strings.Repeat(`{"type":"function","function":{"name":"f","parameters":{}}},`, 2)+`{"type":"function","function":{"name":"g","parameters":{}}}]}`)
	io.ReadAll(resp.Body)
	// The emergency fallback on a combo target, then the combo switched off.
	cb := moreDemoCombo(t, f, "fk-a")
	patchResilience(t, f.app, `{"emergencyFallback":{"enabled":true,"target":"`+cb.Name+`"}}`)
	f.app.Clock.Advance(2 * time.Second) // past the report's one-second cache
	h = a.mustJSON(t, "GET", "/api/monitoring/health", "", 200)
	tl := jsonObjects(t, h["learnedToolLimits"])
	if len(tl) != 1 || tl[0]["provider"] != "fake" || tl[0]["model"] != "tooly" || tl[0]["maxTools"] != 2.0 || tl[0]["source"] != "parsed" {
		t.Errorf("learnedToolLimits %v", tl)
	}
	ef := h["emergencyFallback"].(map[string]any)
	if ef["enabled"] != true || ef["target"] != cb.Name || ef["resolves"] != true || h["status"] != "ok" {
		t.Errorf("emergencyFallback %v, status %v %v", ef, h["status"], h["reasons"])
	}
	a.mustJSON(t, "PATCH", "/api/combos/"+cb.ID, `{"enabled":false}`, 200)
	f.app.Clock.Advance(2 * time.Second)
	h = a.mustJSON(t, "GET", "/api/monitoring/health", "", 200)
	if ef := h["emergencyFallback"].(map[string]any); ef["resolves"] != false || h["status"] != "degraded" ||
		!strings.Contains(fmt.Sprint(h["reasons"]), "emergency_fallback_unresolved") {
		t.Errorf("after the combo was switched off: %v, %v %v", ef, h["status"], h["reasons"])
	}
	// The public body still says nothing else.
	if rec := f.app.Do(testkit.Request("GET", "/api/monitoring/health", "")); rec.Body.String() != `{"status":"ok"}`+"\n" {
		t.Errorf("public body %q", rec.Body.String())
	}
}
