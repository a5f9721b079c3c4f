package static

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
)

var allNames = []string{HTMX, AppJS, AppCSS, Favicon, Icons}

func get(t *testing.T, method, target string, header http.Header) *http.Response {
	t.Helper()
	req := httptest.NewRequest(method, target, nil)
	for k, vs := range header {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	rec := httptest.NewRecorder()
	Handler().ServeHTTP(rec, req)
	return rec.Result()
}

func readBody(t *testing.T, res *http.Response) []byte {
	t.Helper()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("read body: %v", err)
	}
	return b
}

func TestURLFormat(t *testing.T) {
	for _, name := range allNames {
		t.Run(name, func(t *testing.T) {
			u := URL(name)
			re := regexp.MustCompile(`^/static/[0-9a-f]{12}/` + regexp.QuoteMeta(name) + `$`)
			if !re.MatchString(u) {
				t.Fatalf("URL(%q) = %q, want /static/<12 hex>/%s", name, u, name)
			}
			if again := URL(name); again != u {
				t.Fatalf("URL(%q) not stable: %q then %q", name, u, again)
			}
		})
	}
}

func TestURLHashIsContentHash(t *testing.T) {
	for _, name := range allNames {
		body, err := files.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(body)
		want := Prefix + hex.EncodeToString(sum[:])[:12] + "/" + name
		if got := URL(name); got != want {
			t.Errorf("URL(%q) = %q, want %q", name, got, want)
		}
	}
}

func TestURLsDifferByContent(t *testing.T) {
	seen := map[string]string{}
	for _, name := range allNames {
		hash := strings.Split(URL(name), "/")[2]
		if other, dup := seen[hash]; dup {
			t.Errorf("%s and %s share hash %s", name, other, hash)
		}
		seen[hash] = name
	}
}

func TestURLUnknownPanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("URL of an unknown asset did not panic")
		}
	}()
	URL("nope.js")
}

func TestEveryEmbeddedFileHasAConstant(t *testing.T) {
	known := map[string]bool{}
	for _, n := range allNames {
		known[n] = true
	}
	for name := range assets() {
		if !known[name] {
			t.Errorf("embedded file %s has no exported name constant", name)
		}
	}
	if len(assets()) != len(allNames) {
		t.Errorf("%d embedded files, %d constants", len(assets()), len(allNames))
	}
}

func TestServe(t *testing.T) {
	tests := []struct {
		name, ctype string
	}{
		{HTMX, "text/javascript; charset=utf-8"},
		{AppJS, "text/javascript; charset=utf-8"},
		{AppCSS, "text/css; charset=utf-8"},
		{Favicon, "image/svg+xml"},
		{Icons, "image/svg+xml"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			want, err := files.ReadFile(tc.name)
			if err != nil {
				t.Fatal(err)
			}
			res := get(t, http.MethodGet, URL(tc.name), nil)
			if res.StatusCode != http.StatusOK {
				t.Fatalf("status %d, want 200", res.StatusCode)
			}
			for header, value := range map[string]string{
				"Content-Type":           tc.ctype,
				"Cache-Control":          "public, max-age=31536000, immutable",
				"X-Content-Type-Options": "nosniff",
			} {
				if got := res.Header.Get(header); got != value {
					t.Errorf("%s = %q, want %q", header, got, value)
				}
			}
			if res.Header.Get("ETag") == "" {
				t.Error("no ETag")
			}
			if got := readBody(t, res); !bytes.Equal(got, want) {
				t.Errorf("body differs from the embedded file (%d vs %d bytes)", len(got), len(want))
			}
		})
	}
}

func TestServeHead(t *testing.T) {
	res := get(t, http.MethodHead, URL(AppCSS), nil)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("status %d, want 200", res.StatusCode)
	}
	if got := res.Header.Get("Content-Type"); got != "text/css; charset=utf-8" {
		t.Errorf("Content-Type = %q", got)
	}
	if body := readBody(t, res); len(body) != 0 {
		t.Errorf("HEAD answered %d body bytes", len(body))
	}
}

