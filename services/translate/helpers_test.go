package translate

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// body parses a JSON object the way the gateway hands it over.
func body(t *testing.T, s string) map[string]json.RawMessage {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatalf("bad test body %s: %v", s, err)
	}
	return m
}

// jsonEqual fails unless got and want are the same JSON value.
func jsonEqual(t *testing.T, got []byte, want string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, got)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("bad expectation: %v\n%s", err, want)
	}
	if !reflect.DeepEqual(g, w) {
		t.Fatalf("JSON mismatch\n got: %s\nwant: %s", compact(got), compact([]byte(want)))
	}
}

func compact(b []byte) string {
	var buf bytes.Buffer
	if json.Compact(&buf, b) != nil {
		return string(b)
	}
	return buf.String()
}

// codes lists warning codes.
func codes(ws []Warning) []string {
	out := []string{}
	for _, w := range ws {
		out = append(out, w.Code)
	}
	return out
}

func wantCodes(t *testing.T, ws []Warning, want ...string) {
	t.Helper()
	got := codes(ws)
	if want == nil {
		want = []string{}
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("warnings = %v, want %v", got, want)
	}
	for _, w := range ws {
		if w.Message == "" {
			t.Fatalf("warning %s has no message", w.Code)
		}
	}
}

// path reads a value out of decoded JSON: path(v, "messages", 0, "role").
func path(t *testing.T, b []byte, keys ...any) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, b)
	}
	for _, k := range keys {
		switch k := k.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				t.Fatalf("path %v: not an object at %q in %s", keys, k, b)
			}
			v = m[k]
		case int:
			a, ok := v.([]any)
			if !ok || k >= len(a) {
				t.Fatalf("path %v: no index %d in %s", keys, k, b)
			}
			v = a[k]
		}
	}
	return v
}

// sseFrame is one parsed client frame.
type sseFrame struct {
	event string
	data  map[string]any
	raw   string
}

// parseFrames checks the SSE framing of every frame and decodes its data.
func parseFrames(t *testing.T, frames [][]byte, wantEvent bool) []sseFrame {
	t.Helper()
	var out []sseFrame
	for _, f := range frames {
		s := string(f)
		if !strings.HasSuffix(s, "\n\n") {
			t.Fatalf("frame not terminated by a blank line: %q", s)
		}
		ev, payload := parseFrame(f)
		if wantEvent && ev == "" || !wantEvent && ev != "" {
			t.Fatalf("frame event line (want %v): %q", wantEvent, s)
		}
		var m map[string]any
		if err := json.Unmarshal(payload, &m); err != nil {
			t.Fatalf("frame data is not a JSON object: %q", s)
		}
		if wantEvent && m["type"] != ev {
			t.Fatalf("event %q carries type %v", ev, m["type"])
		}
		out = append(out, sseFrame{event: ev, data: m, raw: s})
	}
	return out
}
