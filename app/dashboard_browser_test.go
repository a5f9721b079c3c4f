package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"switchyard/internal/fakeupstream"
	"switchyard/internal/testkit"
	"switchyard/services"
	"switchyard/services/resilience"
	"switchyard/views"
)

// The browser test of 50-dashboard §10.2: a real Chromium drives the
// dashboard of a gateway started through app.Run, from first-run setup to a
// model lockout re-enabled by keyboard and settings that survive a restart.
// Every wait is a WaitVisible or WaitNotPresent under the step's timeout.

const (
	brAdminPassword = "browser-admin-password-42"
	brStepTimeout   = 25 * time.Second
	brTestBudget    = 2 * time.Minute
	brAuditBudget   = 2 * time.Minute // every page at two widths with axe-core
)

// brBrowserPath finds Chromium: $SWITCHYARD_CHROMIUM, else chromium, then
// chromium-browser on PATH. Without one the test skips, unless
// SWITCHYARD_BROWSER_TESTS=1 asks for it (CI installs the browser).
func brBrowserPath(t *testing.T) string {
	t.Helper()
	candidates := []string{"chromium", "chromium-browser"}
	if p := os.Getenv("SWITCHYARD_CHROMIUM"); p != "" {
		candidates = append([]string{p}, candidates...)
	}
	for _, c := range candidates {
		if p, err := exec.LookPath(c); err == nil {
			return p
		}
	}
	if os.Getenv("SWITCHYARD_BROWSER_TESTS") == "1" {
		t.Fatal("chromium not found (SWITCHYARD_BROWSER_TESTS=1); install Debian's chromium package or set SWITCHYARD_CHROMIUM")
	}
	t.Skip("chromium not found; install Debian's chromium package")
	return ""
}

// brInitScript runs in every new document before the page's own scripts. It
// reports htmx response errors and CSP violations through console.error, so
// they reach the recorder however often the page navigates.
const brInitScript = `(function () {
  window.__switchyardRecorder = true;
  document.addEventListener("htmx:responseError", function (e) {
    var d = e.detail || {}, x = d.xhr || {}, p = (d.pathInfo && d.pathInfo.requestPath) || "";
    console.error("htmx:responseError " + x.status + " " + p);
  });
  document.addEventListener("securitypolicyviolation", function (e) {
    console.error("CSP violation: " + e.violatedDirective + " blocked " + e.blockedURI);
  });
})();`

// brResponse is what the recorder keeps of a network response.
type brResponse struct {
	url    string
	status int64
}

// brBrowser is one Chromium tab and what it saw: console errors, uncaught
// exceptions, CSP violations, htmx response errors and every request.
type brBrowser struct {
	t    *testing.T
	ctx  context.Context // the tab; no timeout
	sctx context.Context // the current step, with its timeout
	stop context.CancelFunc
	dir  string // screenshots
	name string // current step

	mu         sync.Mutex
	console    []string
	exceptions []string
	csp        []string
	htmx       []string
	requests   []string
	responses  map[network.RequestID]brResponse
	expected   map[string]int64 // path → a failure status the scenario provokes on purpose
	expectSeen int
}

func (b *brBrowser) listen(ev any) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch ev := ev.(type) {
	case *runtime.EventConsoleAPICalled:
		if ev.Type != runtime.ConsoleAPICalledTypeError && ev.Type != "assert" {
			return
		}
		var parts []string
		for _, a := range ev.Args {
			if a.Description != "" {
				parts = append(parts, a.Description)
			} else {
				var s string
				if json.Unmarshal(a.Value, &s) == nil {
					parts = append(parts, s)
				} else {
					parts = append(parts, string(a.Value))
				}
			}
		}
		text := strings.Join(parts, " ")
		switch {
		case strings.HasPrefix(text, "htmx:responseError"):
			b.htmx = append(b.htmx, b.name+": "+text)
		case strings.HasPrefix(text, "CSP violation"):
			b.csp = append(b.csp, b.name+": "+text)
		default:
			b.console = append(b.console, b.name+": console."+string(ev.Type)+": "+text)
		}
	case *runtime.EventExceptionThrown:
		d := ev.ExceptionDetails
		text := d.Text
		if d.Exception != nil && d.Exception.Description != "" {
			text += " " + d.Exception.Description
		}
		b.exceptions = append(b.exceptions, fmt.Sprintf("%s: %s (%s:%d)", b.name, text, d.URL, d.LineNumber+1))
	case *log.EventEntryAdded:
		e := ev.Entry
		if e == nil || e.Level != log.EntryLevelError {
			return
		}
		if e.Source == log.EntrySourceNetwork {
			if r, ok := b.responses[e.NetworkRequestID]; ok {
				if u, err := url.Parse(r.url); err == nil && b.expected[u.Path] == r.status {
					b.expectSeen++
					return
				}
			}
		}
		line := fmt.Sprintf("%s: log %s/%s: %s %s", b.name, e.Source, e.Level, e.Text, e.URL)
		if e.Source == log.EntrySourceSecurity || strings.Contains(e.Text, "Content Security Policy") {
			b.csp = append(b.csp, line)
		} else {
			b.console = append(b.console, line)
		}
	case *network.EventRequestWillBeSent:
		if ev.Request != nil {
			b.requests = append(b.requests, ev.Request.URL)
		}
	case *network.EventResponseReceived:
		if ev.Response != nil {
			b.responses[ev.RequestID] = brResponse{url: ev.Response.URL, status: ev.Response.Status}
		}
	}
}

// expectFailure declares a failure status the scenario provokes on path (a
// validation answer): the browser's "Failed to load resource" line for it is
// not an error of the page.
func (b *brBrowser) expectFailure(path string, status int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.expected[path] = status
}

