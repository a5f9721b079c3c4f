package app_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"switchyard/internal/fakeupstream"
	"switchyard/internal/testkit"
	"switchyard/services"
)

// TestHardeningUpstreamEchoedCredentialRedacted (issue 17 item 4, wiring):
// an upstream that answers 401 with the key it received — a short key no
// pattern recognises, or a GLM-style <id>.<secret> key, verbatim, URL-encoded,
// base64 or only its secret half — gets the exact credential redacted from
// the client's error, connections.last_error, GET /api/connections and the
// Connections page. Before, each of these showed the key.
func TestHardeningUpstreamEchoedCredentialRedacted(t *testing.T) {
	fu := fakeupstream.Start(t, fakeupstream.WithEvents(2))
	a := testkit.NewRealApp(t, map[string]string{"SWITCHYARD_PRIVATE_UPSTREAMS": fu.Addr()}, nil)
	patchResilience(t, a, `{"waitForCooldown":{"enabled":false}}`)
	plain := "AbCdEf123456GhIjKl"
	glmID, glmSecret := "0123456789abcdef0123456789abcdef", "Zq9sEcReTgLm7Tok"
	glm := glmID + "." + glmSecret
	cases := []struct {
		name, key, message string
		stream             bool
		leak               []string
	}{
		{"short key verbatim", plain, "Incorrect API key provided: " + plain + ".", false, []string{plain}},
		{"short key url-encoded in a stream", plain + "/+", "key " + url.QueryEscape(plain+"/+") + " rejected", true, []string{url.QueryEscape(plain + "/+"), plain}},
		{"short key base64", plain, "token " + base64.StdEncoding.EncodeToString([]byte(plain)) + " is not valid", false, []string{base64.StdEncoding.EncodeToString([]byte(plain))}},
		{"glm key whole", glm, "invalid api key " + glm, false, []string{glmSecret, glmID}},
		{"glm secret half", glm, "signature " + glmSecret + " does not match", true, []string{glmSecret}},
	}
	cookie := a.Login()
	base := a.Serve()
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			name := fmt.Sprintf("echo-%d", i)
			conn := a.AddConnection(services.ConnectionInput{Provider: services.Some(name), Name: services.Some(name), APIKey: services.Some(tc.key),
				BaseURL: services.Some(fu.URL() + "/v1"), Custom: services.Some(services.CustomSpec{WireFormat: "openai", AuthClass: "apikey"})})
			fu.Script(tc.key, fakeupstream.Step{Status: 401, ErrorCode: "invalid_api_key", ErrorMessage: tc.message})
			_, key := a.NewKey(name)
			body := fmt.Sprintf(`{"model":"%s/m1","stream":%v,"messages":[{"role":"user","content":"hi"}]}`, name, tc.stream)
			resp, b := postJSON(t, base+"/v1/chat/completions", key, body)
			if resp.StatusCode < 400 {
				t.Fatalf("the 401 did not reach the client: %d %s", resp.StatusCode, b)
			}
			got, err := a.Server.Connections().Get(context.Background(), conn.ID)
			if err != nil {
				t.Fatal(err)
			}
			if got.State.LastError == "" {
				t.Fatal("no last_error recorded")
			}
			apiReq := testkit.Request("GET", "/api/connections", "")
			apiReq.AddCookie(cookie)
			api := a.Do(apiReq).Body.String()
			pageReq := testkit.Request("GET", "/connections", "")
			pageReq.AddCookie(cookie)
			page := a.Do(pageReq).Body.String()
			for where, text := range map[string]string{"the client's error": string(b), "last_error": got.State.LastError,
				"GET /api/connections": api, "the Connections page": page} {
				for _, leak := range tc.leak {
					if strings.Contains(text, leak) {
						i := strings.Index(text, leak)
						t.Errorf("%s holds the credential form %q: …%s…", where, leak, text[max(0, i-60):min(len(text), i+len(leak)+20)])
					}
				}
			}
			if !strings.Contains(got.State.LastError, services.Redacted) {
				t.Errorf("last_error %q: the upstream's words should be kept with the key redacted", got.State.LastError)
			}
			t.Logf("client: %.200s | last_error: %s", b, got.State.LastError)
		})
	}
}

// postJSON posts body to url with a Bearer key and returns the answer.
func postJSON(t *testing.T, target, key, body string) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequest("POST", target, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}
