package app_test

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"switchyard/views"
)

// The layout and accessibility audit of the browser test (issue 21 item 9):
// every dashboard page, at a desktop (1280 px) and a phone (390 px) width,
// must not scroll sideways, and axe-core must find no serious or critical
// violation in it.

// brAxe is axe-core (npm package axe-core, MPL 2.0, licence header kept in
// the file and next to it in testdata), injected into the page under test
// through the DevTools protocol. It is test-only: the dashboard never loads it.
//
//go:embed testdata/axe.min.js
var brAxe string

// brViewports are the widths the audit checks, with a height to match.
var brViewports = []struct{ w, h int64 }{{1280, 800}, {390, 844}}

// brAxeRun runs axe on the whole document and returns its serious and
// critical violations, each with up to three offending nodes.
const brAxeRun = `axe.run(document, {resultTypes: ["violations"],
  runOnly: {type: "tag", values: ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "wcag22aa", "best-practice"]}}).then(function (r) {
  return JSON.stringify(r.violations.filter(function (v) {
    return v.impact === "serious" || v.impact === "critical";
  }).map(function (v) {
    return {id: v.id, impact: v.impact, nodes: v.nodes.length,
      targets: v.nodes.slice(0, 3).map(function (n) { return n.target.join(" "); })};
  }));
})`

// brWidthProbe measures the document and, when it is wider than the
// viewport, names the deepest elements that stick out (outside any box that
// scrolls or clips horizontally), so a failure says what to fix.
const brWidthProbe = `(function () {
  var iw = window.innerWidth, sw = document.scrollingElement.scrollWidth, out = [];
  if (sw > iw) {
    var clipped = function (el) {
      for (var p = el.parentElement; p && p !== document.body; p = p.parentElement) {
        var ox = getComputedStyle(p).overflowX;
        if (ox === "auto" || ox === "scroll" || ox === "hidden" || ox === "clip") { return true; }
      }
      return false;
    };
    document.querySelectorAll("body *").forEach(function (el) {
      var r = el.getBoundingClientRect();
      if (r.width === 0 || r.right <= iw + 1 || clipped(el)) { return; }
      for (var c = el.firstElementChild; c; c = c.nextElementSibling) {
        if (c.getBoundingClientRect().right > iw + 1) { return; }
      }
      var name = el.tagName.toLowerCase() + (el.id ? "#" + el.id : "") +
        (typeof el.className === "string" && el.className ? "." + el.className.trim().split(/\s+/).join(".") : "");
      out.push(name + " → " + Math.round(r.right) + " px");
    });
  }
  var inner = [];
  document.querySelectorAll(".table-wrap").forEach(function (w) {
    if (w.scrollWidth > w.clientWidth + 1 && w.clientWidth > 0) {
      var t = w.querySelector("[data-testid]"), name = t ? t.getAttribute("data-testid") : (w.id || "table"), cols = [];
      w.querySelectorAll("thead th").forEach(function (th) {
        cols.push(th.textContent.trim() + " " + Math.round(th.getBoundingClientRect().width));
      });
      inner.push(name + " " + w.scrollWidth + " in " + w.clientWidth + (cols.length ? " (columns: " + cols.join(", ") + ")" : ""));
    }
  });
  return JSON.stringify({iw: iw, sw: sw, wide: out.slice(0, 5), inner: inner});
})()`

// brWeightProbe sums what the page on screen loaded, as the browser's
// resource timing reports it: bytes on the wire (encoded) and after
// decompression, for the document and its scripts and style sheets.
const brWeightProbe = `(function () {
  var enc = 0, dec = 0, parts = [];
  performance.getEntriesByType("navigation").concat(performance.getEntriesByType("resource")).forEach(function (e) {
    var kind = e.entryType === "navigation" ? "html" : (/\.css$/.test(e.name) ? "css" : (/\.js$/.test(e.name) ? "js" : ""));
    if (!kind) { return; }
    enc += e.encodedBodySize; dec += e.decodedBodySize;
    parts.push(kind + " " + e.name.replace(/^.*\//, "") + " " + e.encodedBodySize + "/" + e.decodedBodySize);
  });
  return JSON.stringify({encoded: enc, decoded: dec, parts: parts});
})()`