// step starts a scenario step with its own timeout.
func (b *brBrowser) step(name string, timeout time.Duration) {
	b.t.Helper()
	if b.stop != nil {
		b.stop()
	}
	b.mu.Lock()
	b.name = name
	b.mu.Unlock()
	b.sctx, b.stop = context.WithTimeout(b.ctx, timeout)
	b.t.Logf("step %s", name)
}

// do runs actions within the current step.
func (b *brBrowser) do(actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	if err := chromedp.Do(b.sctx, actions...); err != nil {
		b.t.Fatalf("step %s: %v", b.name, err)
	}
}

// brRun runs one action that returns a value within the current step.
func brRun[T any](b *brBrowser, a chromedp.Action[T]) T {
	b.t.Helper()
	v, err := chromedp.Run(b.sctx, a)
	if err != nil {
		b.t.Fatalf("step %s: %v", b.name, err)
	}
	return v
}

// shot saves a full-page PNG.
func (b *brBrowser) shot(name string) {
	b.t.Helper()
	buf := brRun(b, chromedp.FullScreenshot(100))
	if err := os.WriteFile(filepath.Join(b.dir, name), buf, 0o644); err != nil {
		b.t.Fatal(err)
	}
}

// html is the current document.
func (b *brBrowser) html() string {
	b.t.Helper()
	return brRun(b, chromedp.OuterHTML(chromedp.CSS("html")))
}

// brSettled waits until htmx has no request in flight and no swap settling,
// so the content it swapped in has its hx- attributes wired up.
var brSettled = chromedp.WaitNotPresent(chromedp.CSS(".htmx-request, .htmx-swapping, .htmx-settling, .htmx-added"))

// swap runs trigger and waits until htmx replaced the element sel: the
// element is marked first, and the wait is for the mark to be gone.
func (b *brBrowser) swap(sel string, trigger chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	mark := fmt.Sprintf(`document.querySelector(%s).setAttribute("data-test-stale", "")`, brJS(sel))
	b.do(chromedp.WaitVisible(chromedp.CSS(sel)), brSettled, chromedp.Evaluate[chromedp.Void](mark), trigger,
		chromedp.WaitNotPresent(chromedp.CSS("[data-test-stale]")), brSettled)
}

// brChoose selects value in the <select> sel: the value changes and the
// change event fires, which is what htmx listens to. (No input event: the
// logs filter also listens to "input delay:300ms", and a second, delayed
// swap would race the next step.)
func brChoose(sel, value string) chromedp.Action[chromedp.Void] {
	js := fmt.Sprintf(`(function () {
  var el = document.querySelector(%s);
  el.focus();
  el.value = %s;
  if (el.value !== %s) { throw new Error("no option " + %s + " in " + %s); }
  el.dispatchEvent(new Event("change", {bubbles: true}));
})()`, brJS(sel), brJS(value), brJS(value), brJS(value), brJS(sel))
	return chromedp.Steps(chromedp.WaitVisible(chromedp.CSS(sel)), chromedp.Evaluate[chromedp.Void](js))
}

// brFill replaces the text of an input by typing.
func brFill(sel, text string) chromedp.Action[chromedp.Void] {
	clear := fmt.Sprintf(`document.querySelector(%s).value = ""`, brJS(sel))
	return chromedp.Steps(chromedp.WaitVisible(chromedp.CSS(sel)), chromedp.Evaluate[chromedp.Void](clear),
		chromedp.SendKeys(chromedp.CSS(sel), text))
}

func brJS(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// brTID selects by data-testid.
func brTID(id string) chromedp.CSS { return chromedp.CSS(`[data-testid="` + id + `"]`) }

// brText selects the test id scope, or an element in it, whose own text contains text.
func brText(scope, text string) chromedp.Search {
	return chromedp.Search(fmt.Sprintf(`//*[@data-testid="%s"]/descendant-or-self::*[text()[contains(normalize-space(.), "%s")]]`, scope, text))
}

// brBadge selects a status badge inside scope that reads text.
func brBadge(scope, text string) chromedp.Search {
	return chromedp.Search(fmt.Sprintf(`//*[@data-testid="%s"]/descendant-or-self::*[contains(concat(" ", @class, " "), " badge ")][normalize-space(.)="%s"]`, scope, text))
}

// brToast selects a toast that contains text.
func brToast(text string) chromedp.Search {
	return chromedp.Search(fmt.Sprintf(`//*[@id="%s"]//*[text()[contains(normalize-space(.), "%s")]]`, views.ToastsID, text))
}

// brAPI reads the gateway with the browser's session cookie.
type brAPI struct {
	t      *testing.T
	b      *brBrowser
	base   string
	client *http.Client
}

// cookie is the browser's session cookie for the gateway (read through
// the DevTools protocol; it is HttpOnly).
func (a *brAPI) cookie() *http.Cookie {
	a.t.Helper()
	res, err := chromedp.Call(a.b.sctx, network.GetCookies, network.GetCookiesParams{URLs: []string{a.base + "/"}})
	if err != nil {
		a.t.Fatalf("step %s: cookies: %v", a.b.name, err)
	}
	for _, c := range res.Cookies {
		if strings.HasSuffix(c.Name, "switchyard_session") {
			return &http.Cookie{Name: c.Name, Value: c.Value}
		}
	}
	a.t.Fatalf("step %s: the browser holds no session cookie", a.b.name)
	return nil
}

// get sends GET path with the browser's cookie and returns status and body.
func (a *brAPI) get(path string) (int, []byte) {
	a.t.Helper()
	req, err := http.NewRequestWithContext(a.b.sctx, http.MethodGet, a.base+path, nil)
	if err != nil {
		a.t.Fatal(err)
	}
	req.AddCookie(a.cookie())
	resp, err := a.client.Do(req)
	if err != nil {
		a.t.Fatalf("step %s: GET %s: %v", a.b.name, path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		a.t.Fatal(err)
	}
	return resp.StatusCode, body
}

// json sends GET path and decodes a 200 answer into out.
func (a *brAPI) json(path string, out any) {
	a.t.Helper()
	code, body := a.get(path)
	if code != http.StatusOK {
		a.t.Fatalf("step %s: GET %s: %d %s", a.b.name, path, code, body)
	}
	if err := json.Unmarshal(body, out); err != nil {
		a.t.Fatalf("step %s: GET %s: %v", a.b.name, path, err)
	}
}

// waitOK waits, within the step, until GET path answers 200 (the request
// log is written in batches, at most a second after the request).
func (a *brAPI) waitOK(path string) {
	a.t.Helper()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		if code, _ := a.get(path); code == http.StatusOK {
			return
		}
		select {
		case <-a.b.sctx.Done():
			a.t.Fatalf("step %s: GET %s never answered 200", a.b.name, path)
		case <-tick.C:
		}
	}
}

// brChat sends one chat request to the gateway as a client would.
func brChat(t *testing.T, ctx context.Context, base, key, model, text string) (int, string) {
	t.Helper()
	body := `{"model":"` + model + `","messages":[{"role":"user","content":"` + text + `"}]}`
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/chat/completions", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST /v1/chat/completions: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST /v1/chat/completions model %s: %d %s", model, resp.StatusCode, b)
	}
	return resp.StatusCode, resp.Header.Get("X-Switchyard-Request-Id")
}

