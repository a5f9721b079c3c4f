package app_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"switchyard/internal/fakeupstream"
	"switchyard/internal/testkit"
	"switchyard/services"
)

func postKey(t *testing.T, url, key, body string, headers ...string) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+key)
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

// maxInFlight computes the largest number of overlapping upstream requests.
func maxInFlight(hits []fakeupstream.Hit) int {
	type ev struct {
		at    time.Time
		delta int
	}
	var evs []ev
	for _, h := range hits {
		evs = append(evs, ev{h.TStart, 1}, ev{h.TEnd, -1})
	}
	sort.Slice(evs, func(i, j int) bool {
		if evs[i].at.Equal(evs[j].at) {
			return evs[i].delta < evs[j].delta
		}
		return evs[i].at.Before(evs[j].at)
	})
	cur, best := 0, 0
	for _, e := range evs {
		cur += e.delta
		best = max(best, cur)
	}
	return best
}

func TestQueueFullRejectsAtOnceWithoutUpstreamHit(t *testing.T) {
	f := newGW(t, "fk-a")
	one, three := 1, 3
	on := true
	if _, err := f.app.Server.Connections().Update(t.Context(), f.conns["fk-a"].ID, services.ConnectionInput{
		RateLimitProtection: services.Some(on),
		RateLimitOverrides:  services.Some(services.RateLimitOverrides{ConcurrentRequests: &one, MaxQueueDepth: &three}),
	}); err != nil {
		t.Fatal(err)
	}
	f.fu.Script("fk-a", fakeupstream.Step{Delay: 400 * time.Millisecond})
	var wg sync.WaitGroup
	var full atomic.Int32
	var ok atomic.Int32
	for i := 0; i < 5; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			body := `{"model":"fake/m1","messages":[{"role":"user","content":"q` + string(rune('a'+i)) + `"}]}`
			resp, b := postKey(t, f.url+"/v1/chat/completions", f.key, body)
			switch {
			case resp.StatusCode == 429 && strings.Contains(string(b), "RATE_LIMIT_QUEUE_FULL") && resp.Header.Get("Retry-After") != "":
				full.Add(1)
			case resp.StatusCode == 200:
				ok.Add(1)
			}
		}(i)
	}
	wg.Wait()
	if full.Load() != 1 || ok.Load() != 4 {
		t.Fatalf("queue full %d, served %d; want 1 and 4", full.Load(), ok.Load())
	}
	if n := len(f.fu.Hits()); n != 4 {
		t.Fatalf("upstream saw %d requests, want 4 (the rejected one never reaches it)", n)
	}
	// A local limit penalises nothing.
	if st := f.app.Server.Resilience().Cooldowns.State(f.conns["fk-a"].ID); st.RateLimitedUntil != nil {
		t.Fatalf("a local limit cooled the connection: %+v", st)
	}
}

func TestMaxConcurrentSlotsBoundUpstreamInFlight(t *testing.T) {
	f := newGW(t, "fk-a")
	if _, err := f.app.Server.Connections().Update(t.Context(), f.conns["fk-a"].ID, services.ConnectionInput{MaxConcurrent: services.Some(2)}); err != nil {
		t.Fatal(err)
	}
	f.fu.Script("fk-a", fakeupstream.Step{Delay: 3 * time.Millisecond})
	var wg sync.WaitGroup
	var failed atomic.Int32
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 25; i++ {
				resp, _ := postKey(t, f.url+"/v1/chat/completions", f.key, chatBody)
				if resp.StatusCode != 200 {
					failed.Add(1)
				}
			}
		}(g)
	}
	wg.Wait()
	if failed.Load() != 0 {
		t.Fatalf("%d requests failed", failed.Load())
	}
	// A slot is released when the handler finalises the request, which may
	// be just after the client read the last byte: wait (bounded) for it.
	testkit.PollUntil(5*time.Second, func() bool {
		tot := f.app.Server.Slots().Totals()
		return tot.InFlight == 0 && tot.Waiting == 0
	})
	tot := f.app.Server.Slots().Totals()
	if got := maxInFlight(f.fu.Hits()); got > 2 && tot.FailOpenGrants.QueueFull+tot.FailOpenGrants.Timeout == 0 {
		t.Fatalf("upstream saw %d in flight with max_concurrent 2 and no fail-open grant", got)
	}
	if tot.InFlight != 0 || tot.Waiting != 0 {
		t.Fatalf("slots not returned: %+v", tot)
	}
}

