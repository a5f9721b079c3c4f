package app_test

import (
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"switchyard/internal/fakeupstream"
	"switchyard/internal/testkit"
	"switchyard/views"
)

// One slow request in a real Chromium (issue 21 items 2 and 3): the
// upstream rate-limits it with Retry-After 5 (room for a loaded machine to
// render the Overview inside the wait), the gateway waits the
// cooldown out and serves it on the second attempt. While it waits, the
// Overview's "Waiting now" tile reads 1 and the Runtime page's Waiting
// requests panel lists it; afterwards its log drawer's
// attempt timeline shows both attempts and the wait, and the line that adds
// them up matches the total, to the millisecond. Screenshots
// slow-01-overview-waiting.png, slow-01b-runtime-waiting.png and
// slow-02-timeline.png land in
// SWITCHYARD_ARTIFACTS when it is set.
func TestDashboardBrowserSlowRequest(t *testing.T) {
	exe := brBrowserPath(t)
	fu := fakeupstream.Start(t)
	fu.SetScript("fk-slow", "*", fakeupstream.Script{Steps: []fakeupstream.Step{{Status: http.StatusTooManyRequests, RetryAfter: "5"}},
		Then: fakeupstream.ThenDefault})
	env := map[string]string{"SWITCHYARD_DATA_DIR": t.TempDir(), "SWITCHYARD_ADMIN_PASSWORD": brAdminPassword}
	gw := testkit.StartApp(t, []string{"--allow-private-upstreams", fu.Addr()}, env)
	base := gw.BaseURL
	b := brOpen(t, exe, brArtifacts(t, "switchyard-slow-*"))
	api := &brAPI{t: t, b: b, base: base, client: &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}}

	b.step("sign in and seed", brStepTimeout)
	secret := brSignInWithConnection(b, api, base, fu.URL(), "fake-slow", "fk-slow", "slow")
	slowPatch(api, "/api/resilience", `{"waitForCooldown":{"enabled":true}}`)

	b.step("the Overview while the request waits", brStepTimeout)
	type answer struct {
		status int
		rid    string
		err    error
	}
	done := make(chan answer, 1)
	go func() {
		// The test's context: each step's ends with the step.
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, base+"/v1/chat/completions",
			strings.NewReader(`{"model":"fake/m1","messages":[{"role":"user","content":"slow"}]}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+secret)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			done <- answer{err: err}
			return
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		done <- answer{status: resp.StatusCode, rid: resp.Header.Get("X-Switchyard-Request-Id")}
	}()
	// The pages below render while the request is in its wait: first the
	// gateway must have it waiting (GET /api/concurrency lists it), or a
	// page rendered before the first attempt was answered shows nobody.
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		var conc struct {
			Waiting []json.RawMessage `json:"waiting"`
		}
		api.json("/api/concurrency", &conc)
		if len(conc.Waiting) > 0 {
			break
		}
		select {
		case <-b.sctx.Done():
			t.Fatal("the request never waited")
		case <-tick.C:
		}
	}
	b.do(chromedp.Navigate(base+"/"), chromedp.WaitVisible(brText(views.OverviewWaitingID, "1")))
	b.shot("slow-01-overview-waiting.png")
	// The Runtime page's Waiting requests panel lists it: what it waits
	// for, on which target, and when it resumes at the latest.
	b.do(chromedp.Navigate(base+"/runtime"), chromedp.WaitVisible(brTID(views.WaitingTableID)))
	waiting := strings.Join(strings.Fields(brRun(b, chromedp.Text(chromedp.CSS(`[data-testid="`+views.WaitingTableID+`"] tbody tr`)))), " ")
	b.shot("slow-01b-runtime-waiting.png")

	b.step("the timeline of the slow request", brStepTimeout)
	var got answer
	select {
	case got = <-done:
	case <-b.sctx.Done():
		t.Fatal("the slow request never answered")
	}
	if got.err != nil || got.status != http.StatusOK || got.rid == "" {
		t.Fatalf("slow request: %d %q %v", got.status, got.rid, got.err)
	}
	if !strings.Contains(waiting, got.rid) || !strings.Contains(waiting, "fake/m1") {
		t.Errorf("the Waiting requests row %q does not name request %s and its target fake/m1", waiting, got.rid)
	}
	api.waitOK("/logs/" + got.rid)
	b.do(chromedp.Navigate(base+"/logs"), chromedp.WaitVisible(brTID(views.RowID(views.RowLog, got.rid))), brSettled,
		chromedp.Click(brTID(views.RowID(views.RowLogLink, got.rid))), chromedp.WaitVisible(brTID(views.LogDetailID)),
		chromedp.WaitVisible(brTID(views.LogTimelineSumID)))
	timeline := strings.Join(strings.Fields(brRun(b, chromedp.Text(brTID(views.LogTimelineID)))), " ")
	for _, want := range []string{"429", "200", "fake-slow"} {
		if !strings.Contains(timeline, want) {
			t.Errorf("the timeline lacks %q: %s", want, timeline)
		}
	}
	sum := strings.Join(strings.Fields(brRun(b, chromedp.Text(brTID(views.LogTimelineSumID)))), " ")
	total, attempts, waits, gaps := slowSumParts(t, sum)
	if attempts+waits+gaps != total {
		t.Errorf("%q: %d + %d + %d ≠ %d", sum, attempts, waits, gaps, total)
	}
	// Most of the request was its wait: the 5 s cooldown plus the 50 ms margin.
	if waits < 5000 || waits > total || !strings.Contains(sum, "in 2 attempts") || !strings.Contains(sum, "in 1 wait") {
		t.Errorf("the sum line %q: want 2 attempts and one wait of at least 5,000 ms", sum)
	}
	b.shot("slow-02-timeline.png")
}

var slowSumRE = regexp.MustCompile(`Total ([\d,]+) ms = ([\d,]+) ms in .* \+ ([\d,]+) ms in .* \+ ([\d,]+) ms in the gateway`)

// slowSumParts reads "Total T ms = A ms in … + W ms in … + G ms in the gateway".
func slowSumParts(t *testing.T, line string) (total, attempts, waits, gaps int64) {
	t.Helper()
	m := slowSumRE.FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("the timeline's sum line %q does not add up its parts", line)
	}
	n := func(s string) int64 {
		v, err := strconv.ParseInt(strings.ReplaceAll(s, ",", ""), 10, 64)
		if err != nil {
			t.Fatalf("%q in %q: %v", s, line, err)
		}
		return v
	}
	return n(m[1]), n(m[2]), n(m[3]), n(m[4])
}

// slowPatch sends PATCH path as the signed-in admin and wants 200.
func slowPatch(a *brAPI, path, body string) {
	a.t.Helper()
	req, err := http.NewRequestWithContext(a.b.sctx, http.MethodPatch, a.base+path, strings.NewReader(body))
	if err != nil {
		a.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	req.AddCookie(a.cookie())
	resp, err := a.client.Do(req)
	if err != nil {
		a.t.Fatalf("PATCH %s: %v", path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		a.t.Fatalf("PATCH %s: %d %s", path, resp.StatusCode, raw)
	}
}
