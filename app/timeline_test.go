package app_test

import (
	"io"
	"strings"
	"testing"
	"time"

	"switchyard/internal/fakeupstream"
	"switchyard/views"
)

// A slow request explains itself (50-dashboard §6.7, 40-admin-api §8): a
// 429 with Retry-After 33 s cools the only connection, the request waits
// the cooldown out and is served. GET /api/logs/{id} lists the wait with
// its reason and length next to both attempts, their start offsets and
// the first one's effect, and attempts + waits + gaps add up to the
// request's latency; the log drawer shows the wait as a row of the
// timeline and the sum.
func TestSlowRequestTimelineAddsUp(t *testing.T) {
	f := newGW(t, "fk-a")
	patchResilience(t, f.app, `{"waitForCooldown":{"enabled":true,"maxRetryWaitMs":60000,"budgetMs":60000}}`)
	f.fu.SetScript("fk-a", "*", fakeupstream.Script{Steps: []fakeupstream.Step{{Status: 429, RetryAfter: "33"}}, Then: fakeupstream.ThenDefault})
	received := f.app.Clock.Now()
	resp := f.post(t, chatBody)
	io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	id := resp.Header.Get("X-Switchyard-Request-Id")
	waitLogs(t, f, 1)
	total := f.app.Clock.Now().Sub(received).Milliseconds() // 33 050 ms on the fake clock

	a := operatorAdmin(t, f)
	d := a.mustJSON(t, "GET", "/api/logs/"+id, "", 200)
	if d["latencyMs"] != float64(total) {
		t.Fatalf("latencyMs %v, want %d (receipt to answer)", d["latencyMs"], total)
	}
	attempts := jsonObjects(t, d["attemptLog"])
	waits := jsonObjects(t, d["waits"])
	if len(attempts) != 2 || len(waits) != 1 {
		t.Fatalf("attemptLog %v waits %v", d["attemptLog"], d["waits"])
	}
	w := waits[0]
	if w["kind"] != "single" || w["reason"] != "rate_limit" || w["target"] != "fake/m1" || w["waitedMs"] != 33050.0 {
		t.Errorf("wait %v, want a single 33 050 ms wait after a rate limit", w)
	}
	first, last := attempts[0], attempts[1]
	if first["status"] != 429.0 || first["reason"] != "rate_limit" || first["startOffsetMs"] != 0.0 || first["hintMs"] != 33000.0 {
		t.Errorf("first attempt %v", first)
	}
	effects := jsonObjects(t, first["effects"])
	if len(effects) == 0 || effects[0]["kind"] != "connection_cooldown" || effects[0]["until"] == nil {
		t.Errorf("first attempt's effects %v, want the connection cooldown with its end", first["effects"])
	}
	// The wait starts where the first attempt ended; the second attempt where it ended.
	if end := first["startOffsetMs"].(float64) + first["durationMs"].(float64); w["startOffsetMs"].(float64) < end {
		t.Errorf("wait starts at %v, before the first attempt ended (%v)", w["startOffsetMs"], end)
	}
	if last["status"] != 200.0 || last["startOffsetMs"].(float64) < w["startOffsetMs"].(float64)+w["waitedMs"].(float64) {
		t.Errorf("last attempt %v starts before the wait ended", last)
	}
	tl := d["timeline"].(map[string]any)
	sum := 0.0
	for _, at := range attempts {
		sum += at["durationMs"].(float64)
	}
	sum += w["waitedMs"].(float64)
	if tl["recorded"] != true || tl["totalMs"] != float64(total) || tl["attemptsMs"].(float64)+tl["waitsMs"].(float64) != sum ||
		sum+tl["gapsMs"].(float64) != float64(total) {
		t.Errorf("timeline %v: attempts + waits = %v ms, total %d ms", tl, sum, total)
	}

	rec := a.admin("GET", "/logs/"+id, "", "HX-Request", "true")
	if rec.Code != 200 {
		t.Fatalf("drawer: %d", rec.Code)
	}
	doc := dashParse(t, rec)
	drawer := dashFind(t, doc, dashTID(views.LogDetailID))
	rows := drawer.Find(dashTID(views.LogTimelineID) + " > li")
	if rows.Length() != 3 {
		t.Fatalf("%d timeline rows, want attempt, wait, attempt", rows.Length())
	}
	wait := rows.Eq(1)
	if wait.AttrOr("data-testid", "") != views.RowID(views.RowWait, "1") || !strings.Contains(wait.Text(), "Cooldown wait") ||
		!strings.Contains(wait.Text(), "33.0 s") || !strings.Contains(wait.Text(), "rate limit") {
		t.Errorf("wait row %q", wait.Text())
	}
	if eff := rows.Eq(0).Find(dashTID(views.LogAttemptEffectsID)).Text(); !strings.Contains(eff, "connection cooled down until") {
		t.Errorf("first attempt's effect %q", eff)
	}
	if got := strings.Join(strings.Fields(drawer.Find(dashTID(views.LogTimelineSumID)).Text()), " "); got !=
		"Total 33,050 ms = 0 ms in 2 attempts + 33,050 ms in 1 wait + 0 ms in the gateway" {
		t.Errorf("timeline sum %q", got)
	}
	_ = time.Second
}

