package app_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"

	"switchyard/internal/testkit"
	"switchyard/models"
	"switchyard/services"
	"switchyard/views"
)

// Canaries: secrets that must never reach the browser after they were entered.
const (
	dashProviderKeyCanary = "sk-canary-PROVIDER-KEY-7f3a91c2e8d4b6a0"
	dashProxyCanary       = "proxy-canary-PASSWORD-51be"
)

// dashClient drives the dashboard as a signed-in browser would and keeps
// every response body, so secret checks can walk all of them.
type dashClient struct {
	t      *testing.T
	app    *testkit.App
	cookie *http.Cookie
	bodies []string
}

func newDashClient(t *testing.T) *dashClient {
	t.Helper()
	a := testkit.NewApp(t)
	return &dashClient{t: t, app: a, cookie: a.Login()}
}

// req builds a same-origin dashboard request. Form values go in the body of
// POST and PUT and in the query of GET and DELETE (as htmx 2 sends them).
func (d *dashClient) req(method, path string, form url.Values, htmx bool) *http.Request {
	body := ""
	if form != nil {
		if method == http.MethodGet || method == http.MethodDelete {
			sep := "?"
			if strings.Contains(path, "?") {
				sep = "&"
			}
			path += sep + form.Encode()
		} else {
			body = form.Encode()
		}
	}
	r := testkit.Request(method, path, body, "Content-Type", "application/x-www-form-urlencoded", "Sec-Fetch-Site", "same-origin")
	if htmx {
		r.Header.Set("HX-Request", "true")
	}
	if d.cookie != nil {
		r.AddCookie(d.cookie)
	}
	return r
}

func (d *dashClient) send(r *http.Request) *httptest.ResponseRecorder {
	d.t.Helper()
	rec := d.app.Do(r)
	d.bodies = append(d.bodies, rec.Body.String())
	return rec
}

// do sends a request and fails the test unless the status is want.
func (d *dashClient) do(method, path string, form url.Values, htmx bool, want int) *httptest.ResponseRecorder {
	d.t.Helper()
	rec := d.send(d.req(method, path, form, htmx))
	if rec.Code != want {
		d.t.Fatalf("%s %s (htmx=%v): status %d, want %d\n%s", method, path, htmx, rec.Code, want, dashTrunc(rec.Body.String(), 3000))
	}
	return rec
}

