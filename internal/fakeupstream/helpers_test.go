package fakeupstream_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"switchyard/internal/fakeupstream"
)

func TestMain(m *testing.M) {
	// Every handler, stall and timer of the fake must end by Close; goleak proves it.
	goleak.VerifyTestMain(m)
}

// client talks to one fake with its own transport, closed at cleanup so no connection goroutine
// outlives the test.
type client struct {
	t    *testing.T
	hc   *http.Client
	base string
}

func newClient(t *testing.T, fu *fakeupstream.Server) *client {
	t.Helper()
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return &client{t: t, hc: &http.Client{Transport: tr}, base: fu.URL()}
}

// send posts body to path with the credential placed the way each API expects.
func (c *client) send(ctx context.Context, method, path, key, body string) (*http.Response, error) {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		c.t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if path == "/v1/messages" {
		req.Header.Set("x-api-key", key)
		req.Header.Set("anthropic-version", "2023-06-01")
	} else if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	return c.hc.Do(req)
}

// must sends and fails the test on a transport error.
func (c *client) must(method, path, key, body string) *http.Response {
	c.t.Helper()
	resp, err := c.send(context.Background(), method, path, key, body)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	c.t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// chat sends an OpenAI chat request and returns status and body.
func (c *client) chat(key, model string) (int, []byte) {
	c.t.Helper()
	resp := c.must("POST", "/v1/chat/completions", key, openAIReq(model, false, false, "hi"))
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatalf("read body: %v", err)
	}
	return resp.StatusCode, b
}

func newRequest(ctx context.Context, method, url, body string) (*http.Request, error) {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	return http.NewRequestWithContext(ctx, method, url, rd)
}

func openAIReq(model string, stream, includeUsage bool, text string) string {
	m := map[string]any{"model": model, "stream": stream,
		"messages": []any{map[string]any{"role": "system", "content": "be brief"}, map[string]any{"role": "user", "content": text}}}
	if includeUsage {
		m["stream_options"] = map[string]any{"include_usage": true}
	}
	return mustJSON(m)
}

func anthropicReq(model string, stream bool, text string) string {
	return mustJSON(map[string]any{"model": model, "stream": stream, "max_tokens": 64,
		"messages": []any{map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": text}}}}})
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

type sseEvent struct{ Event, Data string }

// sseReader parses a stream incrementally, so a test can act after the k-th event.
type sseReader struct{ br *bufio.Reader }

func newSSE(r io.Reader) *sseReader { return &sseReader{br: bufio.NewReader(r)} }

// Next returns the next complete event; io.EOF at a clean end between events.
func (r *sseReader) Next() (sseEvent, error) {
	var ev sseEvent
	var data []string
	seen := false
	for {
		line, err := r.br.ReadString('\n')
		if err != nil {
			if err == io.EOF && (seen || line != "") {
				return ev, io.ErrUnexpectedEOF
			}
			return ev, err
		}
		line = strings.TrimRight(line, "\r\n")
		if line == "" {
			if seen {
				ev.Data = strings.Join(data, "\n")
				return ev, nil
			}
			continue
		}
		seen = true
		if v, ok := strings.CutPrefix(line, "event: "); ok {
			ev.Event = v
		} else if v, ok := strings.CutPrefix(line, "data: "); ok {
			data = append(data, v)
		}
	}
}

// readAll returns every complete event and the error that ended the stream (nil for a clean EOF).
func (r *sseReader) readAll() ([]sseEvent, error) {
	var out []sseEvent
	for {
		ev, err := r.Next()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, ev)
	}
}

// openAIDeltas extracts choices[0].delta.content of content chunks (not the role chunk).
func openAIDeltas(t *testing.T, evs []sseEvent) []string {
	t.Helper()
	var out []string
	for _, ev := range evs {
		if ev.Data == "[DONE]" {
			continue
		}
		var c struct {
			Choices []struct {
				Delta struct {
					Role    string  `json:"role"`
					Content *string `json:"content"`
				} `json:"delta"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(ev.Data), &c); err != nil {
			continue
		}
		if len(c.Choices) == 1 && c.Choices[0].Delta.Role == "" && c.Choices[0].Delta.Content != nil {
			out = append(out, *c.Choices[0].Delta.Content)
		}
	}
	return out
}

// waitEnded waits (bounded) for hit seq's handler to return.
func waitEnded(t *testing.T, fu *fakeupstream.Server, seq int64, within time.Duration) fakeupstream.Hit {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	h, err := fu.WaitEnded(ctx, seq)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// onlyHit waits for the single hit of a test to end and returns it.
func onlyHit(t *testing.T, fu *fakeupstream.Server) fakeupstream.Hit {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	hits, err := fu.WaitHits(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(hits) != 1 {
		t.Fatalf("got %d hits, want 1: %+v", len(hits), hits)
	}
	return waitEnded(t, fu, hits[0].Seq, 5*time.Second)
}

// testSeed is the seed of randomized tests: fixed, or SWITCHYARD_SEED to replay a failure.
func testSeed(t *testing.T, def uint64) uint64 {
	t.Helper()
	seed := def
	if v := os.Getenv("SWITCHYARD_SEED"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("SWITCHYARD_SEED=%q: %v", v, err)
		}
		seed = n
	}
	t.Logf("seed=%d", seed)
	return seed
}

func errorCode(t *testing.T, body []byte) (typ, code, msg string) {
	t.Helper()
	var e struct {
		Type  string `json:"type"`
		Error struct {
			Type    string  `json:"type"`
			Code    *string `json:"code"`
			Message string  `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(body, &e); err != nil {
		t.Fatalf("error body %q: %v", body, err)
	}
	if e.Error.Code != nil {
		code = *e.Error.Code
	}
	return e.Error.Type, code, e.Error.Message
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(fmt.Sprintf("unexpected error: %v", err))
	}
	return v
}
