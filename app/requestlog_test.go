package app_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"switchyard/internal/fakeupstream"
	"switchyard/services"
)

// waitLogs polls (bounded) until n rows exist.
func waitLogs(t *testing.T, f *gwFixture, n int) []services.RequestLogEntry {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		page, err := f.app.Server.RequestLogs().ListRequestLogs(context.Background(), services.RequestLogQuery{Limit: 500})
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Items) >= n || time.Now().After(deadline) {
			if len(page.Items) < n {
				t.Fatalf("%d log rows, want %d", len(page.Items), n)
			}
			return page.Items
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestRequestLogRowForEveryRequestWithoutSecrets(t *testing.T) {
	f := newGW(t, "fk-limited", "fk-good")
	f.fu.Script("fk-limited", fakeupstream.Step{Status: 429, RetryAfter: "3"})
	const sessionCanary = "session-canary-9b1f0c7d"
	ok := f.post(t, chatBody, "X-Session-Id", sessionCanary, "X-Request-Id", "client-corr-1")
	io.ReadAll(ok.Body)
	st := f.post(t, streamBody, "X-Switchyard-Session", sessionCanary)
	io.ReadAll(st.Body)
	bad := f.post(t, `{"model":"nosuch","messages":[{"role":"user","content":"x"}]}`)
	io.ReadAll(bad.Body)
	req, _ := http.NewRequest("POST", f.url+"/v1/chat/completions", strings.NewReader(chatBody))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer sk-sy-"+strings.Repeat("Z", 43))
	resp, _ := http.DefaultClient.Do(req)
	io.ReadAll(resp.Body)
	resp.Body.Close()

	rows := waitLogs(t, f, 4)
	byID := map[string]services.RequestLogEntry{}
	for _, r := range rows {
		byID[r.ID] = r
	}
	okRow := byID[ok.Header.Get("X-Switchyard-Request-Id")]
	if okRow.Status != 200 || okRow.Attempts != 2 || okRow.ConnectionID != f.conns["fk-good"].ID || okRow.Outcome != "failover" ||
		okRow.ClientRequestID != "client-corr-1" || len(okRow.AttemptLog) != 2 || okRow.AttemptLog[0].Outcome != "rate_limit" {
		t.Fatalf("served row %+v", okRow)
	}
	stRow := byID[st.Header.Get("X-Switchyard-Request-Id")]
	if !stRow.Stream || stRow.StreamOutcome != "completed" || stRow.TtftMs == nil {
		t.Fatalf("stream row %+v", stRow)
	}
	badRow := byID[bad.Header.Get("X-Switchyard-Request-Id")]
	if badRow.Status != 404 || badRow.ErrorCode != "model_not_found" || badRow.Attempts != 0 {
		t.Fatalf("rejected row %+v", badRow)
	}
	unauth := byID[resp.Header.Get("X-Switchyard-Request-Id")]
	if unauth.Status != 401 || unauth.ErrorCode != "invalid_api_key" {
		t.Fatalf("unauthenticated row %+v", unauth)
	}
	// Canaries: neither the client key, the provider keys nor the session id reach the database.
	f.app.Server.Close()
	files, _ := filepath.Glob(filepath.Join(f.app.DataDir, "switchyard.db*"))
	for _, fn := range files {
		b, _ := os.ReadFile(fn)
		for _, canary := range []string{f.key, sessionCanary, "fk-limited", "fk-good"} {
			if bytes.Contains(b, []byte(canary)) {
				t.Errorf("%s contains %q", filepath.Base(fn), canary)
			}
		}
	}
}