func dashTrunc(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// dashParse reads a response body; table-row and table-cell fragments (swapped
// into an existing table by htmx) are parsed inside a table, as the browser does.
func dashParse(t *testing.T, rec *httptest.ResponseRecorder) *goquery.Document {
	t.Helper()
	body := rec.Body.String()
	switch {
	case strings.HasPrefix(body, "<tr"):
		body = "<table><tbody>" + body + "</tbody></table>"
	case strings.HasPrefix(body, "<td"):
		body = "<table><tbody><tr>" + body + "</tr></tbody></table>"
	}
	doc, err := goquery.NewDocumentFromReader(strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

// dashTID selects by data-testid.
func dashTID(id string) string { return `[data-testid="` + id + `"]` }

func dashFind(t *testing.T, doc *goquery.Document, sel string) *goquery.Selection {
	t.Helper()
	s := doc.Find(sel)
	if s.Length() == 0 {
		h, _ := doc.Html()
		t.Fatalf("no element matches %s in\n%s", sel, dashTrunc(h, 4000))
	}
	return s
}

// dashEvents decodes HX-Trigger.
func dashEvents(t *testing.T, rec *httptest.ResponseRecorder) map[string]json.RawMessage {
	t.Helper()
	m := map[string]json.RawMessage{}
	if h := rec.Header().Get("HX-Trigger"); h != "" {
		if err := json.Unmarshal([]byte(h), &m); err != nil {
			t.Fatalf("HX-Trigger %q: %v", h, err)
		}
	}
	return m
}

// dashToast returns the show-toast text of a response.
func dashToast(t *testing.T, rec *httptest.ResponseRecorder) string {
	t.Helper()
	var toast struct{ Level, Text string }
	if raw, ok := dashEvents(t, rec)[views.EventShowToast]; ok {
		_ = json.Unmarshal(raw, &toast)
	}
	return toast.Text
}

func dashWantEvent(t *testing.T, rec *httptest.ResponseRecorder, name string) {
	t.Helper()
	if _, ok := dashEvents(t, rec)[name]; !ok {
		t.Fatalf("HX-Trigger %q lacks %s", rec.Header().Get("HX-Trigger"), name)
	}
}

// dashSeed fills the app through the services: one connection (with the
// provider key and proxy password canaries), one combo pinning it and one key.
type dashSeeded struct {
	conn  services.Connection
	combo services.Combo
	key   services.APIKey
}

func dashSeed(t *testing.T, a *testkit.App) dashSeeded {
	t.Helper()
	ctx := context.Background()
	conn, err := a.Server.Connections().Create(ctx, services.ConnectionInput{Provider: services.Some("openai"),
		Name: services.Some("main"), APIKey: services.Some(dashProviderKeyCanary),
		ProxyURL: services.Some("http://user:" + dashProxyCanary + "@proxy.example.com:8080")})
	if err != nil {
		t.Fatal(err)
	}
	id := conn.ID
	combo, _, err := a.Server.Combos().Create(ctx, services.ComboInput{Name: "fast", Strategy: "priority",
		Targets: []services.Target{{Provider: "openai", Model: "gpt-4o", ConnectionID: &id}, {Provider: "anthropic", Model: "claude-sonnet-4"}}})
	if err != nil {
		t.Fatal(err)
	}
	key, _, err := a.Server.Keys().Create(ctx, services.KeyInput{Name: services.Some("ci"),
		AllowedConnections: services.Some([]string{conn.ID})})
	if err != nil {
		t.Fatal(err)
	}
	return dashSeeded{conn: conn, combo: combo, key: key}
}

var dashNonceRe = regexp.MustCompile(`script-src 'nonce-([^']+)'`)

// dashCheckHTML asserts what every dashboard HTML response must carry: Vary and
// Cache-Control, a CSP whose nonce is on every <script>, and no inline
// style, inline script, on*= handler, hx-on or javascript: URL.
func dashCheckHTML(t *testing.T, rec *httptest.ResponseRecorder) *goquery.Document {
	t.Helper()
	if v := strings.Join(rec.Header().Values("Vary"), ","); !strings.Contains(v, "HX-Request") {
		t.Errorf("Vary = %q, want HX-Request", v)
	}
	if cc := rec.Header().Get("Cache-Control"); cc != "no-store" {
		t.Errorf("Cache-Control = %q, want no-store", cc)
	}
	m := dashNonceRe.FindStringSubmatch(rec.Header().Get("Content-Security-Policy"))
	if m == nil {
		t.Fatalf("CSP %q has no script nonce", rec.Header().Get("Content-Security-Policy"))
	}
	body := rec.Body.String()
	doc := dashParse(t, rec)
	doc.Find("script").Each(func(_ int, s *goquery.Selection) {
		if n, _ := s.Attr("nonce"); n != m[1] {
			t.Errorf("script nonce %q, CSP nonce %q", n, m[1])
		}
		if src, _ := s.Attr("src"); src == "" || strings.TrimSpace(s.Text()) != "" {
			t.Errorf("inline script: %s", dashTrunc(s.Text(), 200))
		}
	})
	if strings.Contains(body, " style=") || doc.Find("[style]").Length() > 0 {
		t.Error("page has a style= attribute")
	}
	if strings.Contains(strings.ToLower(body), "javascript:") {
		t.Error("page has a javascript: URL")
	}
	doc.Find("*").Each(func(_ int, s *goquery.Selection) {
		for _, a := range s.Nodes[0].Attr {
			if strings.HasPrefix(a.Key, "on") || strings.HasPrefix(a.Key, "hx-on") || strings.HasPrefix(a.Key, "data-hx-on") {
				t.Errorf("<%s> has an inline handler %s", s.Nodes[0].Data, a.Key)
			}
		}
	})
	return doc
}

// page fetches path as a full page and as a fragment and checks both.
func (d *dashClient) page(path string, wantTestIDs ...string) (full, frag *goquery.Document) {
	d.t.Helper()
	rec := d.do("GET", path, nil, false, http.StatusOK)
	full = dashCheckHTML(d.t, rec)
	if !strings.Contains(rec.Body.String(), "<html") || full.Find("main#content").Length() != 1 {
		d.t.Fatalf("GET %s: not a full page", path)
	}
	rec = d.do("GET", path, nil, true, http.StatusOK)
	frag = dashCheckHTML(d.t, rec)
	if strings.Contains(rec.Body.String(), "<html") || strings.Contains(rec.Body.String(), `class="sidebar`) {
		d.t.Fatalf("GET %s with HX-Request: got a full page", path)
	}
	for _, id := range wantTestIDs {
		dashFind(d.t, full, dashTID(id))
		dashFind(d.t, frag, dashTID(id))
	}
	return full, frag
}

func TestDashboardPagesRenderFreshInstall(t *testing.T) {
	d := newDashClient(t)
	full, _ := d.page("/", views.OverviewChecklistID, views.OverviewCountsID, views.OverviewBaseURLID, views.OverviewCurlID)
	if got := full.Find("title").Text(); got != "Overview · Switchyard" {
		t.Errorf("title %q", got)
	}
	if v := full.Find(dashTID(views.OverviewBaseURLID)).AttrOr("value", ""); v != "http://example.com/v1" {
		t.Errorf("base URL %q", v)
	}
	for _, id := range []string{views.OverviewConnCountID, views.OverviewComboCountID, views.OverviewKeyCountID} {
		if got := strings.TrimSpace(full.Find(dashTID(id) + " .tile__value").Text()); got != "0" {
			t.Errorf("%s = %q, want 0", id, got)
		}
	}
	if curl := full.Find(dashTID(views.OverviewCurlID)).Text(); !strings.Contains(curl, "http://example.com/v1/chat/completions") ||
		!strings.Contains(curl, "$SWITCHYARD_API_KEY") || !strings.Contains(curl, `"model": "<model>"`) {
		t.Errorf("curl snippet %q", curl)
	}
	if full.Find(`nav a[aria-current="page"]`).First().Text() != "Overview" {
		t.Error("Overview is not the current nav entry")
	}

	empties := []struct{ path, id, text string }{
		{"/connections", views.ConnectionsEmptyID, "No connections yet. A connection is one provider account: an API key, an OAuth login or a local server."},
		{"/combos", views.CombosEmptyID, "No combos yet. A combo is a named group of models that clients call by name; Switchyard tries its targets in the order the strategy picks."},
		{"/keys", views.KeysEmptyID, "No API keys yet. Clients send a key as Authorization: Bearer sk-sy-…; /v1 never works without one."},
	}
	for _, e := range empties {
		full, frag := d.page(e.path, e.id)
		for _, doc := range []*goquery.Document{full, frag} {
			if got := strings.TrimSpace(doc.Find(dashTID(e.id) + " .empty__text").Text()); got != e.text {
				t.Errorf("%s empty state %q, want %q", e.path, got, e.text)
			}
		}
	}
	dashFind(t, dashParse(t, d.do("GET", "/connections", nil, false, 200)), dashTID(views.ConnectionsEmptyID)+" "+dashTID(views.ConnectionAddID))

	// Panels and builders open directly (full page) or as fragments.
	full, frag := d.page("/connections/new", views.ConnectionFormID, views.ConnectionFieldsID)
	dashFind(t, full, dashTID(views.ConnectionsListID))
	if frag.Find(dashTID(views.ConnectionsListID)).Length() != 0 {
		t.Error("the add-connection fragment carries the list")
	}
	full, frag = d.page("/connections/form-fields?provider=openai", views.ConnectionFieldsID)
	dashFind(t, frag, "input#apiKey[type=password]")
	if frag.Find(dashTID(views.ConnectionFormID)).Length() != 0 {
		t.Error("form-fields fragment carries the whole form")
	}
	dashFind(t, full, dashTID(views.ConnectionFormID))
	_, frag = d.page("/connections/form-fields?provider="+url.QueryEscape(views.CustomOpenAI), views.ConnectionFieldsID)
	dashFind(t, frag, "input#customId")
	dashFind(t, frag, "input#baseUrl")
	_, frag = d.page("/connections/form-fields?provider=ollama", views.ConnectionFieldsID)
	if v := frag.Find("input#baseUrl").AttrOr("value", ""); v != "http://127.0.0.1:11434/v1" {
		t.Errorf("local base URL prefill %q", v)
	}
	_, frag = d.page("/combos/new", views.ComboFormID, views.ComboStrategyID, views.ComboAddTargetID, views.ComboAdvancedID)
	if got := frag.Find(dashTID(views.ComboStrategyHelpID)).Text(); got != services.Strategies()[0].Describe {
		t.Errorf("strategy help %q", got)
	}
	if n := frag.Find("#strategy option").Length(); n != len(services.Strategies()) {
		t.Errorf("strategy select lists %d, want %d", n, len(services.Strategies()))
	}
	_, frag = d.page("/keys/new", views.KeyFormID)
	if _, ok := frag.Find(dashTID("scope-inference")).Attr("checked"); !ok {
		t.Error("inference scope not ticked by default")
	}
	for _, any := range []string{"allowedModelsAny", "allowedCombosAny", "allowedConnectionsAny"} {
		if _, ok := frag.Find(dashTID(any)).Attr("checked"); !ok {
			t.Errorf("%s not on by default", any)
		}
	}
}

func TestDashboardPagesRenderSeeded(t *testing.T) {
	d := newDashClient(t)
	s := dashSeed(t, d.app)
	full, _ := d.page("/", views.OverviewCountsID)
	for _, id := range []string{views.OverviewConnCountID, views.OverviewComboCountID, views.OverviewKeyCountID} {
		if got := strings.TrimSpace(full.Find(dashTID(id) + " .tile__value").Text()); got != "1" {
			t.Errorf("%s = %q, want 1", id, got)
		}
	}
	if curl := full.Find(dashTID(views.OverviewCurlID)).Text(); !strings.Contains(curl, `"model": "fast"`) {
		t.Errorf("curl should use the first enabled combo: %q", curl)
	}
	if done := full.Find(dashTID(views.OverviewChecklistID + "-connection")).HasClass("checklist__item--done"); !done {
		t.Error("checklist does not tick the connection")
	}

	full, frag := d.page("/connections", views.RowID(views.RowConn, s.conn.ID), views.RowID(views.RowConnGroup, "openai"))
	row := full.Find(dashTID(views.RowID(views.RowConn, s.conn.ID)))
	if got := strings.TrimSpace(row.Find("th .strong").First().Text()); got != "main" {
		t.Errorf("row name %q", got)
	}
	if got := strings.TrimSpace(row.Find(dashTID(views.RowID(views.RowConnStatus, s.conn.ID))).Text()); got != "healthy" {
		t.Errorf("status %q", got)
	}
	if got := row.Find(`td[data-label="Concurrency"]`).Text(); !strings.Contains(got, "∞") {
		t.Errorf("concurrency %q, want ∞", got)
	}
	if got := row.Find(`td[data-label="Protection / egress"]`).Text(); !strings.Contains(got, "http://user:****@proxy.example.com:8080") {
		t.Errorf("egress %q", got)
	}
	dashFind(t, frag, dashTID(views.RowID(views.RowConnEdit, s.conn.ID)))
	dashFind(t, frag, dashTID(views.RowID(views.RowConnEnabled, s.conn.ID))+"[checked]")

	full, _ = d.page("/combos", views.RowID(views.RowCombo, s.combo.ID))
	row = full.Find(dashTID(views.RowID(views.RowCombo, s.combo.ID)))
	if got := row.Find("code").Text(); got != "fast" {
		t.Errorf("combo name %q", got)
	}
	dashFind(t, full, dashTID(views.RowID(views.RowComboCopy, s.combo.ID))+`[data-copy-target="`+views.RowID(views.RowComboName, s.combo.ID)+`"]`)
	var chips []string
	row.Find(".chip").Each(func(_ int, c *goquery.Selection) { chips = append(chips, strings.TrimSpace(c.Text())) })
	if strings.Join(chips, "|") != "openai/gpt-4o (main)|anthropic/claude-sonnet-4 (any connection)" {
		t.Errorf("target chips %q", chips)
	}

	full, _ = d.page("/keys", views.RowID(views.RowKey, s.key.ID))
	row = full.Find(dashTID(views.RowID(views.RowKey, s.key.ID)))
	if got := row.Find(`td[data-label="Prefix"]`).Text(); got != s.key.Prefix+"…" {
		t.Errorf("prefix %q", got)
	}
	if got := strings.TrimSpace(row.Find(`td[data-label="State"]`).Text()); got != "active" {
		t.Errorf("state %q", got)
	}
	if got := row.Find(`td[data-label="Allows"]`).Text(); got != "all models, all combos, 1 connection" {
		t.Errorf("allows %q", got)
	}

	d.page("/connections/"+s.conn.ID+"/edit", views.ConnectionFormID)
	d.page("/connections/"+s.conn.ID+"/confirm-delete", views.ConfirmPanelID)
	d.page("/combos/"+s.combo.ID+"/edit", views.ComboFormID)
	d.page("/combos/"+s.combo.ID+"/confirm-delete", views.ConfirmPanelID)
	d.page("/keys/"+s.key.ID+"/edit", views.KeyFormID)
	d.page("/keys/"+s.key.ID+"/confirm-revoke", views.ConfirmPanelID)
	d.page("/keys/"+s.key.ID+"/confirm-delete", views.ConfirmPanelID)
}

func dashConnForm(kv ...string) url.Values {
	v := url.Values{"provider": {"openai"}, "name": {"main"}, "apiKey": {dashProviderKeyCanary}, "priority": {"0"},
		"tier": {"standard"}, "rateLimitProtection": {"inherit"}, "quotaReservePercent": {"0"}, "enabled": {"on"}}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] == "" {
			v.Del(kv[i])
			if kv[i] == "name" || kv[i] == "apiKey" || kv[i] == "maxConcurrent" {
				v.Set(kv[i], "")
			}
			continue
		}
		v.Set(kv[i], kv[i+1])
	}
	return v
}

func TestDashboardConnectionsCRUD(t *testing.T) {
	d := newDashClient(t)
	ctx := context.Background()
	svc := d.app.Server.Connections()

	rec := d.do("POST", "/connections", dashConnForm(), true, http.StatusOK)
	dashWantEvent(t, rec, views.EventConnectionsChanged)
	if got := dashToast(t, rec); got != "Connection main added." {
		t.Errorf("toast %q", got)
	}
	doc := dashCheckHTML(t, rec)
	list := dashFind(t, doc, "#"+views.ConnectionsListID+`[hx-swap-oob="outerHTML"]`)
	conns, _ := svc.List(ctx, services.ConnectionFilter{})
	if len(conns) != 1 || conns[0].Credentials.APIKey.Reveal() != dashProviderKeyCanary || conns[0].Provider != "openai" {
		t.Fatalf("stored %+v", conns)
	}
	id := conns[0].ID
	if list.Find(dashTID(views.RowID(views.RowConn, id))).Length() != 1 {
		t.Fatal("new row not in the out-of-band list")
	}
	if doc.Find(dashTID(views.ConnectionFormID)).Length() != 0 {
		t.Error("the panel still shows the form")
	}

	// Without script the form post redirects back to the list.
	rec = d.do("POST", "/connections", dashConnForm("name", "backup", "priority", "1"), false, http.StatusSeeOther)
	if loc := rec.Header().Get("Location"); loc != "/connections" {
		t.Errorf("Location %q", loc)
	}

	// Edit: the stored key is shown masked and its field stays empty.
	doc = dashCheckHTML(t, d.do("GET", "/connections/"+id+"/edit", nil, true, http.StatusOK))
	if v := doc.Find("input#name").AttrOr("value", ""); v != "main" {
		t.Errorf("edit name %q", v)
	}
	if v, _ := doc.Find("input#apiKey").Attr("value"); v != "" {
		t.Errorf("edit form renders the key back: %q", v)
	}
	if help := doc.Find("#apiKey-help").Text(); !strings.Contains(help, "•••• "+dashProviderKeyCanary[len(dashProviderKeyCanary)-4:]) {
		t.Errorf("key preview %q", help)
	}
	rec = d.do("PUT", "/connections/"+id, dashConnForm("name", "primary", "apiKey", "", "maxConcurrent", "4"), true, http.StatusOK)
	if got := dashToast(t, rec); got != "Connection primary saved." {
		t.Errorf("toast %q", got)
	}
	dashWantEvent(t, rec, views.EventConnectionsChanged)
	c, _ := svc.Get(ctx, id)
	if c.Name != "primary" || c.MaxConcurrent == nil || *c.MaxConcurrent != 4 || c.Credentials.APIKey.Reveal() != dashProviderKeyCanary {
		t.Fatalf("after edit %+v (key kept: %v)", c, c.Credentials.APIKey.Reveal() == dashProviderKeyCanary)
	}
	row := dashFind(t, dashCheckHTML(t, rec), dashTID(views.RowID(views.RowConn, id)))
	if got := strings.TrimSpace(row.Find(`td[data-label="Concurrency"]`).Text()); got != "0 / 4" {
		t.Errorf("concurrency cell %q", got)
	}

	// Enable switch: unchecked sends nothing, checked sends "on"; the row comes back.
	rec = d.do("PUT", "/connections/"+id+"/enabled", url.Values{}, true, http.StatusOK)
	if got := dashToast(t, rec); got != "Connection primary disabled." {
		t.Errorf("toast %q", got)
	}
	doc = dashCheckHTML(t, rec)
	row = dashFind(t, doc, "tr"+dashTID(views.RowID(views.RowConn, id)))
	if got := strings.TrimSpace(row.Find(dashTID(views.RowID(views.RowConnStatus, id))).Text()); got != "disabled" {
		t.Errorf("status after disable %q", got)
	}
	if c, _ := svc.Get(ctx, id); c.Enabled {
		t.Fatal("still enabled")
	}
	d.do("PUT", "/connections/"+id+"/enabled", url.Values{"enabled": {"on"}}, true, http.StatusOK)
	if c, _ := svc.Get(ctx, id); !c.Enabled {
		t.Fatal("not re-enabled")
	}

	// Delete: the confirmation names the combos pinning it and keys allowing it.
	_, _, err := d.app.Server.Combos().Create(ctx, services.ComboInput{Name: "pinned", Targets: []services.Target{{Provider: "openai", Model: "gpt-4o", ConnectionID: &id}}})
	if err != nil {
		t.Fatal(err)
	}
	lease, _, err := d.app.Server.Keys().Create(ctx, services.KeyInput{Name: services.Some("lease"),
		Scopes: services.Some([]string{services.ScopeLeaseExclusive}), AllowedConnections: services.Some([]string{id})})
	if err != nil {
		t.Fatal(err)
	}
	doc = dashCheckHTML(t, d.do("GET", "/connections/"+id+"/confirm-delete", nil, true, http.StatusOK))
	panel := dashFind(t, doc, dashTID(views.ConfirmPanelID))
	if txt := panel.Text(); !strings.Contains(txt, "Delete connection primary?") || !strings.Contains(txt, "pinned") || !strings.Contains(txt, "lease") {
		t.Errorf("confirmation %q", txt)
	}
	if _, ok := doc.Find(dashTID(views.ConfirmCancelID)).Attr("data-autofocus"); !ok {
		t.Error("Cancel is not focused")
	}
	if doc.Find(dashTID(views.ConfirmSubmitID)).AttrOr("hx-delete", "") != "/connections/"+id {
		t.Error("confirm button does not DELETE the connection")
	}
	full := dashCheckHTML(t, d.do("GET", "/connections/"+id+"/confirm-delete", nil, false, http.StatusOK))
	dashFind(t, full, "#"+views.RowID(views.RowConnSlot, id)+" "+dashTID(views.ConfirmPanelID))

	// The lease key's last connection: 409, toast, nothing deleted.
	rec = d.do("DELETE", "/connections/"+id, nil, true, http.StatusConflict)
	if got := dashToast(t, rec); got != "Key 'lease' would lose its last allowed connection. Edit the key first." {
		t.Errorf("409 toast %q", got)
	}
	if rec.Body.Len() != 0 {
		t.Errorf("409 body %q", rec.Body.String())
	}
	if _, err := svc.Get(ctx, id); err != nil {
		t.Fatal("deleted despite the lease key")
	}
	if _, err := d.app.Server.Keys().Revoke(ctx, lease.ID); err != nil {
		t.Fatal(err)
	}
	rec = d.do("DELETE", "/connections/"+id, nil, true, http.StatusOK)
	if got := dashToast(t, rec); got != "Connection primary deleted." {
		t.Errorf("toast %q", got)
	}
	dashWantEvent(t, rec, views.EventConnectionsChanged)
	doc = dashCheckHTML(t, rec)
	dashFind(t, doc, "#"+views.ConnectionsListID)
	if doc.Find(dashTID(views.RowID(views.RowConn, id))).Length() != 0 {
		t.Error("deleted row still listed")
	}
	if _, err := svc.Get(ctx, id); err == nil {
		t.Fatal("connection still stored")
	}
}

func TestDashboardConnectionValidation(t *testing.T) {
	d := newDashClient(t)
	if _, err := d.app.Server.Connections().Create(context.Background(), services.ConnectionInput{Provider: services.Some("anthropic"),
		Name: services.Some("taken"), APIKey: services.Some("sk-ant-existing-000000")}); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		form  url.Values
		field string // input id
		msg   string
		keep  map[string]string // input id → value kept
	}{
		{"empty name", dashConnForm("name", "", "priority", "7"), "name", "Enter a name.", map[string]string{"priority": "7"}},
		{"name too long", dashConnForm("name", strings.Repeat("n", 65)), "name", "Use at most 64 characters.", nil},
		{"name taken", dashConnForm("provider", "anthropic", "name", "taken"), "name", "This provider already has a connection named 'taken'.", map[string]string{"name": "taken"}},
		{"no provider", dashConnForm("provider", ""), "provider", "Choose a provider.", map[string]string{"name": "main"}},
		{"missing key", dashConnForm("apiKey", ""), "apiKey", "Paste the provider's API key.", nil},
		{"bad base URL", dashConnForm("provider", views.CustomOpenAI, "customId", "fake", "baseUrl", "ftp://fake.example.com"), "baseUrl",
			"Use an http:// or https:// URL.", map[string]string{"baseUrl": "ftp://fake.example.com", "customId": "fake"}},
		{"private base URL", dashConnForm("provider", views.CustomOpenAI, "customId", "fake", "baseUrl", "http://10.1.2.3/v1"), "baseUrl",
			"This address is private. Only local providers may use it, or hosts listed at start-up with --allow-private-upstreams (SWITCHYARD_PRIVATE_UPSTREAMS).", nil},
		{"custom without base URL", dashConnForm("provider", views.CustomAnthropic, "customId", "fake"), "baseUrl", "Enter the base URL of this compatible provider.", nil},
		{"max_concurrent 0", dashConnForm("maxConcurrent", "0"), "maxConcurrent", "Enter a whole number from 1 to 1000, or leave it blank for no limit.", map[string]string{"maxConcurrent": "0"}},
		{"max_concurrent text", dashConnForm("maxConcurrent", "lots"), "maxConcurrent", "Enter a whole number from 1 to 1000, or leave it blank for no limit.", map[string]string{"maxConcurrent": "lots"}},
		{"quota reserve", dashConnForm("quotaReservePercent", "51"), "quotaReservePercent", "Enter a whole number from 0 to 50.", map[string]string{"quotaReservePercent": "51"}},
		{"proxy scheme", dashConnForm("proxyUrl", "ftp://proxy.example.com"), "proxyUrl", "Use http://, https:// or socks5://.", map[string]string{"proxyUrl": "ftp://proxy.example.com"}},
		{"egress group", dashConnForm("egressGroup", "bad group!"), "egressGroup", "Use letters, digits, '-' and '_' (at most 64).", map[string]string{"egressGroup": "bad group!"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rec := d.do("POST", "/connections", tc.form, true, http.StatusUnprocessableEntity)
			doc := dashCheckHTML(t, rec)
			if strings.Contains(rec.Body.String(), dashProviderKeyCanary) {
				t.Fatal("the submitted provider key was rendered back")
			}
			summary := dashFind(t, doc, dashTID(views.ErrorSummaryID))
			if !strings.Contains(summary.Text(), tc.msg) {
				t.Errorf("summary %q lacks %q", summary.Text(), tc.msg)
			}
			if href := summary.Find(`a[href="#` + tc.field + `"]`); href.Length() != 1 {
				t.Errorf("summary has no link to #%s", tc.field)
			}
			ctl := dashFind(t, doc, "#"+tc.field)
			if ctl.AttrOr("aria-invalid", "") != "true" || !strings.Contains(ctl.AttrOr("aria-describedby", ""), tc.field+"-error") {
				t.Errorf("control #%s lacks aria-invalid/aria-describedby", tc.field)
			}
			if _, ok := ctl.Attr("autofocus"); !ok {
				t.Errorf("#%s lacks autofocus", tc.field)
			}
			if got := strings.TrimSpace(doc.Find("#" + tc.field + "-error").Text()); got != tc.msg {
				t.Errorf("inline error %q, want %q", got, tc.msg)
			}
			for id, want := range tc.keep {
				if got := doc.Find("#"+id).AttrOr("value", ""); got != want {
					t.Errorf("#%s = %q, want %q kept", id, got, want)
				}
			}
			if n := doc.Find("[autofocus]").Length(); n != 1 {
				t.Errorf("%d autofocus elements", n)
			}
		})
	}
	conns, _ := d.app.Server.Connections().List(context.Background(), services.ConnectionFilter{})
	if len(conns) != 1 {
		t.Fatalf("a failed form stored something: %d connections", len(conns))
	}
	// Without script the 422 is the whole page with the form.
	rec := d.do("POST", "/connections", dashConnForm("name", ""), false, http.StatusUnprocessableEntity)
	doc := dashCheckHTML(t, rec)
	dashFind(t, doc, "main#content "+dashTID(views.ConnectionFormID)+" "+dashTID(views.ErrorSummaryID))
}