// A target the walk passes over is part of the story (40-admin-api §8,
// 50-dashboard §6.7): with fake/model-x locked on both connections after
// their 404s, a combo of model-x and model-y (pinned to the first
// connection) orders the locked entry last; model-y is not found either,
// and the walk reaches model-x only to skip it without a dispatch.
// GET /api/logs/{id} lists the skip in attemptLog after the attempt, with
// its cause and the lockout's remaining time; the drawer shows it as a
// timeline row after the attempt.
func TestSkippedTargetInTheTimeline(t *testing.T) {
	f := newGW(t, "fk-a", "fk-b")
	patchResilience(t, f.app, `{"modelLockout":{"enabled":true}}`)
	notFound := fakeupstream.Step{Status: 404, ErrorCode: "model_not_found", ErrorMessage: "The model does not exist"}
	for _, k := range []string{"fk-a", "fk-b"} {
		f.fu.ScriptModel(k, "model-x", notFound)
		f.fu.ScriptModel(k, "model-y", notFound)
	}
	a := operatorAdmin(t, f)
	a.mustJSON(t, "POST", "/api/combos", `{"name":"duo","targets":[{"provider":"fake","model":"model-x"},`+
		`{"provider":"fake","model":"model-y","connectionId":"`+f.conns["fk-a"].ID+`"}]}`, 201)
	if resp := chatModel(t, f, "fake/model-x"); resp.StatusCode != 404 {
		t.Fatalf("model-x: %d", resp.StatusCode)
	}
	if resp := chatModel(t, f, "fake/model-x"); resp.StatusCode != 429 {
		t.Fatalf("model-x again: %d, want 429 while it is locked", resp.StatusCode)
	}
	f.fu.Reset()
	resp := f.post(t, `{"model":"duo","messages":[{"role":"user","content":"hi"}]}`)
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode < 400 || len(f.fu.Hits()) != 1 || !strings.Contains(string(body), `"fake/model-x"`) {
		t.Fatalf("duo: %d %s, %d upstream hits; want model-y's failure with model-x excluded", resp.StatusCode, body, len(f.fu.Hits()))
	}
	id := resp.Header.Get("X-Switchyard-Request-Id")
	waitLogs(t, f, 3)

	d := a.mustJSON(t, "GET", "/api/logs/"+id, "", 200)
	log := jsonObjects(t, d["attemptLog"])
	if d["attempts"] != 1.0 || len(log) != 2 {
		t.Fatalf("attempts %v, attemptLog %v: want one dispatch, then one skip", d["attempts"], d["attemptLog"])
	}
	tried, skip := log[0], log[1]
	if tried["index"] != 0.0 || tried["target"] != "fake/model-y" || tried["status"] != 404.0 {
		t.Errorf("first entry %v, want the attempt on fake/model-y", tried)
	}
	if skip["index"] != 1.0 || skip["target"] != "fake/model-x" || skip["skipped"] != "model_lockout" ||
		skip["connectionId"] == nil {
		t.Errorf("second entry %v, want fake/model-x skipped for its model lockout on a connection", skip)
	}
	if ra, _ := skip["retryAfterMs"].(float64); ra <= 0 {
		t.Errorf("skip retryAfterMs %v, want the lockout's remaining time", skip["retryAfterMs"])
	}
	if _, dispatched := skip["status"]; dispatched {
		t.Errorf("skip carries attempt fields: %v", skip)
	}
	if at, end := skip["startOffsetMs"].(float64), tried["startOffsetMs"].(float64)+tried["durationMs"].(float64); at < end {
		t.Errorf("skip at %v ms, before the attempt ended (%v ms)", at, end)
	}

	rec := a.admin("GET", "/logs/"+id, "", "HX-Request", "true")
	if rec.Code != 200 {
		t.Fatalf("drawer: %d", rec.Code)
	}
	rows := dashFind(t, dashParse(t, rec), dashTID(views.LogDetailID)).Find(dashTID(views.LogTimelineID) + " > li")
	if rows.Length() != 2 {
		t.Fatalf("%d timeline rows, want attempt, skip", rows.Length())
	}
	if rows.Eq(0).AttrOr("data-testid", "") != views.RowID(views.RowAttempt, "1") {
		t.Errorf("first row %q, want the attempt", rows.Eq(0).Text())
	}
	text := strings.Join(strings.Fields(rows.Eq(1).Text()), " ")
	if rows.Eq(1).AttrOr("data-testid", "") != views.RowID(views.RowSkip, "1") || !strings.Contains(text, "Skipped fake/model-x") ||
		!strings.Contains(text, "model locked") || !strings.Contains(text, "free again in") {
		t.Errorf("skip row %q", text)
	}
}