// brAxeViolation is one serious or critical axe rule broken on a page.
type brAxeViolation struct {
	ID      string   `json:"id"`
	Impact  string   `json:"impact"`
	Nodes   int      `json:"nodes"`
	Targets []string `json:"targets"`
}

// brAudit is what the audit found on one page at one width.
type brAudit struct {
	page       string
	viewport   int64
	width      int64 // document.scrollingElement.scrollWidth
	inner      int64 // window.innerWidth
	wide       []string
	tables     []string // tables wider than their scrolling wrapper: "<testid> 1372 in 976"
	violations []brAxeViolation
}

// serious counts the offending nodes of serious and critical violations.
func (a brAudit) serious() int {
	n := 0
	for _, v := range a.violations {
		n += v.Nodes
	}
	return n
}

// auditCurrent measures the page on screen: its width and axe's serious and
// critical violations.
func (b *brBrowser) auditCurrent(page string, viewport int64) brAudit {
	b.t.Helper()
	b.do(brSettled)
	var probe struct {
		IW, SW      int64
		Wide, Inner []string
	}
	if err := json.Unmarshal([]byte(brRun(b, chromedp.Evaluate[string](brWidthProbe))), &probe); err != nil {
		b.t.Fatalf("step %s: width probe: %v", b.name, err)
	}
	a := brAudit{page: page, viewport: viewport, width: probe.SW, inner: probe.IW, wide: probe.Wide, tables: probe.Inner}
	if !brRun(b, chromedp.Evaluate[bool](`typeof window.axe === "object"`)) {
		b.do(chromedp.Evaluate[chromedp.Void](brAxe))
	}
	raw := brRun(b, chromedp.Evaluate[string](brAxeRun, chromedp.EvalAwaitPromise))
	if err := json.Unmarshal([]byte(raw), &a.violations); err != nil {
		b.t.Fatalf("step %s: axe result %q: %v", b.name, raw, err)
	}
	return a
}

// auditBare audits the page on screen (setup, sign-in: pages without the
// layout) at every audited width.
func (b *brBrowser) auditBare(page string) []brAudit {
	b.t.Helper()
	var out []brAudit
	for _, vp := range brViewports {
		b.do(chromedp.EmulateViewport(vp.w, vp.h))
		out = append(out, b.auditCurrent(page, vp.w))
	}
	b.do(chromedp.EmulateViewport(1280, 800))
	return out
}

// auditPages opens every page and measures it at every audited width (the
// same document resized, so axe is injected once per page).
func (b *brBrowser) auditPages(base string, pages []string) []brAudit {
	b.t.Helper()
	var all []brAudit
	for _, p := range pages {
		b.step("10c audit "+p, brStepTimeout)
		b.do(chromedp.EmulateViewport(brViewports[0].w, brViewports[0].h),
			chromedp.Navigate(base+p), chromedp.WaitVisible(chromedp.CSS("#"+views.ContentID+" h1")))
		if p == "/" {
			b.t.Logf("page weight of the Overview (HTML, CSS and JS; on the wire / decoded): %s", brRun(b, chromedp.Evaluate[string](brWeightProbe)))
		}
		for i, vp := range brViewports {
			if i > 0 {
				b.do(chromedp.EmulateViewport(vp.w, vp.h))
			}
			all = append(all, b.auditCurrent(p, vp.w))
		}
	}
	b.do(chromedp.EmulateViewport(1280, 800))
	return all
}