// dashComboForm is a builder form with the given targets ("provider/model").
func dashComboForm(name, strategy string, targets ...string) url.Values {
	v := url.Values{"name": {name}, "strategy": {strategy}, "enabled": {"on"}}
	for i, t := range targets {
		p, m, _ := strings.Cut(t, "/")
		pre := "targets." + strconv.Itoa(i) + "."
		v.Set(pre+"kind", "model")
		v.Set(pre+"provider", p)
		v.Set(pre+"model", m)
		v.Set(pre+"enabled", "true")
	}
	return v
}

func dashWithOp(v url.Values, op string) url.Values {
	out := url.Values{}
	for k, vals := range v {
		out[k] = append([]string(nil), vals...)
	}
	out.Set("op", op)
	return out
}

func dashTargetProviders(doc *goquery.Document) []string {
	var out []string
	doc.Find(`select[name$=".provider"]`).Each(func(_ int, s *goquery.Selection) {
		out = append(out, s.Find("option[selected]").AttrOr("value", ""))
	})
	return out
}

func TestDashboardComboBuilderEditsSaveNothing(t *testing.T) {
	d := newDashClient(t)
	base := dashComboForm("demo", "priority", "openai/gpt-4o", "anthropic/claude-sonnet-4")

	rec := d.do("POST", "/combos/builder", dashWithOp(base, "add-target"), true, http.StatusOK)
	doc := dashCheckHTML(t, rec)
	if strings.Contains(rec.Body.String(), "<html") {
		t.Fatal("builder edit answered a full page to htmx")
	}
	if got := dashTargetProviders(doc); strings.Join(got, ",") != "openai,anthropic," {
		t.Errorf("after add-target: %q", got)
	}
	if _, ok := doc.Find("#targets-2-provider").Attr("autofocus"); !ok {
		t.Error("the new target's provider is not focused")
	}
	if v := doc.Find("input#name").AttrOr("value", ""); v != "demo" {
		t.Errorf("name not kept: %q", v)
	}

	doc = dashCheckHTML(t, d.do("POST", "/combos/builder", dashWithOp(base, "up:1"), true, http.StatusOK))
	if got := dashTargetProviders(doc); strings.Join(got, ",") != "anthropic,openai" {
		t.Errorf("after up:1: %q", got)
	}
	if v := doc.Find("#targets-0-model").AttrOr("value", ""); v != "claude-sonnet-4" {
		t.Errorf("model did not move with its target: %q", v)
	}
	doc = dashCheckHTML(t, d.do("POST", "/combos/builder", dashWithOp(base, "down:0"), true, http.StatusOK))
	if got := dashTargetProviders(doc); strings.Join(got, ",") != "anthropic,openai" {
		t.Errorf("after down:0: %q", got)
	}
	doc = dashCheckHTML(t, d.do("POST", "/combos/builder", dashWithOp(base, "remove-target:0"), true, http.StatusOK))
	if got := dashTargetProviders(doc); strings.Join(got, ",") != "anthropic" {
		t.Errorf("after remove-target:0: %q", got)
	}

	weighted := dashWithOp(base, "strategy")
	weighted.Set("strategy", "weighted")
	doc = dashCheckHTML(t, d.do("POST", "/combos/builder", weighted, true, http.StatusOK))
	info, _ := services.LookupStrategy("weighted")
	if got := doc.Find(dashTID(views.ComboStrategyHelpID)).Text(); got != info.Describe {
		t.Errorf("strategy help %q, want %q", got, info.Describe)
	}
	dashFind(t, doc, "input#targets-0-weight[type=number]")
	if _, ok := doc.Find("#strategy").Attr("autofocus"); !ok {
		t.Error("strategy select not refocused")
	}

	// Without script a builder edit is a full page.
	rec = d.do("POST", "/combos/builder", dashWithOp(base, "add-target"), false, http.StatusOK)
	dashFind(t, dashCheckHTML(t, rec), "main#content "+dashTID(views.ComboFormID))

	if combos, _ := d.app.Server.Combos().List(context.Background()); len(combos) != 0 {
		t.Fatalf("builder edits saved %d combos", len(combos))
	}
}