// brArtifacts is where a browser test writes its screenshots:
// SWITCHYARD_ARTIFACTS when set, else a new temporary folder named by pattern
// (kept after the test, so a failure's screenshot can be looked at).
func brArtifacts(t *testing.T, pattern string) string {
	t.Helper()
	dir := os.Getenv("SWITCHYARD_ARTIFACTS")
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("", pattern); err != nil {
			t.Fatal(err)
		}
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshots in %s", dir)
	return dir
}

// brOpen starts the headless Chromium tab every browser test uses: a fresh
// profile, the error recorder in every document, no transitions, 1280 × 800;
// screenshots, and the screen and HTML of a failed step, go to dir.
func brOpen(t *testing.T, exe, dir string) *brBrowser {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1280, 800))
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	b := &brBrowser{t: t, dir: dir, name: "start", responses: map[network.RequestID]brResponse{}, expected: map[string]int64{}}
	tabCtx, cancelTab := chromedp.NewContext(allocCtx, chromedp.WithListener(b.listen))
	b.ctx = tabCtx
	t.Cleanup(func() {
		if b.stop != nil {
			b.stop()
		}
		cancelTab()
		cancelAlloc()
	})
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		ctx, cancel := context.WithTimeout(tabCtx, 10*time.Second)
		defer cancel()
		if buf, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)); err == nil {
			_ = os.WriteFile(filepath.Join(dir, t.Name()+"-failure.png"), buf, 0o644)
		}
		if html, err := chromedp.Run(ctx, chromedp.OuterHTML(chromedp.CSS("html"))); err == nil {
			_ = os.WriteFile(filepath.Join(dir, t.Name()+"-failure.html"), []byte(html), 0o644)
		}
		t.Logf("%s-failure.png and .html (step %s) in %s", t.Name(), b.name, dir)
	})
	if err := chromedp.Do(tabCtx); err != nil {
		t.Fatalf("starting %s: %v", exe, err)
	}
	b.step("start browser", 30*time.Second)
	b.do(chromedp.EmulateViewport(1280, 800))
	if _, err := chromedp.Call(b.sctx, page.AddScriptToEvaluateOnNewDocument,
		page.AddScriptToEvaluateOnNewDocumentParams{Source: brInitScript}); err != nil {
		t.Fatalf("init script: %v", err)
	}
	if _, err := chromedp.Call(b.sctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
		Features: []*emulation.MediaFeature{{Name: "prefers-reduced-motion", Value: "reduce"}}}); err != nil {
		t.Fatalf("reduced motion: %v", err)
	}
	return b
}