// checkAudits logs every audit and fails the test for a page that scrolls
// sideways (document.scrollingElement.scrollWidth > innerWidth) or has a
// serious or critical axe violation. With SWITCHYARD_AUDIT_REPORT=1 it only
// reports (to measure a tree before fixing it).
func (b *brBrowser) checkAudits(all []brAudit) {
	b.t.Helper()
	report := os.Getenv("SWITCHYARD_AUDIT_REPORT") == "1"
	total := 0
	for _, a := range all {
		total += a.serious()
		line := fmt.Sprintf("audit %-32s @%4d: width %4d / %4d, axe serious+critical %d", a.page, a.viewport, a.width, a.inner, a.serious())
		for _, v := range a.violations {
			line += fmt.Sprintf("\n    %s (%s) ×%d: %s", v.ID, v.Impact, v.Nodes, strings.Join(v.Targets, " | "))
		}
		if len(a.wide) > 0 {
			line += "\n    sticks out: " + strings.Join(a.wide, ", ")
		}
		if len(a.tables) > 0 {
			line += "\n    scrolls inside: " + strings.Join(a.tables, ", ")
		}
		b.t.Log(line)
		if report {
			continue
		}
		if brTablesFit[a.page] && a.viewport >= 1280 && len(a.tables) > 0 {
			b.t.Errorf("%s at %d px: a table scrolls inside its column (%s)", a.page, a.viewport, strings.Join(a.tables, ", "))
		}
		if a.width > a.inner {
			b.t.Errorf("%s at %d px scrolls sideways: the document is %d px wide (%s)", a.page, a.viewport, a.width, strings.Join(a.wide, ", "))
		}
		for _, v := range a.violations {
			b.t.Errorf("%s at %d px: axe %s (%s) on %d nodes: %s", a.page, a.viewport, v.ID, v.Impact, v.Nodes, strings.Join(v.Targets, " | "))
		}
	}
	b.t.Logf("audit: %d page views, %d serious or critical axe nodes in all", len(all), total)
}

// brTablesFit are the pages whose tables must fit a 1280 px screen without
// scrolling inside their wrapper (elsewhere wide data may scroll in its own
// box, 50-dashboard §8).
var brTablesFit = map[string]bool{"/connections": true, "/logs": true}

// brAuditPages are the pages the audit opens: every entry of the sidebar,
// then the forms and details that are pages of their own.
func brAuditPages(connID, comboID, keyID, requestID string) []string {
	var out []string
	for _, n := range views.Nav {
		out = append(out, n.Href)
	}
	return append(out,
		"/connections/new", "/connections/"+connID+"/edit",
		"/combos/new", "/combos/"+comboID+"/edit",
		"/keys/new", "/keys/"+keyID+"/edit",
		"/logs/"+requestID)
}

// brRefreshPolls makes every polled region of the page poll now (app.js
// sends the same event when a hidden tab shows again).
const brRefreshPolls = `document.querySelectorAll("[data-poll]").forEach(function (el) {
  el.dispatchEvent(new CustomEvent("refresh", {bubbles: false}));
})`

// connectionLost takes the browser off the network on the Runtime page,
// whose panels poll: one "connection lost" banner appears instead of a note
// per panel, and it goes with the first answer once the network is back.
// The browser's own reports of the failed requests during the outage are
// expected, not errors of the page.
func (b *brBrowser) connectionLost(base string) {
	b.t.Helper()
	b.do(chromedp.Navigate(base+"/runtime"), chromedp.WaitVisible(brTID(views.ModelCooldownsEmptyID)), brSettled)
	polled := brRun(b, chromedp.Evaluate[int](`document.querySelectorAll("[data-poll]").length`))
	if polled < 3 {
		b.t.Fatalf("step %s: only %d polled regions on /runtime", b.name, polled)
	}
	// Requests to the gateway fail as if it were gone (the browser blocks
	// them: the page sees a network error, as with a stopped server).
	offline := func(off bool) {
		b.t.Helper()
		if _, err := chromedp.Call(b.sctx, network.SetBlockedURLs, network.SetBlockedURLsParams{
			URLPatterns: []*network.BlockPattern{{URLPattern: base + "/*", Block: off}}}); err != nil {
			b.t.Fatalf("step %s: blocking the gateway: %v", b.name, err)
		}
	}
	offline(true)
	b.do(chromedp.Evaluate[chromedp.Void](brRefreshPolls), chromedp.WaitVisible(brTID("connection-lost")),
		chromedp.WaitNotPresent(chromedp.CSS(".htmx-request")))
	counts := brRun(b, chromedp.Evaluate[[]int](`[document.querySelectorAll('[data-testid="connection-lost"]').length,
  document.querySelectorAll(".stale-note").length, document.querySelectorAll("[data-poll].is-stale").length]`))
	if counts[0] != 1 || counts[1] != 0 || counts[2] < 2 {
		b.t.Errorf("offline: %d banners, %d stale notes, %d dimmed regions of %d; want 1, 0 and several", counts[0], counts[1], counts[2], polled)
	}
	b.shot("10d-connection-lost.png")
	offline(false)
	b.do(chromedp.Evaluate[chromedp.Void](brRefreshPolls), chromedp.WaitNotPresent(brTID("connection-lost")), brSettled)
	b.mu.Lock()
	defer b.mu.Unlock()
	kept := b.console[:0]
	for _, c := range b.console {
		if strings.HasPrefix(c, b.name+": ") && (strings.Contains(c, "ERR_BLOCKED_BY_CLIENT") ||
			strings.Contains(c, "htmx:sendError") || strings.Contains(c, "htmx:afterRequest")) {
			continue
		}
		kept = append(kept, c)
	}
	b.console = kept
}