func TestDashboardCombosCRUD(t *testing.T) {
	d := newDashClient(t)
	ctx := context.Background()
	svc := d.app.Server.Combos()

	rec := d.do("POST", "/combos", dashComboForm("demo", "priority", "openai/gpt-4o", "anthropic/claude-sonnet-4"), true, http.StatusOK)
	dashWantEvent(t, rec, views.EventCombosChanged)
	if got := dashToast(t, rec); got != "Combo demo saved." {
		t.Errorf("toast %q", got)
	}
	redirect := rec.Header().Get("HX-Redirect")
	if !strings.HasPrefix(redirect, "/combos?saved=") {
		t.Fatalf("HX-Redirect %q", redirect)
	}
	rec = d.do("POST", "/combos", dashComboForm("demo2", "weighted", "openai/gpt-4o-mini"), false, http.StatusSeeOther)
	if loc := rec.Header().Get("Location"); !strings.HasPrefix(loc, "/combos?saved=") {
		t.Fatalf("Location %q", loc)
	}
	combos, _ := svc.List(ctx)
	if len(combos) != 2 || combos[0].Name != "demo" || len(combos[0].Targets) != 2 || combos[1].Strategy != "weighted" {
		t.Fatalf("stored %+v", combos)
	}
	demo, demo2 := combos[0], combos[1]
	full, _ := d.page(redirect, views.ComboSavedID, views.RowID(views.RowCombo, demo.ID), views.RowID(views.RowCombo, demo2.ID))
	if got := full.Find(dashTID(views.ComboSavedID)).Text(); got != "Combo demo saved." {
		t.Errorf("flash %q", got)
	}

	// Validation: 422 with the builder as typed.
	type vcase struct {
		name  string
		form  url.Values
		field string
		msg   string
	}
	bad := dashComboForm("x", "weighted", "openai/gpt-4o")
	bad.Set("targets.0.weight", "heavy")
	cfg := dashComboForm("y", "priority", "openai/gpt-4o")
	cfg.Set("config.maxRetries", "9")
	for _, tc := range []vcase{
		{"duplicate name", dashComboForm("demo", "priority", "openai/gpt-4o"), "name", "A combo named 'demo' already exists."},
		{"empty name", dashComboForm("", "priority", "openai/gpt-4o"), "name", "Enter a name."},
		{"invalid name", dashComboForm("combo/x", "priority", "openai/gpt-4o"), "name", services.ComboNameRule},
		{"no target", dashComboForm("lonely", "priority"), "targets", "Add at least one target."},
		{"duplicate target", dashComboForm("twice", "priority", "openai/gpt-4o", "openai/gpt-4o"), "targets-1-model", "Target 2 repeats target 1 (same provider, model and connection)."},
		{"unknown provider", dashComboForm("nowhere", "priority", "/gpt-4o"), "targets-0-provider", "Target 1: choose a provider."},
		{"bad weight", bad, "targets-0-weight", "Target 1: weight must be a whole number from 0 to 100."},
		{"config range", cfg, "config-maxRetries", "Must be a whole number between 0 and 5."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := d.do("POST", "/combos", tc.form, true, http.StatusUnprocessableEntity)
			doc := dashCheckHTML(t, rec)
			dashFind(t, doc, dashTID(views.ComboFormID))
			if s := dashFind(t, doc, dashTID(views.ErrorSummaryID)).Text(); !strings.Contains(s, tc.msg) {
				t.Errorf("summary %q lacks %q", s, tc.msg)
			}
			if got := strings.TrimSpace(doc.Find("#" + tc.field + "-error").Text()); got != tc.msg {
				t.Errorf("inline error %q, want %q", got, tc.msg)
			}
			if v := doc.Find("input#name").AttrOr("value", "?"); v != tc.form.Get("name") {
				t.Errorf("name %q not kept", v)
			}
		})
	}
	if cs, _ := svc.List(ctx); len(cs) != 2 {
		t.Fatalf("failed saves stored combos: %d", len(cs))
	}

	// Edit keeps target ids; PUT answers with HX-Redirect.
	doc := dashCheckHTML(t, d.do("GET", "/combos/"+demo.ID+"/edit", nil, true, http.StatusOK))
	if v := doc.Find(`input[name="targets.0.id"]`).AttrOr("value", ""); v != demo.Targets[0].ID {
		t.Errorf("target id %q", v)
	}
	edit := dashComboForm("demo", "priority", "openai/gpt-4o", "anthropic/claude-sonnet-4")
	edit.Set("description", "fast lane")
	edit.Set("targets.0.id", demo.Targets[0].ID)
	edit.Set("config.maxRetries", "2")
	rec = d.do("PUT", "/combos/"+demo.ID, edit, true, http.StatusOK)
	if rec.Header().Get("HX-Redirect") != "/combos?saved="+demo.ID {
		t.Errorf("HX-Redirect %q", rec.Header().Get("HX-Redirect"))
	}
	got, _ := svc.Get(ctx, demo.ID)
	if got.Description != "fast lane" || got.Targets[0].ID != demo.Targets[0].ID || got.Config.MaxRetries == nil || *got.Config.MaxRetries != 2 {
		t.Fatalf("after edit %+v", got)
	}

	// Enable switch answers with the row.
	rec = d.do("PUT", "/combos/"+demo.ID+"/enabled", url.Values{}, true, http.StatusOK)
	if got := dashToast(t, rec); got != "Combo demo disabled." {
		t.Errorf("toast %q", got)
	}
	dashWantEvent(t, rec, views.EventCombosChanged)
	row := dashFind(t, dashCheckHTML(t, rec), "tr"+dashTID(views.RowID(views.RowCombo, demo.ID)))
	if _, on := row.Find(dashTID(views.RowID(views.RowComboEnabled, demo.ID))).Attr("checked"); on {
		t.Error("switch still on")
	}
	if c, _ := svc.Get(ctx, demo.ID); c.Enabled {
		t.Fatal("still enabled")
	}

	// Move demo2 up: the full order is posted; focus stays on a move button of demo2.
	up := dashFind(t, full, dashTID(views.RowID(views.RowComboUp, demo2.ID)))
	var vals map[string]string
	if err := json.Unmarshal([]byte(up.AttrOr("hx-vals", "")), &vals); err != nil {
		t.Fatal(err)
	}
	if vals["ids"] != demo2.ID+","+demo.ID {
		t.Fatalf("Move up posts %q", vals["ids"])
	}
	rec = d.do("POST", "/combos/reorder", url.Values{"ids": {vals["ids"]}, "focus": {vals["focus"]}}, true, http.StatusOK)
	dashWantEvent(t, rec, views.EventCombosChanged)
	doc = dashCheckHTML(t, rec)
	var order []string
	doc.Find("tbody tr[data-testid]").Each(func(_ int, s *goquery.Selection) { order = append(order, s.AttrOr("data-testid", "")) })
	if strings.Join(order, ",") != views.RowID(views.RowCombo, demo2.ID)+","+views.RowID(views.RowCombo, demo.ID) {
		t.Errorf("order %q", order)
	}
	if _, ok := doc.Find(dashTID(views.RowID(views.RowComboDown, demo2.ID))).Attr("autofocus"); !ok {
		t.Error("the moved row keeps no focus")
	}
	if cs, _ := svc.List(ctx); cs[0].ID != demo2.ID {
		t.Fatal("order not stored")
	}
	// A stale order (a combo missing) changes nothing and shows the current list.
	rec = d.do("POST", "/combos/reorder", url.Values{"ids": {demo.ID}}, true, http.StatusUnprocessableEntity)
	dashFind(t, dashCheckHTML(t, rec), dashTID(views.RowID(views.RowCombo, demo2.ID)))
	if got := dashToast(t, rec); got != "The combo list changed meanwhile; this is the current order." {
		t.Errorf("toast %q", got)
	}
	if cs, _ := svc.List(ctx); cs[0].ID != demo2.ID {
		t.Fatal("a stale reorder changed the order")
	}

	// Duplicate: a disabled "-copy" row.
	rec = d.do("POST", "/combos/"+demo.ID+"/duplicate", nil, true, http.StatusOK)
	if got := dashToast(t, rec); got != "Combo duplicated as demo-copy (disabled)." {
		t.Errorf("toast %q", got)
	}
	cs, _ := svc.List(ctx)
	if len(cs) != 3 || cs[2].Name != "demo-copy" || cs[2].Enabled {
		t.Fatalf("after duplicate %+v", cs)
	}
	dashFind(t, dashCheckHTML(t, rec), dashTID(views.RowID(views.RowCombo, cs[2].ID)))

	// Delete a referenced combo: the confirmation lists who refers to it and forces.
	outer, _, err := svc.Create(ctx, services.ComboInput{Name: "outer", Targets: []services.Target{{Kind: services.KindCombo, ComboID: demo.ID}, {Provider: "openai", Model: "o3"}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := d.app.Server.Keys().Create(ctx, services.KeyInput{Name: services.Some("demo-only"), AllowedCombos: services.Some([]string{"demo"})}); err != nil {
		t.Fatal(err)
	}
	d.do("DELETE", "/combos/"+demo.ID, nil, true, http.StatusConflict)
	doc = dashCheckHTML(t, d.do("GET", "/combos/"+demo.ID+"/confirm-delete", nil, true, http.StatusOK))
	panel := dashFind(t, doc, dashTID(views.ConfirmPanelID))
	if txt := panel.Text(); !strings.Contains(txt, "outer") || !strings.Contains(txt, "demo-only") {
		t.Errorf("confirmation %q", txt)
	}
	submit := doc.Find(dashTID(views.ConfirmSubmitID))
	if submit.AttrOr("hx-delete", "") != "/combos/"+demo.ID || submit.AttrOr("hx-vals", "") != `{"force":"1"}` {
		t.Errorf("confirm button %v", submit.Nodes[0].Attr)
	}
	rec = d.do("DELETE", "/combos/"+demo.ID, url.Values{"force": {"1"}}, true, http.StatusOK)
	if got := dashToast(t, rec); got != "Combo demo deleted." {
		t.Errorf("toast %q", got)
	}
	doc = dashCheckHTML(t, rec)
	if doc.Find(dashTID(views.RowID(views.RowCombo, demo.ID))).Length() != 0 {
		t.Error("deleted row still listed")
	}
	if o, _ := svc.Get(ctx, outer.ID); len(o.Targets) != 1 {
		t.Errorf("reference not removed from outer: %+v", o.Targets)
	}
}

func dashKeyForm(kv ...string) url.Values {
	v := url.Values{"name": {"browser-test"}, "enabled": {"on"}, "scopes": {services.ScopeInference},
		"allowedModelsAny": {"on"}, "allowedCombosAny": {"on"}, "allowedConnectionsAny": {"on"}}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] == "-" {
			v.Del(kv[i])
			continue
		}
		v.Set(kv[i], kv[i+1])
	}
	return v
}