func TestDashboardBrowser(t *testing.T) {
	exe := brBrowserPath(t)
	began := time.Now()

	// The fake upstream: fk-good answers every chat; fk-missing answers 404
	// model_not_found for model-x and 200 otherwise.
	fu := fakeupstream.Start(t, fakeupstream.WithEvents(3))
	fu.ScriptModel("fk-missing", "model-x", fakeupstream.Step{Status: http.StatusNotFound, ErrorCode: "model_not_found"})

	// The gateway, as a user starts it: no admin password, so setup appears.
	env := map[string]string{"SWITCHYARD_DATA_DIR": t.TempDir()}
	args := []string{"--allow-private-upstreams", fu.Addr()}
	gw := testkit.StartApp(t, args, env)
	base := gw.BaseURL
	t.Logf("gateway at %s, fake upstream at %s", base, fu.URL())

	b := brOpen(t, exe, brArtifacts(t, "switchyard-dashboard-*"))
	api := &brAPI{t: t, b: b, base: base, client: &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}}
	allowedHosts := map[string]bool{brHost(t, base): true}

	// 1. Setup and sign-in.
	b.step("1 setup and sign-in", brStepTimeout)
	b.expectFailure("/setup", http.StatusUnprocessableEntity)
	b.expectFailure("/login", http.StatusUnauthorized)
	b.do(chromedp.Navigate(base+"/"), chromedp.WaitVisible(brTID(views.SetupFormID)))
	if loc := brRun(b, chromedp.Location()); !strings.HasSuffix(loc, "/setup") {
		t.Fatalf("/ led to %s, want /setup", loc)
	}
	if !brRun(b, chromedp.Evaluate[bool](`window.__switchyardRecorder === true`)) {
		t.Fatal("the error recorder did not run in the page")
	}
	b.do(brFill("#password", brAdminPassword), brFill("#confirm", brAdminPassword+"-typo"),
		chromedp.Click(brTID("setup-submit")),
		chromedp.WaitVisible(brText(views.SetupFormID, "The two passwords do not match.")))
	b.shot("01-setup.png")
	audits := b.auditBare("/setup")
	b.do(brFill("#password", brAdminPassword), brFill("#confirm", brAdminPassword),
		chromedp.Click(brTID("setup-submit")),
		chromedp.WaitVisible(brTID(views.OverviewChecklistID)),
		chromedp.WaitVisible(brToast("Admin password set. Welcome to Switchyard.")))
	if loc := brRun(b, chromedp.Location()); strings.Contains(loc, "welcome") {
		t.Errorf("after setup the address still asks for the welcome toast: %s", loc)
	}
	b.shot("02-overview-empty.png")
	b.do(chromedp.Click(brTID(views.LogoutButtonID)), chromedp.WaitVisible(brTID(views.LoginFormID)),
		chromedp.WaitVisible(brText("login-notice", "Signed out.")))
	audits = append(audits, b.auditBare("/login")...)
	b.do(brFill("#password", "not the password"), chromedp.Click(brTID("login-submit")),
		chromedp.WaitVisible(brText(views.LoginFormID, "Wrong password.")))
	b.do(brFill("#password", brAdminPassword), chromedp.Click(brTID("login-submit")),
		chromedp.WaitVisible(brTID(views.OverviewCountsID)), chromedp.WaitVisible(brTID(views.OverviewChecklistID)))

	// 2. Add connections through the form.
	b.step("2 add connections", brStepTimeout)
	b.do(chromedp.Navigate(base+"/connections"), chromedp.WaitVisible(brTID(views.ConnectionsEmptyID)),
		chromedp.Click(brTID(views.ConnectionAddID)), chromedp.WaitVisible(brTID(views.ConnectionFormID)),
		// The panel that opened takes focus.
		chromedp.WaitVisible(chromedp.CSS("#"+views.ConnectionPanelID+" :focus")))
	b.swap("#"+views.ConnectionFieldsID, brChoose(`[data-testid="`+views.ConnectionProviderSelectID+`"]`, views.CustomOpenAI))
	b.do(brFill("#customId", "fake"), brFill("#name", "fake-b"), brFill("#apiKey", "fk-missing"),
		brFill("#baseUrl", fu.URL()+"/v1"), brFill("#priority", "0"),
		chromedp.Click(brTID(views.ConnectionSubmitID)),
		chromedp.WaitNotPresent(brTID(views.ConnectionFormID)),
		chromedp.WaitVisible(brText(views.ConnectionsListID, "fake-b")),
		chromedp.WaitVisible(brToast("Connection fake-b added.")))
	b.do(chromedp.Click(brTID(views.ConnectionAddID)), chromedp.WaitVisible(brTID(views.ConnectionFormID)))
	b.swap("#"+views.ConnectionFieldsID, brChoose(`[data-testid="`+views.ConnectionProviderSelectID+`"]`, "fake"))
	// The custom provider's catalogue entry carries no base URL, so the
	// second connection names it again.
	b.do(brFill("#name", "fake-a"), brFill("#apiKey", "fk-good"), brFill("#baseUrl", fu.URL()+"/v1"), brFill("#priority", "1"),
		chromedp.Click(brTID(views.ConnectionSubmitID)),
		chromedp.WaitNotPresent(brTID(views.ConnectionFormID)),
		chromedp.WaitVisible(brText(views.ConnectionsListID, "fake-a")))
	var conns struct {
		Items []struct {
			ID, Name, Provider string
			Priority           int
		}
	}
	api.json("/api/connections", &conns)
	connID := map[string]string{}
	for _, c := range conns.Items {
		connID[c.Name] = c.ID
		want := map[string]int{"fake-b": 0, "fake-a": 1}[c.Name]
		if c.Provider != "fake" || c.Priority != want {
			t.Errorf("stored connection %+v", c)
		}
	}
	bID, aID := connID["fake-b"], connID["fake-a"]
	if len(conns.Items) != 2 || bID == "" || aID == "" {
		t.Fatalf("connections %+v", conns.Items)
	}
	for _, id := range []string{bID, aID} {
		b.do(chromedp.WaitVisible(brBadge(views.RowID(views.RowConnStatus, id), "healthy")))
	}
	// Test on fake-a: the result line appears in its row.
	b.swap("#"+views.RowID(views.RowConnTest, aID), chromedp.Click(brTID(views.RowID(views.RowConnTestButton, aID))))
	b.do(chromedp.WaitVisible(brText(views.RowID(views.RowConnTestResult, aID), "OK")))
	b.shot("03-connections.png")
	if html := b.html(); strings.Contains(html, "fk-good") || strings.Contains(html, "fk-missing") {
		t.Error("the Connections page shows a provider key")
	}

	// 3. Create the combo demo in the builder.
	b.step("3 create combo", brStepTimeout)
	b.do(chromedp.Navigate(base+"/combos"), chromedp.WaitVisible(brTID(views.CombosEmptyID)),
		chromedp.Click(brTID(views.ComboNewID)), chromedp.WaitVisible(brTID(views.ComboFormID)))
	b.do(brFill("#name", "demo"))
	b.swap("#"+views.ComboFormID, brChoose("#targets-0-provider", "fake"))
	b.do(brFill("#targets-0-model", "model-x"))
	if got := brRun(b, chromedp.Value(chromedp.CSS("#targets-0-connectionId"))); got != "" {
		t.Errorf("target 1 connection %q, want Any", got)
	}
	b.swap("#"+views.ComboFormID, chromedp.Click(brTID(views.ComboAddTargetID)))
	b.swap("#"+views.ComboFormID, brChoose("#targets-1-provider", "fake"))
	b.do(brFill("#targets-1-model", "model-y"))
	b.swap("#"+views.ComboFormID, brChoose("#"+views.ComboStrategyID, "priority"))
	priority, _ := services.LookupStrategy("priority")
	b.do(chromedp.WaitVisible(brText(views.ComboStrategyHelpID, priority.Describe)))
	if got := brRun(b, chromedp.Value(chromedp.CSS("#targets-0-model"))); got != "model-x" {
		t.Errorf("target 1 model after the re-renders: %q", got)
	}
	b.shot("04-combo-builder.png")
	b.do(chromedp.Click(brTID(views.ComboSaveID)), chromedp.WaitVisible(brTID(views.ComboSavedID)),
		chromedp.WaitVisible(brText(views.CombosListID, "demo")))
	var combos struct {
		Items []struct {
			ID, Name, Strategy string
			Targets            []struct{ Provider, Model string }
		}
	}
	api.json("/api/combos", &combos)
	if len(combos.Items) != 1 || combos.Items[0].Name != "demo" || combos.Items[0].Strategy != "priority" ||
		len(combos.Items[0].Targets) != 2 || combos.Items[0].Targets[0].Model != "model-x" || combos.Items[0].Targets[1].Model != "model-y" {
		t.Fatalf("stored combos %+v", combos.Items)
	}
	// Both targets show a ready dot; Preview routing lists fake/model-x first.
	comboID := combos.Items[0].ID
	for i := range 2 {
		b.do(chromedp.WaitVisible(chromedp.CSS(`[data-testid="` + views.ComboDotID(comboID, i) + `"][data-readiness="ready"] .dot--ready`)))
	}
	b.do(chromedp.Click(brTID(views.RowID(views.RowComboPreview, comboID))),
		chromedp.WaitVisible(brText(views.RowID(views.RowComboRoute, comboID)+"-1", "fake/model-x")), brSettled)

	// 4. Create the key browser-test, allowed combo demo; the secret shows once.
	b.step("4 create key", brStepTimeout)
	b.do(chromedp.Navigate(base+"/keys"), chromedp.WaitVisible(brTID(views.KeysEmptyID)),
		chromedp.Click(brTID(views.KeyNewID)), chromedp.WaitVisible(brTID(views.KeyFormID)),
		brFill("#name", "browser-test"),
		chromedp.Click(brTID("allowedCombosAny")),
		chromedp.Click(chromedp.CSS(`input[name="allowedCombos"][value="demo"]`)),
		chromedp.Click(brTID(views.KeySubmitID)),
		chromedp.WaitVisible(brTID(views.KeySecretPanelID)),
		chromedp.WaitVisible(brTID(views.KeySecretCopyID)))
	secret := brRun(b, chromedp.Value(brTID(views.KeySecretValueID)))
	if !strings.HasPrefix(secret, services.KeyPrefix) || len(secret) < 20 {
		t.Fatalf("secret panel shows %q", secret)
	}
	b.shot("05-key-secret.png")
	b.do(chromedp.Click(brTID(views.KeySecretDismissID)), chromedp.WaitNotPresent(brTID(views.KeySecretPanelID)))
	b.do(chromedp.Navigate(base+"/keys"), chromedp.WaitVisible(brText(views.KeysListID, "browser-test")))
	if strings.Contains(b.html(), secret) {
		t.Error("the key secret is in /keys after a reload")
	}
	var keys struct {
		Items []struct {
			ID, Name      string
			AllowedCombos []string
		}
	}
	api.json("/api/keys", &keys)
	if len(keys.Items) != 1 || keys.Items[0].Name != "browser-test" || strings.Join(keys.Items[0].AllowedCombos, ",") != "demo" {
		t.Fatalf("stored keys %+v", keys.Items)
	}
	keyID := keys.Items[0].ID

	// 5. A client request through the combo: fake-b's 404 only moves it on.
	b.step("5 send a request", brStepTimeout)
	_, rid := brChat(t, b.sctx, base, secret, "demo", "Hello")
	if rid == "" {
		t.Fatal("no X-Switchyard-Request-Id")
	}
	b.do(chromedp.Navigate(base+"/runtime"), chromedp.WaitVisible(brTID(views.ModelCooldownsEmptyID)),
		chromedp.WaitVisible(brTID(views.ModelCooldownsOffID)), chromedp.WaitVisible(brTID(views.CooldownsEmptyID)))
	// The Overview charts the request and names fake-b's 404 on model-x as
	// the top failing target; the combo's first target shows its dispatch
	// metrics (one failure on fake-b, one success on fake-a).
	api.waitOK("/logs/" + rid)
	failing := views.RowID(views.RowFailing, "1")
	b.do(chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.CSS(`[data-testid="`+views.OverviewChartID+`"] svg`)),
		chromedp.WaitVisible(brText(failing, "fake/model-x")))
	if got := strings.Join(strings.Fields(brRun(b, chromedp.Text(brTID(failing)))), " "); !strings.Contains(got, "fake-b") || !strings.Contains(got, "404") {
		t.Errorf("top failing target %q", got)
	}
	b.do(chromedp.Navigate(base+"/combos"), chromedp.WaitVisible(brText(views.ComboMetricsID(comboID, 0), "50.0 %")))

	// 6. The request in the logs and its attempt timeline.
	b.step("6 request logs", brStepTimeout)
	api.waitOK("/logs/" + rid)
	b.do(chromedp.Navigate(base+"/logs"), chromedp.WaitVisible(brTID(views.LogsFiltersID)))
	b.swap("#"+views.LogsListID, brChoose("#keyId", keyID))
	row := views.RowID(views.RowLog, rid)
	b.do(chromedp.WaitVisible(brTID(row)))
	if n := brRun(b, chromedp.Evaluate[int](`document.querySelectorAll('[data-testid="`+views.LogsListID+`"] tbody > tr').length`)); n != 1 {
		t.Errorf("%d rows for key browser-test, want 1", n)
	}
	if loc := brRun(b, chromedp.Location()); !strings.Contains(loc, "keyId="+keyID) {
		t.Errorf("filtered address %s lacks the key", loc)
	}
	if got := brRun(b, chromedp.Text(chromedp.CSS(`[data-testid="`+row+`"] td[data-label="Status"] .badge`))); strings.TrimSpace(got) != "200" {
		t.Errorf("status cell %q", got)
	}
	if got := brRun(b, chromedp.Text(chromedp.CSS(`[data-testid="`+row+`"] td[data-label="Attempts"]`))); strings.TrimSpace(got) != "2" {
		t.Errorf("attempts cell %q", got)
	}
	link := views.RowID(views.RowLogLink, rid)
	b.do(chromedp.Click(brTID(link)), chromedp.WaitVisible(brTID(views.LogDetailID)),
		chromedp.WaitVisible(brTID(views.RowID(views.RowAttempt, "2"))))
	first := brRun(b, chromedp.Text(brTID(views.RowID(views.RowAttempt, "1"))))
	for _, want := range []string{"fake/model-x", "fake-b", "404", "model not found"} {
		if !strings.Contains(first, want) {
			t.Errorf("attempt 1 %q lacks %q", first, want)
		}
	}
	last := brRun(b, chromedp.Text(chromedp.CSS(`[data-testid="`+views.LogTimelineID+`"] > li:last-child`)))
	if !strings.Contains(last, "fake-a") || !strings.Contains(last, "200") {
		t.Errorf("last attempt %q", last)
	}
	b.shot("06-log-drawer.png")
	drawer := brRun(b, chromedp.OuterHTML(brTID(views.LogDetailID)))
	if strings.Contains(drawer, "fk-") || strings.Contains(drawer, secret) {
		t.Error("the log drawer shows a provider key or the client key secret")
	}
	b.do(chromedp.KeyEvent(kb.Escape), chromedp.WaitNotPresent(brTID(views.LogDetailID)))
	if got := brRun(b, chromedp.Evaluate[string](`document.activeElement ? document.activeElement.id : ""`)); got != link {
		t.Errorf("focus after Esc on %q, want the row link %q", got, link)
	}

	// 7. Switch model lockout on; max below base is refused first.
	b.step("7 model lockout settings", brStepTimeout)
	b.expectFailure("/settings/resilience/"+views.SectionModelLockout, http.StatusUnprocessableEntity)
	card := `[data-testid="` + views.ModelLockoutCardID + `"]`
	save := chromedp.Click(chromedp.CSS(card + ` [data-testid="` + views.SettingsSaveID + `"]`))
	saved := chromedp.WaitVisible(chromedp.CSS(card + ` [data-testid="` + views.SettingsSavedID + `"]`))
	b.do(chromedp.Navigate(base+"/settings/resilience"), chromedp.WaitVisible(chromedp.CSS(card)),
		chromedp.ScrollIntoView(chromedp.CSS(card)),
		brFill("#modelLockout-maxCooldownMs", "60000"), save,
		chromedp.WaitVisible(chromedp.CSS("#modelLockout-maxCooldownMs-error")))
	const maxMsg = "The maximum cooldown must be at least the base cooldown (120000 ms)."
	if got := brRun(b, chromedp.Text(chromedp.CSS("#modelLockout-maxCooldownMs-error"))); strings.TrimSpace(got) != maxMsg {
		t.Errorf("max below base: %q", got)
	}
	b.shot("07-lockout-validation.png")
	ml := brLockoutSettings(t, api)
	if ml.Enabled || ml.MaxCooldownMs != 1800000 {
		t.Fatalf("a refused save changed modelLockout: %+v", ml)
	}
	b.do(brFill("#modelLockout-maxCooldownMs", "1800000"), chromedp.Click(chromedp.CSS("#modelLockout-enabled")), save, saved)
	if ml := brLockoutSettings(t, api); !ml.Enabled || ml.MaxCooldownMs != 1800000 || ml.BaseCooldownMs != 120000 {
		t.Fatalf("modelLockout after Save: %+v", ml)
	}

	// 8. The same request again: fake-b's 404 now locks model-x on fake-b.
	b.step("8 lockout", brStepTimeout)
	// A new conversation: the first one is pinned to fake-a by session
	// affinity (its key is derived from the first user message), which
	// would skip fake-b.
	brChat(t, b.sctx, base, secret, "demo", "Hello again")
	var locks brLocks
	api.json("/api/resilience/model-cooldowns", &locks)
	if len(locks.Items) != 1 || locks.Items[0].ConnectionID != bID || locks.Items[0].Model != "model-x" || locks.Items[0].Provider != "fake" {
		t.Fatalf("model cooldowns %+v", locks.Items)
	}
	lock := locks.Items[0]
	lockRow := views.LockoutRowID(bID, resilience.LockShape(lock.KeyShape), lock.LockKey)
	b.do(chromedp.Navigate(base+"/runtime"), chromedp.WaitVisible(brTID(lockRow)),
		chromedp.WaitNotPresent(brTID(views.ModelCooldownsEmptyID)),
		chromedp.WaitVisible(brText(views.IncidentBadgeID, "1 model locked")))
	cells := map[string]string{}
	for _, label := range []string{"Connection", "Model", "Reason"} {
		cells[label] = strings.Join(strings.Fields(brRun(b, chromedp.Text(chromedp.CSS(`[data-testid="`+lockRow+`"] [data-label="`+label+`"]`)))), " ")
	}
	if cells["Connection"] != "fake-b" || !strings.Contains(cells["Model"], "model-x") || !strings.Contains(cells["Reason"], "not found") {
		t.Errorf("lockout row %v", cells)
	}
	// The countdown runs in the browser between polls.
	countdown := `[data-testid="` + lockRow + `"] time[data-remaining-ms]`
	shown := strings.TrimSpace(brRun(b, chromedp.Text(chromedp.CSS(countdown))))
	b.do(chromedp.WaitVisible(chromedp.Search(fmt.Sprintf(`//*[@data-testid="%s"]//time[@data-remaining-ms][normalize-space(.)!="%s"]`, lockRow, shown))))
	b.shot("08-model-cooldowns.png")
	// One locked model is not the connection locked: fake-b keeps its own
	// status and shows the count beside it.
	b.do(chromedp.Navigate(base+"/connections"), chromedp.WaitVisible(brBadge(views.RowID(views.RowConnStatus, bID), "healthy")),
		chromedp.WaitVisible(brTID(views.RowID(views.RowConnLocks, bID))),
		chromedp.WaitVisible(brBadge(views.RowID(views.RowConnStatus, aID), "healthy")))
	if got := strings.TrimSpace(brRun(b, chromedp.Text(chromedp.CSS(`[data-testid="`+views.RowID(views.RowConnLocks, bID)+`"] summary`)))); got != "1 model locked" {
		t.Errorf("fake-b's locked count %q, want \"1 model locked\"", got)
	}

	// 9. Re-enable from the Model Cooldowns card with the keyboard.
	b.step("9 re-enable", brStepTimeout)
	button := views.RowID(views.RowLockoutEnable, lockRow)
	b.do(chromedp.Navigate(base+"/runtime"), chromedp.WaitVisible(brTID(button)),
		chromedp.Focus(brTID(button)))
	if got := brRun(b, chromedp.Evaluate[string](`document.activeElement ? document.activeElement.getAttribute("data-testid") || "" : ""`)); got != button {
		t.Fatalf("focus on %q, want the Re-enable button", got)
	}
	b.do(chromedp.KeyEvent(kb.Enter),
		chromedp.WaitNotPresent(brTID(lockRow)),
		chromedp.WaitVisible(brToast("Re-enabled model-x on fake-b.")),
		chromedp.WaitVisible(brTID(views.ModelCooldownsEmptyID)))
	// The row that held focus is gone, and so is every other row: focus
	// goes to the card's heading, not to the page's <body>.
	if got := brRun(b, chromedp.Evaluate[string](`(function () {
	  var a = document.activeElement, card = document.getElementById("`+views.ModelCooldownsCardID+`");
	  return !a || a === document.body ? "body" : (card && card.contains(a) ? "card:" + a.tagName.toLowerCase() : "elsewhere:" + (a.id || a.tagName));
	})()`)); got != "card:h2" {
		t.Errorf("focus after the last row went away: %s, want the Model Cooldowns heading", got)
	}
	b.shot("09-re-enabled.png")
	api.json("/api/resilience/model-cooldowns", &locks)
	if len(locks.Items) != 0 {
		t.Errorf("model cooldowns after Re-enable: %+v", locks.Items)
	}
	b.do(chromedp.Navigate(base+"/connections"), chromedp.WaitVisible(brBadge(views.RowID(views.RowConnStatus, bID), "healthy")))

	// 10. Lockout settings persist across a reload and a restart.
	b.step("10 settings persist", brStepTimeout)
	b.do(chromedp.Navigate(base+"/settings/resilience"), chromedp.WaitVisible(chromedp.CSS(card)),
		chromedp.ScrollIntoView(chromedp.CSS(card)),
		brFill("#modelLockout-baseCooldownMs", "60000"), brFill("#modelLockout-maxCooldownMs", "600000"))
	brSetSwitch(b, "#modelLockout-useExponentialBackoff", false)
	brSetSwitch(b, "#modelLockout-enabled", false)
	b.do(save, saved)
	want := brLockout{Enabled: false, BaseCooldownMs: 60000, MaxCooldownMs: 600000, UseExponentialBackoff: false}
	b.do(chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS(card)), chromedp.ScrollIntoView(chromedp.CSS(card)))
	brCheckLockoutCard(b, want)
	b.shot("10-settings-persisted.png")
	if ml := brLockoutSettings(t, api); ml.Enabled || ml.BaseCooldownMs != 60000 || ml.MaxCooldownMs != 600000 || ml.UseExponentialBackoff {
		t.Fatalf("modelLockout stored %+v", ml)
	}
	// Leave the dashboard before the gateway goes away, so no poll of the
	// page meets a closed port.
	b.do(chromedp.Navigate("about:blank"))
	if err := gw.Stop(); err != nil {
		t.Fatalf("stopping the gateway: %v", err)
	}
	gw2 := testkit.StartApp(t, args, env)
	base = gw2.BaseURL
	api.base = base
	allowedHosts[brHost(t, base)] = true
	t.Logf("gateway restarted at %s", base)
	b.do(chromedp.Navigate(base+"/settings/resilience"), chromedp.WaitVisible(chromedp.CSS(card)),
		chromedp.ScrollIntoView(chromedp.CSS(card)))
	if loc := brRun(b, chromedp.Location()); strings.Contains(loc, "/login") {
		t.Fatalf("signed out by the restart: %s", loc)
	}
	brCheckLockoutCard(b, want)
	b.do(chromedp.Navigate(base+"/runtime"), chromedp.WaitVisible(brTID(views.ModelCooldownsOffID)),
		chromedp.WaitVisible(brTID(views.ModelCooldownsEmptyID)))

	// The audit log shows the settings change: who, and the values before and after.
	b.step("10b audit log", brStepTimeout)
	b.do(chromedp.Navigate(base+"/audit"), chromedp.WaitVisible(brTID(views.AuditListID)))
	audit := strings.Join(strings.Fields(brRun(b, chromedp.Text(brTID(views.AuditListID)))), " ")
	for _, want := range []string{"admin session", "/settings/resilience/:section", "modelLockout.baseCooldownMs: 120000 → 60000", "modelLockout.enabled: true → false"} {
		if !strings.Contains(audit, want) {
			t.Fatalf("the audit log lacks %q: %s", want, audit)
		}
	}
	b.shot("10b-audit-log.png")

	// Every page at 1280 and 390 px: no sideways scrolling, no serious or
	// critical axe violation.
	// The audit has a budget of its own (brAuditBudget): it is a pass over
	// every page rather than a step of the scenario.
	b.step("10c layout and accessibility", brStepTimeout)
	auditStart := time.Now()
	// A request after the restart, so the Overview chart (in memory) has data.
	brChat(t, b.sctx, base, secret, "demo", "Hello after the restart")
	audits = append(audits, b.auditPages(base, brAuditPages(bID, comboID, keyID, rid))...)
	b.checkAudits(audits)
	auditTime := time.Since(auditStart)
	if auditTime > brAuditBudget {
		t.Errorf("the layout and accessibility audit took %s, budget %s", auditTime.Round(time.Second), brAuditBudget)
	}

	// Switchyard out of reach: one banner, not a note per polled panel.
	b.step("10d connection lost", brStepTimeout)
	b.connectionLost(base)

	// Settings → Resilience: sections, human units, last saves, the preview.
	b.step("10e resilience layout", brStepTimeout)
	b.resilienceLayout(base, api)

	// Narrow screens.
	b.step("11 mobile", brStepTimeout)
	b.do(chromedp.EmulateViewport(390, 844), chromedp.Navigate(base+"/"), chromedp.WaitVisible(brTID(views.OverviewCountsID)))
	b.shot("11-overview-mobile.png")
	b.do(chromedp.Navigate(base+"/connections"), chromedp.WaitVisible(brTID(views.RowID(views.RowConn, bID))))
	b.shot("12-connections-mobile.png")
	b.do(chromedp.EmulateViewport(1280, 800))

	// Throughout: no console error, exception, CSP violation or htmx
	// response error, and every request went to the gateway itself.
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, list := range []struct {
		what  string
		items []string
	}{{"console error", b.console}, {"uncaught exception", b.exceptions}, {"CSP violation", b.csp}, {"htmx response error", b.htmx}} {
		for _, it := range list.items {
			t.Errorf("%s: %s", list.what, it)
		}
	}
	for _, raw := range b.requests {
		u, err := url.Parse(raw)
		if err != nil || u.Scheme == "data" || u.Scheme == "about" {
			continue
		}
		if (u.Scheme != "http" && u.Scheme != "https") || !allowedHosts[u.Host] {
			t.Errorf("request to %s, not to the gateway", raw)
		}
	}
	t.Logf("%d requests, all to the gateway; %d expected validation failures", len(b.requests), b.expectSeen)
	if d := time.Since(began) - auditTime; d > brTestBudget {
		t.Errorf("the browser test took %s besides the audit, budget %s", d.Round(time.Second), brTestBudget)
	}
}

