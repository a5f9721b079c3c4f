package gateway

// Fuzz targets of request decoding (60-quality R14, FuzzChatRequest /
// FuzzMessagesRequest in the matrix): beyond "no panic", the limits on depth
// and message count hold, every refusal is a typed 400, and decode → encode
// → decode is stable. Per commit the seed corpus runs as plain tests; the
// LONG campaign runs each target with -fuzz.

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
)

// fuzzLimits are tight so that the fuzzer reaches them.
var fuzzLimits = Limits{MaxBodyBytes: 1 << 20, MaxJSONDepth: 8, MaxMessages: 4}

// jsonDepth is the nesting depth of a valid JSON document, from the
// standard decoder's token stream (the reference CheckDepth must agree with).
func jsonDepth(b []byte) int {
	dec := json.NewDecoder(bytes.NewReader(b))
	depth, maxDepth := 0, 0
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return maxDepth
		}
		if err != nil {
			return -1
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			depth++
			maxDepth = max(maxDepth, depth)
		case json.Delim('}'), json.Delim(']'):
			depth--
		}
	}
}

var parseSeeds = []string{
	`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`,
	`{"model":"fake/m1","stream":true,"messages":[{"role":"system","content":"s"},{"role":"user","content":[{"type":"text","text":"x"}]}],"max_tokens":5,"n":2}`,
	`{"model":"combo","messages":[{"role":"tool","content":"{\"a\":[1,2,{\"b\":null}]}","tool_call_id":"c1"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}]}`,
	`{"model":"m","messages":[{"role":"user","content":"\"\\\"[[[[[[[[[[[[\""}]}`,
	`{"model":"m","messages":[{"role":"user","content":[[[[[[[[[[1]]]]]]]]]]}]}`,
	`{"model":"m","messages":[{"role":"user","content":"a"},{"role":"user","content":"b"},{"role":"user","content":"c"},{"role":"user","content":"d"},{"role":"user","content":"e"}]}`,
	`{"model":"","messages":[]}`,
	`{"model":"m\u0000x","messages":[{"role":"user","content":"x"}]}`,
	`{"model":"m","messages":[{"role":"wizard","content":"x"}],"stream":"yes"}`,
	`{"model":"claude-3-5-haiku","max_tokens":16,"messages":[{"role":"user","content":"hi"}],"system":"be brief"}`,
	`]]]]{"model":"m","messages":[{"role":"user","content":"x"}]}`,
	`[1,2,3]`, `null`, `{}`, ``, `{"model":1}`,
}

// checkParsed asserts the properties every parse answer must have.
func checkParsed(t *testing.T, body []byte, top map[string]json.RawMessage, model string, gerr interface {
	Error() string
}, status int, code string, reparse func([]byte) (string, bool, bool)) {
	t.Helper()
	if gerr != nil {
		if status != 400 || code != "invalid_request" {
			t.Fatalf("refusal is not a typed 400: %d %s (%s)", status, code, gerr.Error())
		}
		return
	}
	if ValidateModel(model) != nil {
		t.Fatalf("accepted an invalid model %q", model)
	}
	if d := jsonDepth(body); d < 0 || d > fuzzLimits.MaxJSONDepth {
		t.Fatalf("accepted a body of depth %d (limit %d): %q", d, fuzzLimits.MaxJSONDepth, body)
	}
	var msgs []json.RawMessage
	_ = json.Unmarshal(top["messages"], &msgs)
	if len(msgs) > fuzzLimits.MaxMessages {
		t.Fatalf("accepted %d messages (limit %d)", len(msgs), fuzzLimits.MaxMessages)
	}
	enc, err := json.Marshal(top)
	if err != nil {
		t.Fatalf("re-encode: %v", err)
	}
	m2, _, ok := reparse(enc)
	if !ok || m2 != model {
		t.Fatalf("decode → encode → decode changed the answer: model %q → %q (ok %v)\n%s", model, m2, ok, enc)
	}
}

func FuzzParseChat(f *testing.F) {
	for _, s := range parseSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		top, model, stream, gerr := ParseChat(body, fuzzLimits)
		var (
			status int
			code   string
			e      interface{ Error() string }
		)
		if gerr != nil {
			status, code, e = gerr.Status, gerr.Code, gerr
		}
		checkParsed(t, body, top, model, e, status, code, func(b []byte) (string, bool, bool) {
			_, m, s, err := ParseChat(b, fuzzLimits)
			return m, s, err == nil && s == stream
		})
	})
}

func FuzzParseMessages(f *testing.F) {
	for _, s := range parseSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		top, model, stream, gerr := ParseMessages(body, fuzzLimits)
		var (
			status int
			code   string
			e      interface{ Error() string }
		)
		if gerr != nil {
			status, code, e = gerr.Status, gerr.Code, gerr
		}
		checkParsed(t, body, top, model, e, status, code, func(b []byte) (string, bool, bool) {
			_, m, s, err := ParseMessages(b, fuzzLimits)
			return m, s, err == nil && s == stream
		})
	})
}

// FuzzCheckDepth: for every valid JSON document CheckDepth refuses exactly
// when the nesting exceeds the limit, whatever strings and escapes hold;
// for any input it never panics.
func FuzzCheckDepth(f *testing.F) {
	for _, s := range parseSeeds {
		f.Add([]byte(s), uint8(8))
	}
	f.Add([]byte(`["\\", "\"[", {"a":"]]]]"}]`), uint8(2))
	f.Add([]byte(strings.Repeat("[", 65)+strings.Repeat("]", 65)), uint8(64))
	f.Add([]byte(`{"a":{"b":{"c":[]}}}`), uint8(3))
	f.Fuzz(func(t *testing.T, b []byte, limit uint8) {
		err := CheckDepth(b, int(limit))
		if !json.Valid(b) {
			return
		}
		d := jsonDepth(b)
		if refused := err != nil; refused != (d > int(limit)) {
			t.Fatalf("depth %d, limit %d: CheckDepth refused=%v for %q", d, limit, refused, b)
		}
		if err != nil && (err.Status != 400 || err.Code != "invalid_request") {
			t.Fatalf("refusal %+v is not a typed 400", err)
		}
	})
}