func TestDashboardKeysCRUDAndOneTimeSecret(t *testing.T) {
	d := newDashClient(t)
	ctx := context.Background()
	s := dashSeed(t, d.app)
	svc := d.app.Server.Keys()

	start := len(d.bodies)
	rec := d.do("POST", "/keys", dashKeyForm(), true, http.StatusOK)
	createIdx := len(d.bodies) - 1
	dashWantEvent(t, rec, views.EventKeysChanged)
	doc := dashCheckHTML(t, rec)
	panel := dashFind(t, doc, dashTID(views.KeySecretPanelID))
	if panel.AttrOr("hx-history", "") != "false" {
		t.Error("secret panel lacks hx-history=false")
	}
	if _, ok := panel.Attr("data-dismissible"); !ok {
		t.Error("secret panel is not dismissible")
	}
	if h := strings.TrimSpace(panel.Find("h2").Text()); h != "Copy your new key now" {
		t.Errorf("heading %q", h)
	}
	secret := panel.Find("input"+dashTID(views.KeySecretValueID)).AttrOr("value", "")
	if !strings.HasPrefix(secret, services.KeyPrefix) {
		t.Fatalf("secret %q", secret)
	}
	if _, ok := panel.Find(dashTID(views.KeySecretValueID)).Attr("readonly"); !ok {
		t.Error("secret field is not read-only")
	}
	dashFind(t, doc, dashTID(views.KeySecretCopyID)+`[data-copy-target="`+views.KeySecretValueID+`"]`)
	if !strings.Contains(panel.Text(), "This is the only time Switchyard shows this key. It stores only a hash.") {
		t.Error("warning sentence missing")
	}
	if curl := panel.Find(dashTID(views.KeySecretCurlID)).Text(); !strings.Contains(curl, "Authorization: Bearer "+secret) || !strings.Contains(curl, "http://example.com/v1/chat/completions") {
		t.Errorf("curl %q", curl)
	}
	if dismiss := dashFind(t, doc, dashTID(views.KeySecretDismissID)); strings.TrimSpace(dismiss.Text()) != "I have stored it" {
		t.Errorf("dismiss button %q", dismiss.Text())
	} else if _, ok := dismiss.Attr("data-dismiss"); !ok {
		t.Error("dismiss button lacks data-dismiss")
	}
	k, err := svc.Authenticate(secret)
	if err != nil || k.Name != "browser-test" {
		t.Fatalf("the shown secret does not authenticate: %v", err)
	}
	dashFind(t, doc, "#"+views.KeysListID+`[hx-swap-oob="outerHTML"] `+dashTID(views.RowID(views.RowKey, k.ID)))

	// Reloading never shows it again.
	d.page("/keys", views.RowID(views.RowKey, k.ID))
	d.page("/keys/"+k.ID+"/edit", views.KeyFormID)
	d.page("/")
	d.page("/keys/" + k.ID + "/confirm-revoke")
	for i, b := range d.bodies[start:] {
		if n := strings.Count(b, secret); (start+i == createIdx) != (n > 0) {
			t.Errorf("response %d shows the secret %d times", start+i, n)
		}
	}

	// Without script: the full page with the panel, not a redirect.
	rec = d.do("POST", "/keys", dashKeyForm("name", "no-js"), false, http.StatusOK)
	full := dashCheckHTML(t, rec)
	dashFind(t, full, "main#content "+dashTID(views.KeySecretPanelID))
	if cc := rec.Header().Get("Cache-Control"); cc != "no-store" {
		t.Errorf("Cache-Control %q", cc)
	}

	// Edit: allowlists with and without "Any".
	upd := dashKeyForm("name", "renamed", "allowedModelsAny", "-", "allowedModels", "openai/*\n*/gpt-4o*",
		"allowedCombosAny", "-", "allowedCombos", s.combo.Name, "allowedCombosPatterns", "team-*",
		"allowedConnectionsAny", "-", "requestsPerMinute", "60", "expiresAt", "2027-01-31")
	rec = d.do("PUT", "/keys/"+k.ID, upd, true, http.StatusOK)
	if got := dashToast(t, rec); got != "Key renamed saved." {
		t.Errorf("toast %q", got)
	}
	k, _ = svc.Get(ctx, k.ID)
	if k.Name != "renamed" || strings.Join(k.AllowedModels, "|") != "openai/*|*/gpt-4o*" ||
		strings.Join(k.AllowedCombos, "|") != "team-*|fast" || k.AllowedConnections == nil || len(k.AllowedConnections) != 0 ||
		k.RequestsPerMinute == nil || *k.RequestsPerMinute != 60 || k.ExpiresAt == nil || k.ExpiresAt.Format("2006-01-02") != "2027-01-31" {
		t.Fatalf("after edit %+v", k)
	}
	doc = dashCheckHTML(t, d.do("GET", "/keys/"+k.ID+"/edit", nil, true, http.StatusOK))
	if _, on := doc.Find(dashTID("allowedCombosAny")).Attr("checked"); on {
		t.Error("combo Any switch on for a restricted key")
	}
	if _, ticked := doc.Find(`input[name="allowedCombos"][value="fast"]`).Attr("checked"); !ticked {
		t.Error("allowed combo not ticked")
	}
	if got := doc.Find("#allowedCombosPatterns").Text(); got != "team-*" {
		t.Errorf("patterns %q", got)
	}
	if got := doc.Find("#expiresAt").AttrOr("value", ""); got != "2027-01-31" {
		t.Errorf("expiry %q", got)
	}

	// Revoke through the confirmation; the row stays, greyed.
	doc = dashCheckHTML(t, d.do("GET", "/keys/"+k.ID+"/confirm-revoke", nil, true, http.StatusOK))
	if doc.Find(dashTID(views.ConfirmSubmitID)).AttrOr("hx-post", "") != "/keys/"+k.ID+"/revoke" {
		t.Error("confirm does not post the revoke")
	}
	rec = d.do("DELETE", "/keys/"+k.ID, nil, true, http.StatusConflict)
	if got := dashToast(t, rec); got != "Revoke the key before deleting it." {
		t.Errorf("409 toast %q", got)
	}
	rec = d.do("POST", "/keys/"+k.ID+"/revoke", nil, true, http.StatusOK)
	if got := dashToast(t, rec); got != "Key renamed revoked." {
		t.Errorf("toast %q", got)
	}
	row := dashFind(t, dashCheckHTML(t, rec), "tr"+dashTID(views.RowID(views.RowKey, k.ID)))
	if !row.HasClass("row--muted") || !strings.Contains(row.Find(`td[data-label="State"]`).Text(), "revoked") {
		t.Error("revoked row not greyed with its state")
	}
	dashFind(t, dashCheckHTML(t, rec), dashTID(views.RowID(views.RowKeyDelete, k.ID)))
	if _, err := svc.Authenticate(secret); err == nil {
		t.Fatal("revoked key still authenticates")
	}

	// Delete the revoked key.
	d.page("/keys/"+k.ID+"/confirm-delete", views.ConfirmPanelID)
	rec = d.do("DELETE", "/keys/"+k.ID, nil, true, http.StatusOK)
	if got := dashToast(t, rec); got != "Key renamed deleted." {
		t.Errorf("toast %q", got)
	}
	if dashCheckHTML(t, rec).Find(dashTID(views.RowID(views.RowKey, k.ID))).Length() != 0 {
		t.Error("deleted key still listed")
	}
	if _, err := svc.Get(ctx, k.ID); err == nil {
		t.Fatal("key still stored")
	}
}

