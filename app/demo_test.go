package app_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"switchyard/internal/testkit"
)

func demoKeys(t *testing.T, r *testkit.Running) (client, admin string) {
	t.Helper()
	cl, err := r.Stdout.WaitFor("demo client key: ", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	ad, err := r.Stdout.WaitFor("demo admin key: ", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Stdout.WaitFor("try: curl ", 5*time.Second); err != nil {
		t.Fatal(err)
	}
	return strings.TrimPrefix(cl, "demo client key: "), strings.TrimPrefix(ad, "demo admin key: ")
}

func TestDemoFromFreshDataDirAndReuse(t *testing.T) {
	dir := t.TempDir()
	env := map[string]string{"SWITCHYARD_DATA_DIR": dir}
	for round := 0; round < 2; round++ {
		r := testkit.StartApp(t, []string{"--demo"}, env)
		client, admin := demoKeys(t, r)
		if !strings.HasPrefix(client, "sk-sy-") || !strings.HasPrefix(admin, "sk-sy-") {
			t.Fatalf("keys %q %q", client, admin)
		}
		// The demo combo serves through its fallbacks.
		req, _ := http.NewRequest("POST", r.BaseURL+"/v1/chat/completions",
			strings.NewReader(`{"model":"demo","messages":[{"role":"user","content":"Hello"}]}`))
		req.Header.Set("Authorization", "Bearer "+client)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("round %d: demo request %d %s", round, resp.StatusCode, b)
		}
		// The admin key manages; the data is not duplicated on reuse.
		req, _ = http.NewRequest("GET", r.BaseURL+"/api/connections?provider=demo", nil)
		req.Header.Set("Authorization", "Bearer "+admin)
		resp, err = http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var list struct{ Items []json.RawMessage }
		json.NewDecoder(resp.Body).Decode(&list)
		resp.Body.Close()
		if resp.StatusCode == 200 && len(list.Items) != 3 {
			t.Fatalf("round %d: %d demo connections, want 3", round, len(list.Items))
		}
		// /v1/models lists the combo and the demo models.
		req, _ = http.NewRequest("GET", r.BaseURL+"/v1/models", nil)
		req.Header.Set("Authorization", "Bearer "+client)
		resp, _ = http.DefaultClient.Do(req)
		b, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		for _, want := range []string{`"demo"`, `"demo/demo-fast"`, `"demo/demo-limited"`, `"demo/demo-flaky"`} {
			if !strings.Contains(string(b), want) {
				t.Fatalf("round %d: /v1/models lacks %s: %s", round, want, b)
			}
		}
		if err := r.Stop(); err != nil {
			t.Fatal(err)
		}
	}
}

// The demo shows a rate limit (00-overview.md): demo/demo-limited answers
// the client 429 with Retry-After, while the demo combo still serves
// through its failover and demo-fast stays healthy; a misspelled bare
// model name is offered the demo model it resembles.
func TestDemoShowsRateLimitAndFailover(t *testing.T) {
	r := testkit.StartApp(t, []string{"--demo"}, map[string]string{"SWITCHYARD_DATA_DIR": t.TempDir()})
	client, _ := demoKeys(t, r)
	post := func(model string) (*http.Response, string) {
		req, _ := http.NewRequest("POST", r.BaseURL+"/v1/chat/completions",
			strings.NewReader(`{"model":"`+model+`","messages":[{"role":"user","content":"Hello"}]}`))
		req.Header.Set("Authorization", "Bearer "+client)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp, string(b)
	}
	for i := 0; i < 2; i++ {
		resp, b := post("demo/demo-limited")
		if resp.StatusCode != 429 || resp.Header.Get("Retry-After") == "" {
			t.Fatalf("demo/demo-limited #%d: %d Retry-After %q %s", i, resp.StatusCode, resp.Header.Get("Retry-After"), b)
		}
		for _, m := range []string{"demo", "demo/demo-fast"} {
			if resp, b := post(m); resp.StatusCode != 200 {
				t.Fatalf("%s after a 429: %d %s", m, resp.StatusCode, b)
			}
		}
	}
	resp, b := post("demo-fsat")
	if resp.StatusCode != 404 || !strings.Contains(b, `"demo-fast"`) {
		t.Fatalf("demo-fsat: %d %s", resp.StatusCode, b)
	}
}