func TestServeConditional(t *testing.T) {
	first := get(t, http.MethodGet, URL(AppJS), nil)
	etag := first.Header.Get("ETag")
	res := get(t, http.MethodGet, URL(AppJS), http.Header{"If-None-Match": {etag}})
	if res.StatusCode != http.StatusNotModified {
		t.Fatalf("status %d with matching If-None-Match, want 304", res.StatusCode)
	}
}

func TestServeNotFound(t *testing.T) {
	good := URL(AppCSS)
	hash := strings.Split(good, "/")[2]
	otherHash := strings.Split(URL(AppJS), "/")[2]
	tests := []struct {
		name, path string
	}{
		{"wrong hash", "/static/000000000000/" + AppCSS},
		{"another file's hash", "/static/" + otherHash + "/" + AppCSS},
		{"hash prefix only", "/static/" + hash[:6] + "/" + AppCSS},
		{"unknown file", "/static/" + hash + "/missing.css"},
		{"no hash", "/static/" + AppCSS},
		{"directory", "/static/" + hash + "/"},
		{"traversal", "/static/" + hash + "/../" + AppCSS},
		{"nested name", "/static/" + hash + "/x/" + AppCSS},
		{"bare prefix", "/static/"},
		{"outside prefix", "/" + hash + "/" + AppCSS},
		{"embedded source name", "/static/" + hash + "/static.go"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := get(t, http.MethodGet, tc.path, nil)
			if res.StatusCode != http.StatusNotFound {
				t.Fatalf("GET %s: status %d, want 404", tc.path, res.StatusCode)
			}
			if cc := res.Header.Get("Cache-Control"); strings.Contains(cc, "immutable") {
				t.Errorf("404 is cacheable: %q", cc)
			}
		})
	}
}

func TestServeMethodNotAllowed(t *testing.T) {
	for _, method := range []string{http.MethodPost, http.MethodPut, http.MethodDelete} {
		res := get(t, method, URL(AppJS), nil)
		if res.StatusCode != http.StatusMethodNotAllowed {
			t.Errorf("%s: status %d, want 405", method, res.StatusCode)
		}
		if allow := res.Header.Get("Allow"); allow != "GET, HEAD" {
			t.Errorf("%s: Allow = %q", method, allow)
		}
	}
}

// The vendored build must be the version its file name claims.
func TestHTMXVersion(t *testing.T) {
	body, _ := files.ReadFile(HTMX)
	version := strings.TrimSuffix(strings.TrimPrefix(HTMX, "htmx-"), ".min.js")
	if !strings.HasPrefix(version, "2.0.") {
		t.Fatalf("htmx file %s is not a 2.0.x build", HTMX)
	}
	if !bytes.Contains(body, []byte(`version:"`+version+`"`)) {
		t.Errorf("%s does not contain version %s", HTMX, version)
	}
}

// CSP (style-src 'self', default-src 'none') and "nothing external" (50-dashboard.md §1, §9).
func TestAssetsReferenceNothingExternal(t *testing.T) {
	external := regexp.MustCompile(`(?i)(https?:)?//[a-z0-9.-]+\.[a-z]{2,}/`)
	for _, name := range []string{AppCSS, AppJS} {
		body, _ := files.ReadFile(name)
		for _, m := range external.FindAll(body, -1) {
			// The SVG namespace name is an identifier, never fetched.
			if string(m) == "http://www.w3.org/" {
				continue
			}
			t.Errorf("%s references an external URL: %q", name, m)
		}
	}
	css, _ := files.ReadFile(AppCSS)
	for _, banned := range []string{"@import", "url(http", "@font-face"} {
		if bytes.Contains(css, []byte(banned)) {
			t.Errorf("app.css contains %q", banned)
		}
	}
}

func TestAppJSHasNoEval(t *testing.T) {
	js, _ := files.ReadFile(AppJS)
	for _, banned := range []string{"eval(", "new Function", "innerHTML", "outerHTML", "insertAdjacentHTML", "document.write"} {
		if bytes.Contains(js, []byte(banned)) {
			t.Errorf("app.js contains %q", banned)
		}
	}
}