func TestDashboardKeyValidation(t *testing.T) {
	d := newDashClient(t)
	s := dashSeed(t, d.app)
	for _, tc := range []struct {
		name, field, msg string
		form             url.Values
		keep             map[string]string
	}{
		{"empty name", "name", "Enter a name.", dashKeyForm("name", ""), nil},
		{"name too long", "name", "Use at most 64 characters.", dashKeyForm("name", strings.Repeat("k", 65)), nil},
		{"lease without connections", "allowedConnections", "A key with lease:exclusive needs at least one allowed connection.",
			dashKeyForm("scopes", services.ScopeLeaseExclusive), map[string]string{"name": "browser-test"}},
		{"lease with an empty list", "allowedConnections", "A key with lease:exclusive needs at least one allowed connection.",
			dashKeyForm("scopes", services.ScopeLeaseExclusive, "allowedConnectionsAny", "-"), nil},
		{"bad model pattern", "allowedModels", "Line 2: enter a model name such as openai/gpt-4o; * matches any run of characters.",
			dashKeyForm("allowedModelsAny", "-", "allowedModels", "openai/*\ngpt 4o"), nil},
		{"rpm not a number", "requestsPerMinute", "Enter a whole number, or leave it blank for no limit.",
			dashKeyForm("requestsPerMinute", "fast"), map[string]string{"requestsPerMinute": "fast"}},
		{"concurrency negative", "maxConcurrentRequests", "Enter a whole number, or leave it blank for no limit.",
			dashKeyForm("maxConcurrentRequests", "-3"), map[string]string{"maxConcurrentRequests": "-3"}},
		{"expiry in the past", "expiresAt", "Choose a date in the future.", dashKeyForm("expiresAt", "2020-01-01"), map[string]string{"expiresAt": "2020-01-01"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := d.do("POST", "/keys", tc.form, true, http.StatusUnprocessableEntity)
			doc := dashCheckHTML(t, rec)
			if doc.Find(dashTID(views.KeySecretPanelID)).Length() != 0 || doc.Find("#"+views.KeySecretValueID).Length() != 0 {
				t.Fatal("a failed create shows a secret")
			}
			if sum := dashFind(t, doc, dashTID(views.ErrorSummaryID)).Text(); !strings.Contains(sum, tc.msg) {
				t.Errorf("summary %q lacks %q", sum, tc.msg)
			}
			if got := strings.TrimSpace(doc.Find("#" + tc.field + "-error").Text()); got != tc.msg {
				t.Errorf("inline error %q, want %q", got, tc.msg)
			}
			ctl := dashFind(t, doc, "#"+tc.field)
			if _, ok := ctl.Attr("autofocus"); !ok || ctl.AttrOr("aria-invalid", "") != "true" {
				t.Errorf("#%s lacks autofocus or aria-invalid", tc.field)
			}
			for id, want := range tc.keep {
				if got := doc.Find("#"+id).AttrOr("value", ""); got != want {
					t.Errorf("#%s = %q, want %q", id, got, want)
				}
			}
		})
	}
	if keys, _ := d.app.Server.Keys().List(context.Background(), ""); len(keys) != 1 || keys[0].ID != s.key.ID {
		t.Fatalf("failed creates stored keys: %d", len(keys))
	}
	// Edit validation keeps the form in edit mode.
	rec := d.do("PUT", "/keys/"+s.key.ID, dashKeyForm("name", ""), true, http.StatusUnprocessableEntity)
	if dashCheckHTML(t, rec).Find(dashTID(views.KeyFormID)).AttrOr("hx-put", "") != "/keys/"+s.key.ID {
		t.Error("edit form lost its target")
	}
}

