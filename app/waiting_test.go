package app_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"switchyard/internal/fakeupstream"
	"switchyard/internal/testkit"
)

// A request held in a cooldown-aware wait is visible while it waits, and
// gone once served: GET /api/concurrency lists it (reason, target,
// expected resume), the health report and /metrics count it, the Overview's
// "Waiting now" tile is not zero and the Runtime page's Waiting requests
// panel lists it. Before, every one of them read zero.
func TestWaitingRequestIsVisibleWhileItWaits(t *testing.T) {
	f := newGW(t, "fk-a")
	patchResilience(t, f.app, `{"waitForCooldown":{"enabled":true}}`)
	f.fu.SetScript("fk-a", "*", fakeupstream.Script{Steps: []fakeupstream.Step{{Status: 429, RetryAfter: "6"}}, Then: fakeupstream.ThenDefault})
	entered, release := make(chan time.Duration, 1), make(chan struct{})
	f.app.Clock.OnWait(func(d time.Duration) {
		select {
		case entered <- d:
		default:
		}
		<-release
	})
	done := make(chan int, 1)
	go func() {
		req, _ := http.NewRequest("POST", f.url+"/v1/chat/completions", strings.NewReader(chatBody))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+f.key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			done <- 0
			return
		}
		io.ReadAll(resp.Body)
		resp.Body.Close()
		done <- resp.StatusCode
	}()
	var d time.Duration
	select {
	case d = <-entered:
	case code := <-done:
		close(release)
		t.Fatalf("answered %d without waiting", code)
	}
	if d != 6050*time.Millisecond {
		close(release)
		t.Fatalf("wait %v, want 6.05s", d)
	}
	released := false
	defer func() {
		if !released {
			close(release)
		}
	}()
	f.app.Clock.Advance(2 * time.Second) // past the health report's 1 s cache; the request has waited 2 s

	con := adminGet(t, f.app, "/api/concurrency")
	waiting := jsonObjects(t, con["waiting"])
	if len(waiting) != 1 || waiting[0]["reason"] != "cooldown" || waiting[0]["target"] != "fake/m1" || waiting[0]["requestId"] == "" {
		t.Fatalf("/api/concurrency waiting %v", con["waiting"])
	}
	since, _ := time.Parse(time.RFC3339Nano, waiting[0]["since"].(string))
	resume, _ := time.Parse(time.RFC3339Nano, waiting[0]["resumeAt"].(string))
	if resume.Sub(since) != 6050*time.Millisecond {
		t.Errorf("since %v resume %v", since, resume)
	}

	h := adminGet(t, f.app, "/api/monitoring/health")
	hw, _ := h["waiting"].(map[string]any)
	br, _ := hw["byReason"].(map[string]any)
	if hw["total"] != 1.0 || br["cooldown"] != 1.0 || br["slot"] != 0.0 || br["queue"] != 0.0 {
		t.Errorf("health waiting %v", h["waiting"])
	}

	_, scraper := f.app.NewKey("scraper", "metrics")
	rec := f.app.Do(testkit.Request("GET", "/metrics", "", "Authorization", "Bearer "+scraper))
	if !strings.Contains(rec.Body.String(), `switchyard_waiting_requests{reason="cooldown"} 1`) {
		t.Errorf("metrics: no waiting gauge of 1 in\n%s", grepLines(rec.Body.String(), "switchyard_waiting"))
	}

	page := dashboardFragment(t, f, "/overview/stats")
	if !strings.Contains(page, `data-testid="overview-waiting"`) || !strings.Contains(squashHTML(between(page, `data-testid="overview-waiting"`, "</a>")), "Waiting now 1") {
		t.Errorf("Overview tile: %q", squashHTML(between(page, `data-testid="overview-waiting"`, "</a>")))
	}
	panel := squashHTML(dashboardFragment(t, f, "/runtime/waiting"))
	if !strings.Contains(panel, "Cooldown wait: 1") || !strings.Contains(panel, "fake/m1") || !strings.Contains(panel, "2 s") {
		t.Errorf("Runtime panel: %q", panel)
	}

	close(release)
	released = true
	if code := <-done; code != 200 {
		t.Fatalf("after the wait: %d", code)
	}
	con = adminGet(t, f.app, "/api/concurrency")
	if w := jsonObjects(t, con["waiting"]); len(w) != 0 {
		t.Fatalf("still waiting after the answer: %v", w)
	}
	if panel := squashHTML(dashboardFragment(t, f, "/runtime/waiting")); !strings.Contains(panel, "No request is waiting.") {
		t.Errorf("Runtime panel after: %q", panel)
	}
}

// dashboardFragment GETs an htmx fragment of the dashboard as the admin.
func dashboardFragment(t *testing.T, f *gwFixture, path string) string {
	t.Helper()
	req := testkit.Request("GET", path, "", "HX-Request", "true")
	req.AddCookie(f.app.Login())
	rec := f.app.Do(req)
	if rec.Code != http.StatusOK {
		t.Fatalf("GET %s: %d", path, rec.Code)
	}
	b, _ := io.ReadAll(rec.Body)
	return string(b)
}

func between(s, from, to string) string {
	i := strings.Index(s, from)
	if i < 0 {
		return ""
	}
	s = s[i:]
	if j := strings.Index(s, to); j >= 0 {
		return s[:j]
	}
	return s
}

// squashHTML drops tags and folds whitespace.
func squashHTML(s string) string {
	var b strings.Builder
	in := false
	for _, r := range s {
		switch {
		case r == '<':
			in = true
			b.WriteRune(' ')
		case r == '>':
			in = false
		case !in:
			b.WriteRune(r)
		}
	}
	return strings.Join(strings.Fields(b.String()), " ")
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
