package app_test

// T6 of the scale-out design (§5): a replica SIGKILLed right after it
// acknowledged a settings PATCH, a lease and a cooldown loses none of them,
// because each is in PostgreSQL before the answer leaves; what a kill may
// lose is the request-log rows of its last unflushed batch.

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"switchyard/internal/fakeupstream"
	"switchyard/internal/testkit"
	"switchyard/internal/testkit/cluster"
	"switchyard/services"
)

// sent is one request of the steady traffic.
type sent struct {
	done    time.Time
	took    time.Duration
	status  int
	replica string
	id      string
}

// steadyTraffic sends a chat completion through the front every period
// until stop is called, each in its own goroutine so a slow answer does not
// slow the rate, and returns what came back.
func steadyTraffic(f *fleet, model string, period time.Duration) (stop func() []sent) {
	var mu sync.Mutex
	var out []sent
	var wg sync.WaitGroup
	quit := make(chan struct{})
	client := cluster.NewClient(f.c.Front(), f.key)
	wg.Go(func() {
		tick := time.NewTicker(period)
		defer tick.Stop()
		for {
			select {
			case <-quit:
				return
			case <-tick.C:
			}
			wg.Go(func() {
				begin := time.Now()
				r, err := client.Do(context.Background(), "POST", "/v1/chat/completions",
					`{"model":"`+model+`","messages":[{"role":"user","content":"hi"}]}`)
				s := sent{done: time.Now(), took: time.Since(begin), status: r.Status}
				if err != nil {
					s.status = -1
				} else {
					s.replica, s.id = r.Header.Get(cluster.ReplicaHeader), r.Header.Get("X-Switchyard-Request-Id")
				}
				mu.Lock()
				out = append(out, s)
				mu.Unlock()
			})
		}
	})
	return func() []sent {
		close(quit)
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(out)
	}
}

// killAfter runs ack against replica 0 and SIGKILLs it the moment the answer
// is in, returning the answer and how long after it the signal went out.
func killAfter(t *testing.T, f *fleet, what string, want int, ack func(base string) cluster.Response) (cluster.Response, time.Duration) {
	t.Helper()
	a := f.c.Replica(0)
	r := ack(a.URL())
	at := time.Now()
	a.Kill()
	gap := a.Killed.Sub(at)
	if r.Status != want {
		t.Fatalf("%s on A: %d %s, want %d; A's log: %s", what, r.Status, r.Body, want, a.LastStderr())
	}
	if gap > 10*time.Millisecond {
		t.Errorf("%s: A was killed %v after its answer, want ≤ 10 ms", what, gap)
	}
	return r, gap
}

