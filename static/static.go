package static

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"net/http"
	"path"
	"strings"
	"sync"
	"time"
)

// Asset names, as passed to [URL]. The htmx file name carries its version: it is the newest
// 2.0.x build of the npm package htmx.org, and the major version stays pinned because htmx 4
// changes defaults the dashboard relies on (50-dashboard.md §9).
const (
	HTMX    = "htmx-2.0.11.min.js"
	AppJS   = "app.js"
	AppCSS  = "app.css"
	Favicon = "favicon.svg"
	Icons   = "icons.svg"
)

// Prefix is the path under which [Handler] serves the assets; [URL] returns paths below it.
const Prefix = "/static/"

// CacheControl is sent with every asset. The URL changes whenever the content does, so the
// browser may keep a copy for a year without asking again.
const CacheControl = "public, max-age=31536000, immutable"

// hashLen is the number of hex digits of the content hash in a URL: 48 bits of SHA-256 are
// plenty to tell two builds of the same file apart.
const hashLen = 12

//go:embed htmx-2.0.11.min.js app.css app.js favicon.svg icons.svg
var files embed.FS

type asset struct {
	body        []byte
	hash        string // first hashLen hex digits of the SHA-256 of body
	etag        string // quoted full SHA-256
	contentType string
}

// contentTypes is explicit rather than left to mime.TypeByExtension, whose answer depends
// on the host's mime tables.
var contentTypes = map[string]string{
	".js":  "text/javascript; charset=utf-8",
	".css": "text/css; charset=utf-8",
	".svg": "image/svg+xml",
}

// assets hashes every embedded file once, on first use. The files are part of the binary, so
// a failure here is a build mistake and panics.
var assets = sync.OnceValue(func() map[string]asset {
	entries, err := fs.ReadDir(files, ".")
	if err != nil {
		panic(fmt.Sprintf("static: read embedded files: %v", err))
	}
	m := make(map[string]asset, len(entries))
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		name := e.Name()
		body, err := files.ReadFile(name)
		if err != nil {
			panic(fmt.Sprintf("static: read %s: %v", name, err))
		}
		ctype, ok := contentTypes[path.Ext(name)]
		if !ok {
			panic(fmt.Sprintf("static: no content type for %s", name))
		}
		sum := sha256.Sum256(body)
		full := hex.EncodeToString(sum[:])
		m[name] = asset{body: body, hash: full[:hashLen], etag: `"` + full + `"`, contentType: ctype}
	}
	return m
})

// URL returns the path at which [Handler] serves the named asset, "/static/<hash>/<name>",
// where hash is a short hex digest of the file's content.
//
// It panics for a name that is not an embedded asset. Names are the constants of this
// package, so an unknown one is a programming error; panicking makes the first render in any
// test fail loudly instead of shipping a page with a broken link.
func URL(name string) string {
	a, ok := assets()[name]
	if !ok {
		panic(fmt.Sprintf("static: unknown asset %q", name))
	}
	return Prefix + a.hash + "/" + name
}

// Handler serves GET and HEAD for /static/<hash>/<name>: the asset with its content type,
// [CacheControl], X-Content-Type-Options: nosniff and a strong ETag (conditional and range
// requests are honoured). An unknown name, or a hash that is not the current content's (a page
// from an older build, say), answers 404; other methods answer 405.
//
// The handler reads the full request path, so mount it without stripping the prefix, e.g.
// e.Match([]string{http.MethodGet, http.MethodHead}, "/static/*", echo.WrapHandler(static.Handler())).
func Handler() http.Handler {
	return http.HandlerFunc(serve)
}

func serve(w http.ResponseWriter, r *http.Request) {
	a, ok := lookup(r.URL.Path)
	if !ok {
		w.Header().Set("Cache-Control", "no-store")
		http.NotFound(w, r)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "405 method not allowed", http.StatusMethodNotAllowed)
		return
	}
	h := w.Header()
	h.Set("Content-Type", a.contentType)
	h.Set("Cache-Control", CacheControl)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("ETag", a.etag)
	// A zero modification time keeps Last-Modified out; the ETag covers revalidation.
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(a.body))
}

// Known reports whether urlPath names a current asset (the app answers
// unknown ones with its own 404 page, security headers included).
func Known(urlPath string) bool {
	_, ok := lookup(urlPath)
	return ok
}

// lookup resolves "/static/<hash>/<name>" to an asset whose current hash is <hash>.
func lookup(urlPath string) (asset, bool) {
	rest, ok := strings.CutPrefix(urlPath, Prefix)
	if !ok {
		return asset{}, false
	}
	hash, name, ok := strings.Cut(rest, "/")
	if !ok {
		return asset{}, false
	}
	a, ok := assets()[name]
	if !ok || hash != a.hash {
		return asset{}, false
	}
	return a, true
}
