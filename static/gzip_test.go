package static

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"testing"
)

func TestServeGzip(t *testing.T) {
	for _, name := range []string{HTMX, AppJS, AppCSS} {
		want, err := files.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		res := get(t, http.MethodGet, URL(name), http.Header{"Accept-Encoding": {"gzip, deflate, br"}})
		if res.StatusCode != http.StatusOK || res.Header.Get("Content-Encoding") != "gzip" {
			t.Fatalf("%s: %d, Content-Encoding %q", name, res.StatusCode, res.Header.Get("Content-Encoding"))
		}
		if res.Header.Get("Vary") != "Accept-Encoding" || res.Header.Get("Cache-Control") != CacheControl {
			t.Errorf("%s: Vary %q, Cache-Control %q", name, res.Header.Get("Vary"), res.Header.Get("Cache-Control"))
		}
		raw := readBody(t, res)
		zr, err := gzip.NewReader(bytes.NewReader(raw))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got, err := io.ReadAll(zr)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%s: the gzip body does not decode to the file (%v)", name, err)
		}
		if len(raw) >= len(want)/2 {
			t.Errorf("%s: %d bytes compressed of %d", name, len(raw), len(want))
		}
		t.Logf("%s: %d bytes, %d gzip", name, len(want), len(raw))

		// Each encoding has its own validator; a revalidation with it is 304.
		etag := res.Header.Get("ETag")
		plain := get(t, http.MethodGet, URL(name), nil)
		if plain.Header.Get("Content-Encoding") != "" || plain.Header.Get("Vary") != "Accept-Encoding" || !bytes.Equal(readBody(t, plain), want) {
			t.Errorf("%s without Accept-Encoding: encoding %q, Vary %q", name, plain.Header.Get("Content-Encoding"), plain.Header.Get("Vary"))
		}
		if etag == plain.Header.Get("ETag") || etag == "" {
			t.Errorf("%s: the gzip ETag %q equals the identity one", name, etag)
		}
		if res := get(t, http.MethodGet, URL(name), http.Header{"Accept-Encoding": {"gzip"}, "If-None-Match": {etag}}); res.StatusCode != http.StatusNotModified {
			t.Errorf("%s: If-None-Match with the gzip ETag: %d", name, res.StatusCode)
		}
	}
}

func TestAcceptsGzip(t *testing.T) {
	for _, c := range []struct {
		header string
		want   bool
	}{
		{"", false},
		{"gzip", true},
		{"GZIP", true},
		{"deflate, gzip;q=0.8", true},
		{"x-gzip", true},
		{"gzip;q=0", false},
		{"gzip; q=0.000", false},
		{"br, deflate", false},
		{"*", true},
		{"*;q=0", false},
		{"gzip;q=0, *", false},
		{"identity", false},
	} {
		var values []string
		if c.header != "" {
			values = []string{c.header}
		}
		if got := acceptsGzip(values); got != c.want {
			t.Errorf("Accept-Encoding %q: %v, want %v", c.header, got, c.want)
		}
	}
}
