package app_test

// Several replicas behind one address, sharing one PostgreSQL database (the
// scale-out design's §5 tests): three gateway processes built from the tree,
// one fake upstream in this process, a round-robin front. They need
// SWITCHYARD_TEST_DATABASE_URL (CI starts a server) and skip without it.

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"switchyard/internal/fakeupstream"
	"switchyard/internal/testkit"
	"switchyard/internal/testkit/cluster"
)

// fleet is a running cluster with its fake upstream, a manage client per
// replica and a client key.
type fleet struct {
	c      *cluster.Cluster
	dsn    string // the fleet's database (its schema)
	fu     *fakeupstream.Server
	manage []*cluster.Client // per replica
	key    string            // inference key
	keyID  string
}

// startFleet starts replicas on a fresh schema with one openai-compatible
// provider "fleet" whose connections are the given fake keys.
func startFleet(t *testing.T, env map[string]string, fakeKeys ...string) (*fleet, map[string]string) {
	t.Helper()
	return startFleetOn(t, testkit.PostgresSchema(t), env, fakeKeys...)
}

// startFleetOn is startFleet on the database at dsn.
func startFleetOn(t *testing.T, dsn string, env map[string]string, fakeKeys ...string) (*fleet, map[string]string) {
	t.Helper()
	fu := fakeupstream.Start(t, fakeupstream.WithEvents(3))
	c := cluster.Start(t, cluster.Options{DatabaseURL: dsn, Upstreams: []string{fu.Addr()}, Env: env})
	f := &fleet{c: c, dsn: dsn, fu: fu}
	secret := cluster.ManageKey(t, c.Replica(0).URL())
	for _, r := range c.Replicas {
		f.manage = append(f.manage, cluster.NewClient(r.URL(), secret))
	}
	conns := map[string]string{}
	for _, k := range fakeKeys {
		body := fmt.Sprintf(`{"provider":"fleet","name":%q,"apiKey":%q,"baseUrl":"%s/v1","custom":{"wireFormat":"openai","authClass":"apikey"}}`,
			k, k, fu.URL())
		conns[k] = f.manage[0].Must(t, "POST", "/api/connections", body, 201).JSON()["id"].(string)
	}
	m := f.manage[0].Must(t, "POST", "/api/keys", `{"name":"traffic"}`, 201).JSON()
	f.key = m["secret"].(string)
	f.keyID = m["key"].(map[string]any)["id"].(string)
	return f, conns
}

// chat sends one chat completion through base with the fleet's key.
func (f *fleet) chat(t *testing.T, base, model string, headers ...string) cluster.Response {
	t.Helper()
	r, err := cluster.NewClient(base, f.key).Do(context.Background(), "POST", "/v1/chat/completions",
		`{"model":"`+model+`","messages":[{"role":"user","content":"hi"}]}`, headers...)
	if err != nil {
		t.Fatalf("chat via %s: %v", base, err)
	}
	return r
}

// until polls cond every 10 ms for up to limit and returns how long it took,
// or fails t.
func until(t *testing.T, limit time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	if !testkit.PollUntil(limit, cond) {
		t.Fatalf("%s: not within %v", what, limit)
	}
	return time.Since(start)
}

// percentile returns the p-th percentile (0–100) of ds.
func percentile(ds []time.Duration, p int) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	i := (len(s)*p + 99) / 100
	return s[max(min(i, len(s))-1, 0)]
}

// T10: a key revoked through replica A is refused by B and C within 1 s;
// its creation reached them the same way (the first requests through B and C
// are served).
func TestClusterKeyRevocationReachesEveryReplica(t *testing.T) {
	f, _ := startFleet(t, nil, "fk-t10")
	for i := 1; i < 3; i++ {
		base := f.c.Replica(i).URL()
		until(t, 5*time.Second, "key and connection visible on "+f.c.Replica(i).Name, func() bool {
			return f.chat(t, base, "fleet/m1").Status == 200
		})
	}
	f.manage[0].Must(t, "POST", "/api/keys/"+f.keyID+"/revoke", "", 200)
	var lat []time.Duration
	for i := 1; i < 3; i++ {
		base := f.c.Replica(i).URL()
		lat = append(lat, until(t, 5*time.Second, "revocation on "+f.c.Replica(i).Name, func() bool {
			return f.chat(t, base, "fleet/m1").Status == 401
		}))
	}
	t.Logf("revocation propagation: %v", lat)
	if worst := slices.Max(lat); worst > time.Second {
		t.Errorf("revoked key still served %v after the revocation (want ≤ 1 s)", worst)
	}
}

// T9: a settings PATCH through A is served by B within 1 s (20 trials, p50
// and p99 reported), and two concurrent PATCHes with the same If-Match
// through A and B give one 200 and one 412.
func TestClusterSettingsPropagateAndCompareAndSet(t *testing.T) {
	f, _ := startFleet(t, nil, "fk-t9")
	var lat []time.Duration
	for trial := range 20 {
		ttl := 60_000 + trial*1000
		f.manage[0].Must(t, "PATCH", "/api/resilience", fmt.Sprintf(`{"sessionAffinity":{"ttlMs":%d}}`, ttl), 200)
		want := fmt.Sprintf(`"ttlMs":%d`, ttl)
		lat = append(lat, until(t, 5*time.Second, "settings on B", func() bool {
			r, err := f.manage[1].Do(context.Background(), "GET", "/api/resilience", "")
			return err == nil && strings.Contains(string(r.Body), want)
		}))
	}
	t.Logf("settings propagation over 20 trials: p50 %v, p99 %v", percentile(lat, 50), percentile(lat, 99))
	if p99 := percentile(lat, 99); p99 > time.Second {
		t.Errorf("settings p99 propagation %v, want ≤ 1 s", p99)
	}

	etag := f.manage[0].Must(t, "GET", "/api/resilience", "", 200).Header.Get("ETag")
	out := make(chan int, 2)
	for i, ttl := range []int{90_000, 91_000} {
		go func() {
			r, err := f.manage[i].Do(context.Background(), "PATCH", "/api/resilience",
				fmt.Sprintf(`{"sessionAffinity":{"ttlMs":%d}}`, ttl), "If-Match", etag)
			if err != nil {
				out <- 0
				return
			}
			out <- r.Status
		}()
	}
	got := []int{<-out, <-out}
	slices.Sort(got)
	if got[0] != 200 || got[1] != 412 {
		t.Fatalf("concurrent PATCHes with one If-Match answered %v, want [200 412]", got)
	}
}