func TestSessionAffinityPinsAndMovesOnFailure(t *testing.T) {
	f := newGW(t, "fk-a", "fk-b")
	sess := []string{"X-Session-Id", "sess-affinity-1"}
	// Pin to the second connection: the first one fails once.
	f.fu.SetScript("fk-a", "*", fakeupstream.Script{Steps: []fakeupstream.Step{{Status: 503}}, Then: fakeupstream.ThenDefault})
	r1, _ := postKey(t, f.url+"/v1/chat/completions", f.key, chatBody, sess...)
	if r1.Header.Get("X-Switchyard-Selected-Connection-Id") != f.conns["fk-b"].ID {
		t.Fatalf("first request served by %s", r1.Header.Get("X-Switchyard-Selected-Connection-Id"))
	}
	f.app.Clock.Advance(5 * time.Second) // fk-a recovered: fill-first would pick it, the pin wins
	r2, _ := postKey(t, f.url+"/v1/chat/completions", f.key, chatBody, sess...)
	if r2.Header.Get("X-Switchyard-Selected-Connection-Id") != f.conns["fk-b"].ID {
		t.Fatal("same session did not stay on its pinned connection")
	}
	// The pinned connection answers 429: the request moves and re-pins.
	f.fu.Script("fk-b", fakeupstream.Step{Status: 429, RetryAfter: "30"})
	r3, _ := postKey(t, f.url+"/v1/chat/completions", f.key, chatBody, sess...)
	if r3.StatusCode != 200 || r3.Header.Get("X-Switchyard-Selected-Connection-Id") != f.conns["fk-a"].ID {
		t.Fatalf("after 429: %d served by %s", r3.StatusCode, r3.Header.Get("X-Switchyard-Selected-Connection-Id"))
	}
	f.fu.ClearScripts()
	f.app.Clock.Advance(31 * time.Second) // fk-b recovered too; the new pin keeps the session on fk-a
	r4, _ := postKey(t, f.url+"/v1/chat/completions", f.key, chatBody, sess...)
	if r4.Header.Get("X-Switchyard-Selected-Connection-Id") != f.conns["fk-a"].ID {
		t.Fatal("the session was not re-pinned to the new connection")
	}
	for _, h := range f.fu.Hits() {
		for _, name := range h.Headers {
			if strings.EqualFold(name, "X-Session-Id") {
				t.Fatal("the session header reached the upstream")
			}
		}
	}
}