func TestCSSBracesBalance(t *testing.T) {
	css, _ := files.ReadFile(AppCSS)
	// Strip comments so braces inside them do not count.
	stripped := regexp.MustCompile(`(?s)/\*.*?\*/`).ReplaceAll(css, nil)
	depth := 0
	for i, c := range stripped {
		switch c {
		case '{':
			depth++
		case '}':
			depth--
			if depth < 0 {
				t.Fatalf("unbalanced '}' at byte %d of comment-stripped app.css", i)
			}
		}
	}
	if depth != 0 {
		t.Fatalf("app.css ends %d braces deep", depth)
	}
}

// Classes that templates rely on (see the contract in the package report) must exist.
func TestCSSDefinesContractClasses(t *testing.T) {
	css, _ := files.ReadFile(AppCSS)
	for _, class := range []string{
		"visually-hidden", "skip-link", "topbar", "sidebar", "menu", "nav__link", "main",
		"incident-badge", "banner--demo", "banner--warning", "card", "tiles", "tile",
		"table", "table-wrap", "field", "field__help", "field__error", "error-summary",
		"btn", "btn--primary", "btn--secondary", "btn--danger", "btn--small", "btn--icon",
		"badge", "badge--healthy", "badge--cooling", "badge--locked", "badge--terminal",
		"badge--disabled", "badge--closed", "badge--degraded", "badge--open", "badge--half-open",
		"badge--active", "badge--revoked", "badge--expired", "toasts", "toast", "toast--error",
		"toast--success", "toast--info", "toast--warning", "drawer", "drawer__panel", "confirm",
		"is-stale", "stale-note", "htmx-indicator", "htmx-request", "empty", "secret", "chip",
		"code", "copy-btn", "row", "muted", "stack", "grid",
	} {
		if !regexp.MustCompile(`\.` + regexp.QuoteMeta(class) + `[\s,.:{\[>)]`).Match(css) {
			t.Errorf("app.css has no rule for .%s", class)
		}
	}
	if !bytes.Contains(css, []byte("content: attr(data-label)")) {
		t.Error("app.css does not label stacked table cells from data-label")
	}
	for _, media := range []string{"prefers-color-scheme: dark", "prefers-reduced-motion: reduce", "max-width: 1023.98px", "max-width: 699.98px"} {
		if !bytes.Contains(css, []byte(media)) {
			t.Errorf("app.css has no %q media query", media)
		}
	}
}

func TestIconSpriteSymbols(t *testing.T) {
	sprite, _ := files.ReadFile(Icons)
	for _, id := range []string{
		"check", "clock", "lock", "ban", "alert", "x", "copy", "refresh", "plus", "trash",
		"edit", "play", "chevron-up", "chevron-down", "menu", "info", "logo",
	} {
		if !bytes.Contains(sprite, []byte(`<symbol id="`+id+`"`)) {
			t.Errorf("icons.svg has no symbol %q", id)
		}
	}
}

// The strings templates and the browser test depend on (50-dashboard.md §2–§4, §9).
func TestAppJSContract(t *testing.T) {
	js, _ := files.ReadFile(AppJS)
	for _, want := range []string{
		`"toasts"`, `"show-toast"`, "data-poll", "data-remaining-ms", "data-copy-target",
		"data-drawer", "data-drawer-close", "data-autofocus", "data-dismiss", "data-dismissible",
		"htmx:beforeRequest", "htmx:responseError", "htmx:sendError", "htmx:afterSwap",
		"htmx:afterSettle", "htmx:load", "visibilitychange", `"refresh"`, "is-stale", "stale-note",
		"Couldn't refresh — retrying", "expired — eligible on next request",
		"Press Ctrl+C to copy", `"Copied"`, "isSecureContext", "performance.now()",
	} {
		if !bytes.Contains(js, []byte(want)) {
			t.Errorf("app.js does not mention %s", want)
		}
	}
}