// resilienceLayout checks Settings → Resilience after step 10 saved the Model
// lockout card (base 1 min, max 10 min, no doubling): the sections' nav,
// the human units next to the milliseconds, each card's last save from the
// audit log, and the escalation preview, which follows the switch without
// saving anything.
func (b *brBrowser) resilienceLayout(base string, api *brAPI) {
	b.t.Helper()
	card := `[data-testid="` + views.ModelLockoutCardID + `"]`
	preview := card + ` [data-testid="` + views.LockoutPreviewID + `"]`
	b.do(chromedp.Navigate(base+"/settings/resilience"), chromedp.WaitVisible(brTID(views.SettingsNavID)),
		chromedp.ScrollIntoView(chromedp.CSS(card)))
	text := func(sel string) string {
		b.t.Helper()
		return strings.Join(strings.Fields(brRun(b, chromedp.Text(chromedp.CSS(sel)))), " ")
	}
	if got := brRun(b, chromedp.Evaluate[int](`document.querySelectorAll('[data-testid="settings-nav"] a').length`)); got != len(views.SettingsSections) {
		b.t.Errorf("the section nav has %d links, want %d", got, len(views.SettingsSections))
	}
	if got := text("#modelLockout-baseCooldownMs-human"); got != "= 1 min" {
		b.t.Errorf("base cooldown in human units %q", got)
	}
	if got := text(`[data-testid="` + views.RowID(views.RowSettingsLastSaved, views.SectionModelLockout) + `"]`); !strings.HasPrefix(got, "Last saved") {
		b.t.Errorf("Model lockout card: %q, want its last save", got)
	}
	if got := text(`[data-testid="` + views.RowID(views.RowSettingsLastSaved, views.SectionRequestQueue) + `"]`); got != "Never saved" {
		b.t.Errorf("Request queue card: %q", got)
	}
	if got := text(preview); !strings.HasSuffix(got, "1 min on every repeat failure") {
		b.t.Errorf("preview without doubling %q", got)
	}
	brSetSwitch(b, "#modelLockout-useExponentialBackoff", true)
	b.do(chromedp.WaitVisible(chromedp.Search(`//*[@data-testid="` + views.LockoutPreviewID + `"]//*[contains(., "1 min → 2 min → 4 min → 8 min → 10 min (cap)")]`)))
	b.do(brFill("#modelLockout-baseCooldownMs", "120000"),
		chromedp.WaitVisible(chromedp.Search(`//*[@data-testid="`+views.LockoutPreviewID+`"]//*[contains(., "2 min → 4 min → 8 min → 10 min (cap)")]`)))
	if ml := brLockoutSettings(b.t, api); ml.UseExponentialBackoff || ml.BaseCooldownMs != 60000 {
		b.t.Errorf("the preview saved something: %+v", ml)
	}
	b.shot("10e-lockout-preview.png")
	b.do(chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS(card)))
}