func TestLeaseScenario(t *testing.T) {
	f := newGW(t, "fk-1", "fk-2")
	c1, c2 := f.conns["fk-1"].ID, f.conns["fk-2"].ID
	newLeaseKey := func(name string) string {
		_, secret, err := f.app.Server.Keys().Create(t.Context(), services.KeyInput{Name: services.Some(name),
			Scopes: services.Some([]string{"inference", "lease:exclusive"}), AllowedConnections: services.Some([]string{c1})})
		if err != nil {
			t.Fatal(err)
		}
		return secret
	}
	managedSecret := newLeaseKey("managed")
	owner := "vlo_" + strings.Repeat("A", 43)
	lease := func(body string) (*http.Response, map[string]any) {
		resp, b := postKey(t, f.url+"/v1/session-leases", managedSecret, body, "X-Switchyard-Lease-Owner", owner)
		var m map[string]any
		json.Unmarshal(b, &m)
		return resp, m
	}
	resp, m := lease(`{"action":"acquire","model":"fake/m1"}`)
	if resp.StatusCode != 200 || m["generation"] != float64(1) || m["state"] != "active" {
		t.Fatalf("acquire: %d %v", resp.StatusCode, m)
	}
	// Unmanaged traffic never lands on the leased connection.
	f.fu.Reset()
	for i := 0; i < 4; i++ {
		r, _ := postKey(t, f.url+"/v1/chat/completions", f.key, `{"model":"fake/m1","messages":[{"role":"user","content":"u`+string(rune('a'+i))+`"}]}`)
		if r.Header.Get("X-Switchyard-Selected-Connection-Id") != c2 {
			t.Fatalf("unmanaged request served by %s, want %s", r.Header.Get("X-Switchyard-Selected-Connection-Id"), c2)
		}
	}
	// The managed key goes to its binding; a stale generation is refused without an upstream hit.
	r, _ := postKey(t, f.url+"/v1/chat/completions", managedSecret, chatBody, "X-Switchyard-Lease-Owner", owner, "X-Switchyard-Lease-Generation", "1")
	if r.StatusCode != 200 || r.Header.Get("X-Switchyard-Selected-Connection-Id") != c1 {
		t.Fatalf("managed request: %d served by %s", r.StatusCode, r.Header.Get("X-Switchyard-Selected-Connection-Id"))
	}
	f.fu.Reset()
	r, b := postKey(t, f.url+"/v1/chat/completions", managedSecret, chatBody, "X-Switchyard-Lease-Owner", owner, "X-Switchyard-Lease-Generation", "2")
	if r.StatusCode != 409 || !strings.Contains(string(b), "LEASE_FENCE_STALE") || len(f.fu.Hits()) != 0 {
		t.Fatalf("stale generation: %d %s hits %d", r.StatusCode, b, len(f.fu.Hits()))
	}
	r, b = postKey(t, f.url+"/v1/chat/completions", managedSecret, chatBody)
	if r.StatusCode != 400 || !strings.Contains(string(b), "LEASE_CONTEXT_REQUIRED") {
		t.Fatalf("no owner header: %d %s", r.StatusCode, b)
	}
	// Another owner of another managed key finds every allowed connection leased: 429 with Retry-After.
	otherSecret := newLeaseKey("other")
	r, b = postKey(t, f.url+"/v1/session-leases", otherSecret, `{"action":"acquire","model":"fake/m1"}`, "X-Switchyard-Lease-Owner", "vlo_"+strings.Repeat("B", 43))
	ra, _ := strconv.Atoi(r.Header.Get("Retry-After"))
	if r.StatusCode != 429 || !strings.Contains(string(b), `"waiting_for_capacity"`) || ra < 1 || ra > 120 {
		t.Fatalf("capacity: %d Retry-After %d %s", r.StatusCode, ra, b)
	}
	// Lease headers from a key without the scope are refused.
	r, b = postKey(t, f.url+"/v1/chat/completions", f.key, chatBody, "X-Switchyard-Lease-Owner", owner, "X-Switchyard-Lease-Generation", "1")
	if r.StatusCode != 403 || !strings.Contains(string(b), "LEASE_SCOPE_REQUIRED") {
		t.Fatalf("unscoped lease headers: %d %s", r.StatusCode, b)
	}
}

func TestLeaseEndsWhenKeyRevokedAndAdminListsLeases(t *testing.T) {
	f := newGW(t, "fk-1")
	c1 := f.conns["fk-1"].ID
	k, secret, err := f.app.Server.Keys().Create(t.Context(), services.KeyInput{Name: services.Some("managed"),
		Scopes: services.Some([]string{"inference", "lease:exclusive"}), AllowedConnections: services.Some([]string{c1})})
	if err != nil {
		t.Fatal(err)
	}
	owner := "vlo_" + strings.Repeat("C", 43)
	if resp, b := postKey(t, f.url+"/v1/session-leases", secret, `{"action":"acquire","model":"fake/m1"}`, "X-Switchyard-Lease-Owner", owner); resp.StatusCode != 200 {
		t.Fatalf("acquire: %d %s", resp.StatusCode, b)
	}
	list := adminGet(t, f.app, "/api/resilience/leases")
	items, _ := list["items"].([]any)
	if len(items) != 1 || strings.Contains(fmt.Sprint(list), owner) {
		t.Fatalf("lease list %v", list)
	}
	if _, err := f.app.Server.Keys().Revoke(t.Context(), k.ID); err != nil {
		t.Fatal(err)
	}
	if items, _ := adminGet(t, f.app, "/api/resilience/leases")["items"].([]any); len(items) != 0 {
		t.Fatalf("revoking the key left %d active leases", len(items))
	}
}