func brHost(t *testing.T, base string) string {
	t.Helper()
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	return u.Host
}

// brLockout is the modelLockout section of GET /api/resilience.
type brLockout struct {
	Enabled               bool `json:"enabled"`
	BaseCooldownMs        int  `json:"baseCooldownMs"`
	MaxCooldownMs         int  `json:"maxCooldownMs"`
	UseExponentialBackoff bool `json:"useExponentialBackoff"`
}

type brLocks struct {
	Items []struct {
		Provider     string `json:"provider"`
		ConnectionID string `json:"connectionId"`
		Model        string `json:"model"`
		KeyShape     string `json:"keyShape"`
		LockKey      string `json:"lockKey"`
	} `json:"items"`
}

func brLockoutSettings(t *testing.T, api *brAPI) brLockout {
	t.Helper()
	var doc struct {
		ModelLockout brLockout `json:"modelLockout"`
	}
	api.json("/api/resilience", &doc)
	return doc.ModelLockout
}

// brSetSwitch clicks a checkbox until it shows on.
func brSetSwitch(b *brBrowser, sel string, on bool) {
	b.t.Helper()
	if brRun(b, chromedp.JavascriptAttribute[bool](chromedp.CSS(sel), "checked")) != on {
		b.do(chromedp.Click(chromedp.CSS(sel)))
	}
	if brRun(b, chromedp.JavascriptAttribute[bool](chromedp.CSS(sel), "checked")) != on {
		b.t.Fatalf("step %s: %s did not switch", b.name, sel)
	}
}

// brCheckLockoutCard compares the Model lockout card's controls with want.
func brCheckLockoutCard(b *brBrowser, want brLockout) {
	b.t.Helper()
	for sel, v := range map[string]int{"#modelLockout-baseCooldownMs": want.BaseCooldownMs, "#modelLockout-maxCooldownMs": want.MaxCooldownMs} {
		if got := brRun(b, chromedp.Value(chromedp.CSS(sel))); got != strconv.Itoa(v) {
			b.t.Errorf("step %s: %s shows %q, want %d", b.name, sel, got, v)
		}
	}
	for sel, v := range map[string]bool{"#modelLockout-enabled": want.Enabled, "#modelLockout-useExponentialBackoff": want.UseExponentialBackoff} {
		if got := brRun(b, chromedp.JavascriptAttribute[bool](chromedp.CSS(sel), "checked")); got != v {
			b.t.Errorf("step %s: %s checked=%v, want %v", b.name, sel, got, v)
		}
	}
}