func TestClusterSIGKILLLosesNoAcknowledgedState(t *testing.T) {
	f, conns := startFleet(t, nil, "fk-t6-1", "fk-t6-2")
	ctx := context.Background()
	m := func(i int) *cluster.Client { return cluster.NewClient(f.c.Replica(i).URL(), f.manage[0].Key) }
	k2 := conns["fk-t6-2"]
	// K3 is the only connection of its provider: its 429 is the answer.
	k3 := m(0).Must(t, "POST", "/api/connections", fmt.Sprintf(
		`{"provider":"fleet3","name":"k3","apiKey":"fk-t6-3","baseUrl":"%s/v1","custom":{"wireFormat":"openai","authClass":"apikey"}}`,
		f.fu.URL()), 201).JSON()["id"].(string)
	leaseKey := func(name string) string {
		return m(0).Must(t, "POST", "/api/keys", fmt.Sprintf(
			`{"name":%q,"scopes":["inference","lease:exclusive"],"allowedConnections":[%q]}`, name, k2), 201).JSON()["secret"].(string)
	}
	lk1, lk2 := leaseKey("lease-owner-1"), leaseKey("lease-owner-2")
	for i := 1; i < 3; i++ {
		base := f.c.Replica(i).URL()
		until(t, 5*time.Second, "setup visible on "+f.c.Replica(i).Name, func() bool {
			return f.chat(t, base, "fleet3/m1").Status == 200
		})
	}

	stop := steadyTraffic(f, "fleet/m1", 200*time.Millisecond)
	var kills []time.Time
	restartA := func() {
		t.Helper()
		f.c.Replica(0).Restart(t)
	}
	time.Sleep(1500 * time.Millisecond) // traffic on every replica before the first kill

	// 1. A settings PATCH.
	patch, gap1 := killAfter(t, f, "settings PATCH", 200, func(base string) cluster.Response {
		r, _ := cluster.NewClient(base, f.manage[0].Key).Do(ctx, "PATCH", "/api/resilience", `{"sessionAffinity":{"ttlMs":4242000}}`)
		return r
	})
	kills = append(kills, f.c.Replica(0).Killed)
	etag := patch.Header.Get("ETag")
	for i := 1; i < 3; i++ {
		var r cluster.Response
		if !testkit.PollUntil(time.Second, func() bool {
			r = m(i).Must(t, "GET", "/api/resilience", "", 200)
			return strings.Contains(string(r.Body), `"ttlMs":4242000`) && r.Header.Get("ETag") == etag
		}) {
			t.Errorf("settings after A's death, via %s: ETag %s (A answered %s), body %.200s", f.c.Replica(i).Name, r.Header.Get("ETag"), etag, r.Body)
		}
	}
	restartA()

	// 2. A lease.
	o1, o2 := "vlo_"+services.RandomToken(32), "vlo_"+services.RandomToken(32)
	lease := func(base, key, owner, body string) cluster.Response {
		r, err := cluster.NewClient(base, key).Do(ctx, "POST", "/v1/session-leases", body, "X-Switchyard-Lease-Owner", owner)
		if err != nil {
			t.Fatalf("lease call via %s: %v", base, err)
		}
		return r
	}
	acq, gap2 := killAfter(t, f, "lease acquire", 200, func(base string) cluster.Response {
		return lease(base, lk1, o1, `{"action":"acquire","model":"fleet/m1","ttlMs":600000}`)
	})
	kills = append(kills, f.c.Replica(0).Killed)
	gen := int(acq.JSON()["generation"].(float64))
	// B: the connection is held for another owner (the database's own
	// exclusivity, whatever B's mirror knows).
	if r := lease(f.c.Replica(1).URL(), lk2, o2, `{"action":"acquire","model":"fleet/m1"}`); r.Status != 429 ||
		!strings.Contains(string(r.Body), "LEASE_CAPACITY_UNAVAILABLE") {
		t.Errorf("another owner's acquire via B after A's death: %d %s, want 429 LEASE_CAPACITY_UNAVAILABLE", r.Status, r.Body)
	}
	// C: the owner's lease is there.
	if r := lease(f.c.Replica(2).URL(), lk1, o1, fmt.Sprintf(`{"action":"status","generation":%d}`, gen)); r.Status != 200 || r.JSON()["state"] != "active" {
		t.Errorf("the owner's lease status via C after A's death: %d %s", r.Status, r.Body)
	}
	restartA()

	// 3. A 429 that cools K3.
	// Retry-After beyond the wait budget: A answers at once instead of
	// waiting the cooldown out.
	f.fu.Script("fk-t6-3", fakeupstream.Step{Status: 429, RetryAfter: "600"}, fakeupstream.Step{})
	cool, gap3 := killAfter(t, f, "429 on K3", 429, func(base string) cluster.Response {
		r, err := cluster.NewClient(base, f.key).Do(ctx, "POST", "/v1/chat/completions", `{"model":"fleet3/m1","messages":[{"role":"user","content":"hi"}]}`)
		if err != nil {
			t.Logf("429 request: %v", err)
		}
		return r
	})
	kills = append(kills, f.c.Replica(0).Killed)
	t.Logf("A's answer to the 429: %d, Retry-After %q, %s", cool.Status, cool.Header.Get("Retry-After"), cool.Body)
	for i := 1; i < 3; i++ {
		st := connState(t, m(i), k3)
		until, _ := time.Parse(time.RFC3339Nano, st.RateLimitedUntil)
		if st.RateLimitedUntil == "" || time.Until(until) < 500*time.Second || st.LastErrorReason != "rate_limit" {
			t.Errorf("K3 after A's death, via %s: %+v, want cooling for ~600 s after a rate_limit", f.c.Replica(i).Name, st)
		}
	}
	time.Sleep(1500 * time.Millisecond)
	traffic := stop()
	t.Logf("kill gaps after the acknowledgements: %v %v %v", gap1, gap2, gap3)

	// Lost request-log rows: A's answered requests that never reached the
	// table must be from its last unflushed batch before a kill (the writer
	// flushes every second).
	db, err := sql.Open("pgx", f.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	stored := map[string]bool{}
	rows, err := db.QueryContext(ctx, `SELECT id FROM request_logs`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id string
		_ = rows.Scan(&id)
		stored[id] = true
	}
	rows.Close()
	answeredByA, lost := 0, 0
	for _, s := range traffic {
		if s.replica != "A" || s.status != 200 || s.done.After(kills[len(kills)-1]) {
			continue
		}
		answeredByA++
		if stored[s.id] {
			continue
		}
		lost++
		next := kills[slices.IndexFunc(kills, func(k time.Time) bool { return !k.Before(s.done) })]
		if next.Sub(s.done) > requestLogFlushBound {
			t.Errorf("request %s answered by A %v before a kill is not in the log (older than A's last batch)", s.id, next.Sub(s.done))
		}
	}
	errs := 0
	for _, s := range traffic {
		if s.status != 200 {
			errs++
		}
	}
	per := map[string]int{}
	for _, s := range traffic {
		per[s.replica]++
	}
	if len(traffic) > 0 {
		t.Logf("steady traffic from %v to %v: %v", traffic[0].done.Format("15:04:05.000"), traffic[len(traffic)-1].done.Format("15:04:05.000"), per)
	}
	t.Logf("steady traffic: %d requests, %d not 200 (in flight on A at a kill); A answered %d before its last kill, %d of them lost from the request log (each from its last batch)",
		len(traffic), errs, answeredByA, lost)

	// A restarted with the same configuration holds, from the database,
	// all three acknowledgements in its mirrors (the settings revision, the
	// lease, K3's cooldown); B's mirrors hold the settings revision and the
	// lease A acknowledged before it died.
	restartA()
	var va, vb mirrorView
	if !testkit.PollUntil(5*time.Second, func() bool {
		va, vb = mirrorOf(t, m(0), k3), mirrorOf(t, m(1), k3)
		return va.ETag == etag && vb.ETag == etag && slices.Contains(va.LeaseGenerations, gen) &&
			slices.Contains(vb.LeaseGenerations, gen) && va.K3 == "cooling"
	}) {
		t.Fatalf("mirrors lack acknowledged state: restarted A %+v, B %+v; want settings %s and lease generation %d on both, K3 cooling on A", va, vb, etag, gen)
	}
	match := time.Since(f.c.Replica(0).Listening)
	t.Logf("restarted A held the acknowledged state %v after its listening line (startup %v); B's mirror: %+v", match, f.c.Replica(0).Startup, vb)
	if match > time.Second {
		t.Errorf("restarted A held the acknowledged state only after %v, want ≤ 1 s", match)
	}
}

// requestLogFlushBound is how old an answered request may be at a kill and
// still be missing from the log: the batch writer's 1 s interval plus the
// write itself.
const requestLogFlushBound = 1500 * time.Millisecond

type connStateView struct {
	Status           string `json:"status"`
	RateLimitedUntil string `json:"rateLimitedUntil"`
	BackoffLevel     int    `json:"backoffLevel"`
	LastErrorReason  string `json:"lastErrorReason"`
}

func connState(t *testing.T, c *cluster.Client, id string) connStateView {
	t.Helper()
	r := c.Must(t, "GET", "/api/connections/"+id, "", 200)
	var v struct {
		State connStateView `json:"state"`
	}
	if err := json.Unmarshal(r.Body, &v); err != nil {
		t.Fatal(err)
	}
	return v.State
}

// mirrorView is what a replica's in-memory state says about what T6 wrote.
type mirrorView struct {
	ETag             string // the resilience settings revision
	LeaseGenerations []int  // of the active leases
	K3               string // K3's routing status
}

func mirrorOf(t *testing.T, c *cluster.Client, k3 string) mirrorView {
	t.Helper()
	v := mirrorView{ETag: c.Must(t, "GET", "/api/resilience", "", 200).Header.Get("ETag"), K3: connStateMirror(t, c, k3)}
	var leases struct {
		Items []struct {
			Generation int `json:"generation"`
		} `json:"items"`
	}
	_ = json.Unmarshal(c.Must(t, "GET", "/api/resilience/leases", "", 200).Body, &leases)
	for _, l := range leases.Items {
		v.LeaseGenerations = append(v.LeaseGenerations, l.Generation)
	}
	return v
}
