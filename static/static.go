package static

import (
	"bytes"
	"compress/gzip"
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
	// gz is body gzip-compressed once at start-up (nil when compressing
	// does not pay, as for an already small file), served to browsers that
	// accept gzip under its own ETag gzETag.
	gz     []byte
	gzETag string
}

// compressible are the content types worth compressing: text. (Images in
// other formats are compressed already.)
var compressible = map[string]bool{
	".js":  true,
	".css": true,
	".svg": true,
}

// gzipBody compresses b at the best level: it runs once per asset, so the
// time does not matter and every transfer is smaller. It returns nil when
// the result would not save at least a tenth.
func gzipBody(b []byte) []byte {
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		panic(fmt.Sprintf("static: gzip: %v", err))
	}
	if _, err := zw.Write(b); err != nil {
		panic(fmt.Sprintf("static: gzip: %v", err))
	}
	if err := zw.Close(); err != nil {
		panic(fmt.Sprintf("static: gzip: %v", err))
	}
	if buf.Len() > len(b)*9/10 {
		return nil
	}
	return buf.Bytes()
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
		a := asset{body: body, hash: full[:hashLen], etag: `"` + full + `"`, contentType: ctype}
		if compressible[path.Ext(name)] {
			if a.gz = gzipBody(body); a.gz != nil {
				a.gzETag = `"` + full + `-gzip"`
			}
		}
		m[name] = a
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
// requests are honoured). Text assets go gzip-compressed to clients that accept it
// (compressed once, at first use), with Vary: Accept-Encoding and an ETag of their own. An unknown name, or a hash that is not the current content's (a page
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
	body, etag := a.body, a.etag
	if a.gz != nil {
		// Caches must keep the two encodings apart.
		h.Add("Vary", "Accept-Encoding")
		if acceptsGzip(r.Header.Values("Accept-Encoding")) {
			h.Set("Content-Encoding", "gzip")
			body, etag = a.gz, a.gzETag
		}
	}
	h.Set("ETag", etag)
	// A zero modification time keeps Last-Modified out; the ETag covers revalidation.
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(body))
}

// acceptsGzip reads Accept-Encoding (RFC 9110 §12.5.3): gzip (or x-gzip, or
// *) listed with a non-zero weight.
func acceptsGzip(values []string) bool {
	star := false
	for _, v := range values {
		for _, part := range strings.Split(v, ",") {
			coding, params, _ := strings.Cut(strings.TrimSpace(part), ";")
			coding = strings.ToLower(strings.TrimSpace(coding))
			zero := false
			for _, p := range strings.Split(params, ";") {
				k, val, ok := strings.Cut(strings.TrimSpace(p), "=")
				if ok && strings.EqualFold(strings.TrimSpace(k), "q") {
					val = strings.TrimSpace(val)
					zero = strings.Trim(val, "0.") == "" // q=0, q=0.0, q=0.000
				}
			}
			switch coding {
			case "gzip", "x-gzip":
				return !zero
			case "*":
				star = !zero
			}
		}
	}
	return star
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
