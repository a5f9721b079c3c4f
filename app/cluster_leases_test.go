package app_test

// Leases and session pins across replicas (scale-out §5, T3 and T11): a
// lease is a wall fleet-wide and usable through any replica at once; a
// session stays on its connection whichever replica serves its next turn.

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"switchyard/internal/testkit/cluster"
	"switchyard/models"
)

// leaseOwner returns the n-th well-formed owner token (vlo_ + 43 base64url).
func leaseOwner(n int) string { return fmt.Sprintf("vlo_%s%06d", strings.Repeat("L", 37), n) }

// activeLeases counts the store's active rows of connection connID: the
// authority every replica's transactions share.
func activeLeases(t *testing.T, f *fleet, connID string) int {
	t.Helper()
	db, err := models.OpenPostgres(context.Background(), f.dsn, time.Now, models.PostgresOptions{MaxOpenConns: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer models.Close(db)
	var n int64
	if err := db.Raw(`SELECT count(*) FROM exclusive_leases WHERE state = 'active' AND connection_id = ?`, connID).Scan(&n).Error; err != nil {
		t.Fatal(err)
	}
	return int(n)
}

// T3: the lease wall. Acquired through A, the connection is refused to
// another owner through B (429 LEASE_CAPACITY_UNAVAILABLE with Retry-After)
// and serves its owner through C at once (read-through on C's mirror miss);
// unmanaged traffic through B and C avoids it from the acquire + 1 s; in 20
// rounds of simultaneous acquires through A and B for different owners
// exactly one wins and the store holds exactly one active lease.
func TestClusterLeaseWallAcrossReplicas(t *testing.T) {
	f, conns := startFleet(t, nil, "fk-t3-1", "fk-t3-2")
	c1 := conns["fk-t3-1"]
	secret := f.manage[0].Must(t, "POST", "/api/keys",
		`{"name":"agents","scopes":["inference","lease:exclusive"],"allowedConnections":["`+c1+`"]}`, 201).JSON()["secret"].(string)
	managed := make([]*cluster.Client, len(f.c.Replicas))
	for i, r := range f.c.Replicas {
		managed[i] = cluster.NewClient(r.URL(), secret)
		// The key and the connections reached every replica: a managed
		// request without lease headers is refused for its context, not
		// its key; an unmanaged one is served.
		until(t, 5*time.Second, "lease key visible on "+r.Name, func() bool {
			rr, err := managed[i].Do(context.Background(), "POST", "/v1/chat/completions", `{"model":"fleet/m1","messages":[{"role":"user","content":"hi"}]}`)
			return err == nil && rr.Status == 400 && strings.Contains(string(rr.Body), "LEASE_CONTEXT_REQUIRED")
		})
		until(t, 5*time.Second, "connections visible on "+r.Name, func() bool { return f.chat(t, r.URL(), "fleet/m1").Status == 200 })
	}
	acquire := func(via int, owner string) cluster.Response {
		r, err := managed[via].Do(context.Background(), "POST", "/v1/session-leases", `{"action":"acquire","model":"fleet/m1"}`,
			"X-Switchyard-Lease-Owner", owner)
		if err != nil {
			t.Errorf("acquire via %s: %v", f.c.Replica(via).Name, err)
		}
		return r
	}
	// infer sends the owner's managed request through via and returns the
	// answer and how long it took.
	infer := func(via int, owner string, gen int, nonce int) (cluster.Response, time.Duration) {
		start := time.Now()
		r, err := managed[via].Do(context.Background(), "POST", "/v1/chat/completions",
			fmt.Sprintf(`{"model":"fleet/m1","messages":[{"role":"user","content":"turn sy-nonce:%x"}]}`, nonce),
			"X-Switchyard-Lease-Owner", owner, "X-Switchyard-Lease-Generation", strconv.Itoa(gen))
		if err != nil {
			t.Fatalf("managed request via %s: %v", f.c.Replica(via).Name, err)
		}
		return r, time.Since(start)
	}
	release := func(via int, owner string, gen int) {
		managed[via].Must(t, "POST", "/v1/session-leases", fmt.Sprintf(`{"action":"release","generation":%d}`, gen), 200,
			"X-Switchyard-Lease-Owner", owner)
	}

	o1, o2 := leaseOwner(1), leaseOwner(2)
	r := acquire(0, o1)
	acquired := time.Now()
	if r.Status != 200 || r.JSON()["generation"] != float64(1) {
		t.Fatalf("acquire via A: %d %s", r.Status, r.Body)
	}
	r = acquire(1, o2)
	ra, _ := strconv.Atoi(r.Header.Get("Retry-After"))
	if r.Status != 429 || !strings.Contains(string(r.Body), "LEASE_CAPACITY_UNAVAILABLE") ||
		r.JSON()["status"] != "waiting_for_capacity" || ra < 1 || ra > 120 {
		t.Fatalf("another owner via B: %d Retry-After %q %s; want 429 LEASE_CAPACITY_UNAVAILABLE", r.Status, r.Header.Get("Retry-After"), r.Body)
	}
	r, took := infer(2, o1, 1, 0x3001)
	if r.Status != 200 || r.Header.Get("X-Switchyard-Selected-Connection-Id") != c1 {
		t.Fatalf("owner via C right after the acquire: %d on %q %s; want 200 on the leased connection",
			r.Status, r.Header.Get("X-Switchyard-Selected-Connection-Id"), r.Body)
	}
	if hits := f.fu.HitsForNonce("3001"); len(hits) != 1 || hits[0].Credential != "fk-t3-1" {
		t.Fatalf("the owner's request reached the upstream as %+v, want once with fk-t3-1", hits)
	}
	t.Logf("owner's first request via C, %v after the acquire via A: %v", time.Since(acquired)-took, took)

	// Unmanaged traffic (fill-first would pick the leased connection first)
	// avoids it on every replica once 1 s has passed since the acquire.
	time.Sleep(time.Until(acquired.Add(time.Second)))
	for i := range 6 {
		via := 1 + i%2
		n := 0x3100 + i
		r, err := cluster.NewClient(f.c.Replica(via).URL(), f.key).Do(context.Background(), "POST", "/v1/chat/completions",
			fmt.Sprintf(`{"model":"fleet/m1","messages":[{"role":"user","content":"free sy-nonce:%x"}]}`, n))
		if err != nil || r.Status != 200 {
			t.Fatalf("unmanaged request via %s: %v %d %s", f.c.Replica(via).Name, err, r.Status, r.Body)
		}
		for _, h := range f.fu.HitsForNonce(fmt.Sprintf("%x", n)) {
			if h.Credential == "fk-t3-1" {
				t.Fatalf("unmanaged request via %s reached the leased connection", f.c.Replica(via).Name)
			}
		}
	}
	release(2, o1, 1)

	// 20 rounds: two owners acquire at the same instant through A and B.
	var readThrough []time.Duration
	winners := make([]int, 20)
	for round := range 20 {
		owners := []string{leaseOwner(100 + 2*round), leaseOwner(101 + 2*round)}
		got := make([]cluster.Response, 2)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range 2 {
			wg.Go(func() {
				<-start
				got[i] = acquire(i, owners[i])
			})
		}
		close(start)
		wg.Wait()
		win, lost := -1, 0
		for i, g := range got {
			switch {
			case g.Status == 200:
				if win >= 0 {
					t.Fatalf("round %d: both owners acquired the connection", round)
				}
				win = i
				winners[round]++
			case g.Status == 429 && strings.Contains(string(g.Body), "LEASE_CAPACITY_UNAVAILABLE"):
				lost++
			default:
				t.Fatalf("round %d: acquire via %s answered %d %s", round, f.c.Replica(i).Name, g.Status, g.Body)
			}
		}
		if win < 0 || lost != 1 {
			t.Fatalf("round %d: %d winners, %d refused; want 1 and 1", round, winners[round], lost)
		}
		if n := activeLeases(t, f, c1); n != 1 {
			t.Fatalf("round %d: the store holds %d active leases on the connection, want 1", round, n)
		}
		gen := int(got[win].JSON()["generation"].(float64))
		// The winner's next request goes through C at once.
		r, took := infer(2, owners[win], gen, 0x3200+round)
		if r.Status != 200 || r.Header.Get("X-Switchyard-Selected-Connection-Id") != c1 {
			t.Fatalf("round %d: winner via C: %d %s", round, r.Status, r.Body)
		}
		readThrough = append(readThrough, took)
		release(1-win, owners[win], gen) // through the replica that lost
		if n := activeLeases(t, f, c1); n != 0 {
			t.Fatalf("round %d: %d active leases after the release", round, n)
		}
	}
	t.Logf("winners per round: %v", winners)
	t.Logf("winner's first request via C over 20 rounds: p50 %v, p99 %v", percentile(readThrough, 50), percentile(readThrough, 99))
}

// T11: affinity across replicas. 20 sessions on a three-connection pool
// picked at random per replica: each session's first request through A
// pins a connection; once the pin reached B's mirror (B's
// switchyard_affinity_pins gauge rises; the design's bound is 1 s), the
// session's next request through B lands on the same connection. Without
// shared pins the gauge never rises and B would draw its own connection
// (about one session in three the same).
func TestClusterAffinityHoldsAcrossReplicas(t *testing.T) {
	f, _ := startFleet(t, nil, "fk-t11-1", "fk-t11-2", "fk-t11-3")
	f.manage[0].Must(t, "PATCH", "/api/settings", `{"routing":{"providerStrategies":{"fleet":{"fallbackStrategy":"random"}}}}`, 200)
	for i := 1; i < 3; i++ {
		until(t, 5*time.Second, "strategy on "+f.c.Replica(i).Name, func() bool {
			r, err := f.manage[i].Do(context.Background(), "GET", "/api/settings", "")
			return err == nil && strings.Contains(string(r.Body), `"random"`)
		})
		until(t, 5*time.Second, "connections on "+f.c.Replica(i).Name, func() bool { return f.chat(t, f.c.Replica(i).URL(), "fleet/m1").Status == 200 })
	}
	served := func(via, session, nonce int) string {
		t.Helper()
		r := f.chatText(t, f.c.Replica(via).URL(), fmt.Sprintf("turn sy-nonce:%x", nonce), "X-Session-Id", fmt.Sprintf("t11-session-%d", session))
		if r.Status != 200 {
			t.Fatalf("session %d via %s: %d %s", session, f.c.Replica(via).Name, r.Status, r.Body)
		}
		hits := f.fu.HitsForNonce(fmt.Sprintf("%x", nonce))
		if len(hits) != 1 {
			t.Fatalf("session %d via %s: %d upstream hits", session, f.c.Replica(via).Name, len(hits))
		}
		return hits[0].KeyLabel
	}
	var lat []time.Duration
	kept, firsts := 0, map[string]int{}
	for s := range 20 {
		before := f.gauge(t, 1, "switchyard_affinity_pins")
		first := served(0, s, 0x1100+2*s)
		lat = append(lat, until(t, 5*time.Second, fmt.Sprintf("session %d's pin on B", s), func() bool {
			return f.gauge(t, 1, "switchyard_affinity_pins") > before
		}))
		next := served(1, s, 0x1101+2*s)
		firsts[first]++
		if next == first {
			kept++
		} else {
			t.Logf("session %d: pinned %s through A, served by %s through B", s, first, next)
		}
	}
	t.Logf("sessions kept on their connection across replicas: %d of 20 (first requests spread %v)", kept, firsts)
	t.Logf("pin propagation A → B over 20 sessions: p50 %v, p99 %v", percentile(lat, 50), percentile(lat, 99))
	if len(firsts) < 2 {
		t.Fatalf("every session pinned %v: the pool did not spread, the test proves nothing", firsts)
	}
	if kept < 19 {
		t.Fatalf("%d of 20 sessions kept their connection through another replica, want ≥ 19", kept)
	}
	if p99 := percentile(lat, 99); p99 > time.Second {
		t.Errorf("pin propagation p99 %v, want ≤ 1 s", p99)
	}
}

// gauge reads an unlabelled gauge from replica i's /metrics.
func (f *fleet) gauge(t *testing.T, i int, name string) float64 {
	t.Helper()
	r := f.manage[i].Must(t, "GET", "/metrics", "", 200)
	for _, line := range strings.Split(string(r.Body), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			x, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				t.Fatalf("%s on %s: %q", name, f.c.Replica(i).Name, line)
			}
			return x
		}
	}
	t.Fatalf("%s not in %s's metrics", name, f.c.Replica(i).Name)
	return 0
}

// chatText sends one chat completion of fleet/m1 with content through
// base with the fleet's key and extra header pairs.
func (f *fleet) chatText(t *testing.T, base, content string, headers ...string) cluster.Response {
	t.Helper()
	r, err := cluster.NewClient(base, f.key).Do(context.Background(), "POST", "/v1/chat/completions",
		`{"model":"fleet/m1","messages":[{"role":"user","content":"`+content+`"}]}`, headers...)
	if err != nil {
		t.Fatalf("chat via %s: %v", base, err)
	}
	return r
}