// dashRoute is one dashboard route of this package, with ids to fill in.
type dashRoute struct{ method, path string }

// dashRoutes lists the resource routes; "{c}", "{cb}" and "{k}" stand
// for a connection, combo and key id.
var dashRoutes = []dashRoute{
	{"GET", "/"}, {"GET", "/connections"}, {"GET", "/connections/new"}, {"GET", "/connections/form-fields?provider=openai"},
	{"POST", "/connections"}, {"GET", "/connections/{c}/edit"}, {"PUT", "/connections/{c}"}, {"PUT", "/connections/{c}/enabled"},
	{"GET", "/connections/{c}/confirm-delete"}, {"DELETE", "/connections/{c}"},
	{"GET", "/combos"}, {"GET", "/combos/new"}, {"GET", "/combos/{cb}/edit"}, {"POST", "/combos/builder"}, {"POST", "/combos"},
	{"PUT", "/combos/{cb}"}, {"PUT", "/combos/{cb}/enabled"}, {"POST", "/combos/reorder"}, {"POST", "/combos/{cb}/duplicate"},
	{"GET", "/combos/{cb}/confirm-delete"}, {"DELETE", "/combos/{cb}"},
	{"GET", "/keys"}, {"GET", "/keys/new"}, {"POST", "/keys"}, {"GET", "/keys/{k}/edit"}, {"PUT", "/keys/{k}"},
	{"GET", "/keys/{k}/confirm-revoke"}, {"POST", "/keys/{k}/revoke"}, {"GET", "/keys/{k}/confirm-delete"}, {"DELETE", "/keys/{k}"},
}

func (r dashRoute) fill(c, cb, k string) string {
	return strings.NewReplacer("{c}", c, "{cb}", cb, "{k}", k).Replace(r.path)
}

func TestDashboardUnknownIDIsNotFound(t *testing.T) {
	d := newDashClient(t)
	for _, r := range dashRoutes {
		if !strings.Contains(r.path, "{") {
			continue
		}
		path := r.fill("c_missing", "cb_missing", "k_missing")
		t.Run(r.method+" "+path, func(t *testing.T) {
			rec := d.do(r.method, path, url.Values{"name": {"x"}}, true, http.StatusNotFound)
			if rec.Body.Len() != 0 {
				t.Errorf("htmx 404 has a body: %q", dashTrunc(rec.Body.String(), 200))
			}
			var toast struct{ Level, Text string }
			_ = json.Unmarshal(dashEvents(t, rec)[views.EventShowToast], &toast)
			if toast.Level != "error" || toast.Text != "Nothing here. It may have been deleted." {
				t.Errorf("toast %+v", toast)
			}
			if r.method != "GET" {
				return
			}
			rec = d.do(r.method, path, nil, false, http.StatusNotFound)
			doc := dashParse(t, rec)
			if !strings.Contains(rec.Body.String(), "<html") || strings.TrimSpace(doc.Find(dashTID("error-message")).Text()) != "Nothing here. It may have been deleted." {
				t.Errorf("not-found page: %s", dashTrunc(rec.Body.String(), 500))
			}
		})
	}
}

func TestDashboardWithoutSessionRedirectsToLogin(t *testing.T) {
	d := newDashClient(t)
	s := dashSeed(t, d.app)
	d.cookie = nil
	for _, r := range dashRoutes {
		path := r.fill(s.conn.ID, s.combo.ID, s.key.ID)
		t.Run(r.method+" "+path, func(t *testing.T) {
			rec := d.do(r.method, path, nil, false, http.StatusSeeOther)
			if loc := rec.Header().Get("Location"); !strings.HasPrefix(loc, "/login?next=") {
				t.Errorf("Location %q", loc)
			}
			if r.method == "GET" {
				if loc := rec.Header().Get("Location"); loc != "/login?next="+url.QueryEscape(path) {
					t.Errorf("Location %q, want next=%s", loc, path)
				}
			}
			rec = d.do(r.method, path, nil, true, http.StatusUnauthorized)
			if hx := rec.Header().Get("HX-Redirect"); !strings.HasPrefix(hx, "/login?next=") {
				t.Errorf("HX-Redirect %q", hx)
			}
		})
	}
	// An expired session id is treated like no session.
	d.cookie = &http.Cookie{Name: "switchyard_session", Value: "forged"}
	d.do("GET", "/connections", nil, true, http.StatusUnauthorized)
}