func TestRequestQueueSettingsApplyToTheNextRequest(t *testing.T) {
	f := newGW(t, "fk-a")
	f.fu.Script("fk-a", fakeupstream.Step{Delay: 300 * time.Millisecond})
	fire := func() (full int32) {
		var wg sync.WaitGroup
		var n atomic.Int32
		for i := 0; i < 3; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				resp, b := postKey(t, f.url+"/v1/chat/completions", f.key, `{"model":"fake/m1","messages":[{"role":"user","content":"p`+strconv.Itoa(i)+`"}]}`)
				if resp.StatusCode == 429 && strings.Contains(string(b), "RATE_LIMIT_QUEUE_FULL") {
					n.Add(1)
				}
			}(i)
		}
		wg.Wait()
		return n.Load()
	}
	if n := fire(); n != 0 {
		t.Fatalf("queue off: %d rejected", n)
	}
	patchResilience(t, f.app, `{"requestQueue":{"autoEnableApiKeyProviders":true,"concurrentRequests":1,"maxQueueDepth":1,"minTimeBetweenRequestsMs":0}}`)
	if n := fire(); n != 1 {
		t.Fatalf("after PATCH: %d rejected, want 1 (1 running, 1 queued)", n)
	}
}

func TestLeaseMovesWhenItsBindingCools(t *testing.T) {
	f := newGW(t, "fk-1", "fk-2")
	c1, c2 := f.conns["fk-1"].ID, f.conns["fk-2"].ID
	_, secret, err := f.app.Server.Keys().Create(t.Context(), services.KeyInput{Name: services.Some("managed"),
		Scopes: services.Some([]string{"inference", "lease:exclusive"}), AllowedConnections: services.Some([]string{c1, c2})})
	if err != nil {
		t.Fatal(err)
	}
	owner := "vlo_" + strings.Repeat("D", 43)
	resp, b := postKey(t, f.url+"/v1/session-leases", secret, `{"action":"acquire","model":"fake/m1"}`, "X-Switchyard-Lease-Owner", owner)
	if resp.StatusCode != 200 {
		t.Fatalf("acquire: %d %s", resp.StatusCode, b)
	}
	hdr := []string{"X-Switchyard-Lease-Owner", owner, "X-Switchyard-Lease-Generation", "1"}
	r, _ := postKey(t, f.url+"/v1/chat/completions", secret, chatBody, hdr...)
	bound := r.Header.Get("X-Switchyard-Selected-Connection-Id")
	other := c2
	if bound == c2 {
		other = c1
	}
	// The binding answers 429 and cools; the next request moves the lease (same generation).
	key := map[string]string{c1: "fk-1", c2: "fk-2"}[bound]
	f.fu.Script(key, fakeupstream.Step{Status: 429, RetryAfter: "10"})
	postKey(t, f.url+"/v1/chat/completions", secret, chatBody, hdr...)
	r, b = postKey(t, f.url+"/v1/chat/completions", secret, chatBody, hdr...)
	if r.StatusCode != 200 || r.Header.Get("X-Switchyard-Selected-Connection-Id") != other {
		t.Fatalf("after cooling: %d served by %s (bound %s) %s", r.StatusCode, r.Header.Get("X-Switchyard-Selected-Connection-Id"), bound, b)
	}
}
