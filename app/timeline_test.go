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