// dashSnapshot is everything a mutation could change.
func dashSnapshot(t *testing.T, d *dashClient) string {
	t.Helper()
	ctx := context.Background()
	conns, err := d.app.Server.Connections().List(ctx, services.ConnectionFilter{})
	if err != nil {
		t.Fatal(err)
	}
	combos, _ := d.app.Server.Combos().List(ctx)
	keys, _ := d.app.Server.Keys().List(ctx, "")
	b, _ := json.Marshal([]any{conns, combos, keys})
	return string(b)
}

func TestDashboardCrossSiteMutationsAreRefused(t *testing.T) {
	d := newDashClient(t)
	s := dashSeed(t, d.app)
	before := dashSnapshot(t, d)
	forms := map[string]url.Values{
		"/connections":    dashConnForm("name", "cross"),
		"/combos":         dashComboForm("cross", "priority", "openai/gpt-4o"),
		"/keys":           dashKeyForm("name", "cross"),
		"/combos/reorder": {"ids": {s.combo.ID}},
	}
	n := 0
	for _, r := range dashRoutes {
		if r.method == "GET" {
			continue
		}
		n++
		path := r.fill(s.conn.ID, s.combo.ID, s.key.ID)
		form := forms[r.path]
		if form == nil {
			form = url.Values{"name": {"cross"}, "enabled": {"on"}}
		}
		for _, site := range []string{"cross-site", "same-site"} {
			req := d.req(r.method, path, form, true)
			req.Header.Set("Sec-Fetch-Site", site)
			rec := d.send(req)
			if rec.Code != http.StatusForbidden {
				t.Errorf("%s %s from %s: status %d, want 403", r.method, path, site, rec.Code)
			}
		}
		// An Origin from elsewhere without Sec-Fetch-Site is refused too.
		req := d.req(r.method, path, form, false)
		req.Header.Del("Sec-Fetch-Site")
		req.Header.Set("Origin", "https://evil.example")
		if rec := d.send(req); rec.Code != http.StatusForbidden {
			t.Errorf("%s %s with a foreign Origin: status %d, want 403", r.method, path, rec.Code)
		}
	}
	if n < 15 {
		t.Fatalf("only %d mutation routes walked", n)
	}
	if after := dashSnapshot(t, d); after != before {
		t.Fatalf("a refused request changed state:\nbefore %s\nafter  %s", before, after)
	}
	// The same request from the dashboard itself works.
	d.do("PUT", "/connections/"+s.conn.ID+"/enabled", url.Values{}, true, http.StatusOK)
}

func TestDashboardCSPNonceAndNoInlineCode(t *testing.T) {
	d := newDashClient(t)
	s := dashSeed(t, d.app)
	for _, r := range dashRoutes {
		if r.method != "GET" {
			continue
		}
		path := r.fill(s.conn.ID, s.combo.ID, s.key.ID)
		for _, htmx := range []bool{false, true} {
			rec := d.do("GET", path, nil, htmx, http.StatusOK)
			doc := dashCheckHTML(t, rec)
			if !htmx && doc.Find("script").Length() != 2 {
				t.Errorf("GET %s: %d scripts, want htmx and app.js", path, doc.Find("script").Length())
			}
		}
	}
	// Responses to mutations and 422 re-renders follow the same rules.
	dashCheckHTML(t, d.do("POST", "/connections", dashConnForm("name", ""), false, http.StatusUnprocessableEntity))
	dashCheckHTML(t, d.do("POST", "/keys", dashKeyForm(), false, http.StatusOK))
	dashCheckHTML(t, d.do("POST", "/combos/builder", dashWithOp(dashComboForm("x", "weighted", "openai/gpt-4o"), "add-target"), false, http.StatusOK))
}

func TestDashboardProviderSecretsNeverRendered(t *testing.T) {
	d := newDashClient(t)
	ctx := context.Background()
	s := dashSeed(t, d.app)
	for _, r := range dashRoutes {
		if r.method == "GET" {
			path := r.fill(s.conn.ID, s.combo.ID, s.key.ID)
			d.do("GET", path, nil, false, http.StatusOK)
			d.do("GET", path, nil, true, http.StatusOK)
		}
	}
	// A failed edit with a new key does not echo it; saving the form as shown
	// (masked proxy URL, empty key field) keeps both secrets.
	const newKey = "sk-canary-REPLACEMENT-0c9d8e7f6a5b"
	d.do("PUT", "/connections/"+s.conn.ID, dashConnForm("apiKey", newKey, "maxConcurrent", "0"), true, http.StatusUnprocessableEntity)
	edit := dashParse(t, d.do("GET", "/connections/"+s.conn.ID+"/edit", nil, true, http.StatusOK))
	shown := edit.Find("#proxyUrl").AttrOr("value", "")
	if shown != "http://user:****@proxy.example.com:8080" {
		t.Fatalf("proxy shown as %q", shown)
	}
	d.do("PUT", "/connections/"+s.conn.ID, dashConnForm("apiKey", "", "proxyUrl", shown), true, http.StatusOK)
	c, _ := d.app.Server.Connections().Get(ctx, s.conn.ID)
	if c.Credentials.APIKey.Reveal() != dashProviderKeyCanary || !strings.Contains(c.ProxyURL.Reveal(), dashProxyCanary) {
		t.Fatal("saving the edit form as shown changed a stored secret")
	}
	d.do("GET", "/connections", nil, false, http.StatusOK)
	d.do("POST", "/keys", dashKeyForm("allowedConnectionsAny", "-", "allowedConnections", s.conn.ID), true, http.StatusOK)
	for i, b := range d.bodies {
		for _, canary := range []string{dashProviderKeyCanary, dashProxyCanary, newKey, testkit.AdminPassword} {
			if strings.Contains(b, canary) {
				t.Errorf("response %d contains the secret %q", i, canary)
			}
		}
	}
	if cookie := d.cookie.Value; cookie != "" {
		for i, b := range d.bodies {
			if strings.Contains(b, cookie) {
				t.Errorf("response %d contains the session cookie", i)
			}
		}
	}
}

func TestDashboardConnectionRowShowsCooldownAndLastError(t *testing.T) {
	const secretKey = "test-secret-key-0123456789abcdef0123456789" // testkit.Keyring's secret
	a := testkit.NewApp(t, testkit.WithEnv("SWITCHYARD_SECRET_KEY", secretKey))
	d := &dashClient{t: t, app: a, cookie: a.Login()}
	s := dashSeed(t, a)
	ctx := context.Background()
	store := models.NewConnectionStateStore(testkit.OpenDBAt(t, filepath.Join(a.DataDir, "switchyard.db"), a.Clock.Now))
	c := s.conn
	now := a.Clock.Now()
	until, at := now.Add(84*time.Second), now.Add(-3*time.Minute)
	c.State.RateLimitedUntil, c.State.BackoffLevel, c.State.LastErrorAt = &until, 3, &at
	c.State.LastErrorStatus, c.State.ErrorCode, c.State.LastErrorReason = 429, "rate_limit_exceeded", "rate_limit"
	c.State.LastError = "Rate limit reached. " + strings.Repeat("Slow down. ", 15)
	if err := store.SaveConnectionState(ctx, c.ID, c.State); err != nil {
		t.Fatal(err)
	}
	full, _ := d.page("/connections", views.RowID(views.RowConn, c.ID))
	row := full.Find(dashTID(views.RowID(views.RowConn, c.ID)))
	if got := strings.TrimSpace(row.Find(dashTID(views.RowID(views.RowConnStatus, c.ID))).Text()); got != "cooling" {
		t.Errorf("status %q", got)
	}
	countdown := dashFind(t, full, dashTID(views.RowID(views.RowConn, c.ID))+` time[data-remaining-ms="84000"]`)
	if countdown.Text() != "1 m 24 s" || countdown.AttrOr("datetime", "") != views.RFC3339(until) {
		t.Errorf("countdown %q datetime %q", countdown.Text(), countdown.AttrOr("datetime", ""))
	}
	if cell := row.Find(`td[data-label="Cooldown"]`).Text(); !strings.Contains(cell, "backoff 3") || !strings.Contains(cell, "rate limit") {
		t.Errorf("cooldown cell %q", cell)
	}
	errCell := row.Find(`td[data-label="Last error"]`)
	if !strings.Contains(errCell.Text(), "429 rate_limit_exceeded") || !strings.Contains(errCell.Text(), "3 min ago") {
		t.Errorf("last error cell %q", errCell.Text())
	}
	if short := errCell.Find(".small").First().Text(); len([]rune(short)) != 120 || !strings.HasSuffix(short, "…") {
		t.Errorf("short message %d runes: %q", len([]rune(short)), short)
	}
	if full := errCell.Find("details .disclosure__body").Text(); full != c.State.LastError {
		t.Errorf("full message %q", full)
	}
}
