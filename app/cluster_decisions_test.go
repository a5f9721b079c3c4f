package app_test

// Resilience decisions shared by a fleet (scale-out design §5 T1, T2, T12):
// a decision taken on one replica — a cooldown, an episode, a breaker
// transition, a half-open probe grant — is written to PostgreSQL with a
// compare-and-set and reaches every other replica's mirror through the
// change feed. Like the other cluster tests they need
// SWITCHYARD_TEST_DATABASE_URL and skip without it.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"switchyard/internal/fakeupstream"
	"switchyard/internal/testkit"
)

// cooldownItem is one connection of GET /api/resilience/cooldowns: the
// replica's live routing state (its mirror).
type cooldownItem struct {
	ID                  string `json:"id"`
	Status              string `json:"status"`
	CooldownRemainingMs int64  `json:"cooldownRemainingMs"`
	BackoffLevel        int    `json:"backoffLevel"`
}

func (it cooldownItem) cooling() bool { return it.Status == "cooling" || it.CooldownRemainingMs > 0 }

// cooldowns returns replica i's view of the fleet provider's connections.
func (f *fleet) cooldowns(t *testing.T, i int) map[string]cooldownItem {
	t.Helper()
	r, err := f.manage[i].Do(context.Background(), "GET", "/api/resilience/cooldowns?provider=fleet", "")
	if err != nil || r.Status != 200 {
		return nil
	}
	var out struct {
		Connections []cooldownItem `json:"connections"`
	}
	if json.Unmarshal(r.Body, &out) != nil {
		return nil
	}
	m := map[string]cooldownItem{}
	for _, it := range out.Connections {
		m[it.ID] = it
	}
	return m
}

// breakerView is the fleet provider's breaker as replica i's health report
// shows it (zero State: no breaker, i.e. CLOSED with a zero count).
type breakerView struct {
	State        string `json:"state"`
	FailureCount int    `json:"failureCount"`
}

func (f *fleet) breaker(t *testing.T, i int) (breakerView, bool) {
	t.Helper()
	r, err := f.manage[i].Do(context.Background(), "GET", "/api/monitoring/health", "")
	if err != nil || r.Status != 200 {
		return breakerView{}, false
	}
	var out struct {
		Breakers []struct {
			Provider string `json:"provider"`
			breakerView
		} `json:"breakers"`
	}
	if json.Unmarshal(r.Body, &out) != nil {
		return breakerView{}, false
	}
	for _, b := range out.Breakers {
		if b.Provider == "fleet" {
			return b.breakerView, true
		}
	}
	return breakerView{State: "CLOSED"}, true
}

// metricSum adds up one counter's series for provider "fleet" on replica i.
func (f *fleet) metricSum(t *testing.T, i int, name string) float64 {
	t.Helper()
	r := f.manage[i].Must(t, "GET", "/metrics", "", 200)
	var sum float64
	sc := bufio.NewScanner(bytes.NewReader(r.Body))
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name+"{") || !strings.Contains(line, `provider="fleet"`) {
			continue
		}
		if v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64); err == nil {
			sum += v
		}
	}
	return sum
}

// patchEverywhere applies a resilience settings patch through replica 0 and
// waits until every replica serves it (marker: a fragment of the document).
func (f *fleet) patchEverywhere(t *testing.T, patch, marker string) {
	t.Helper()
	f.manage[0].Must(t, "PATCH", "/api/resilience", patch, 200)
	for i := range f.manage {
		until(t, 5*time.Second, "settings on "+f.c.Replica(i).Name, func() bool {
			r, err := f.manage[i].Do(context.Background(), "GET", "/api/resilience", "")
			return err == nil && bytes.Contains(compactJSON(r.Body), []byte(marker))
		})
	}
}

func compactJSON(b []byte) []byte {
	var buf bytes.Buffer
	if json.Compact(&buf, b) != nil {
		return b
	}
	return buf.Bytes()
}

// seeAll waits until every replica lists the connections.
func (f *fleet) seeAll(t *testing.T, ids ...string) {
	t.Helper()
	for i := range f.manage {
		until(t, 5*time.Second, "connections on "+f.c.Replica(i).Name, func() bool {
			m := f.cooldowns(t, i)
			for _, id := range ids {
				if _, ok := m[id]; !ok {
					return false
				}
			}
			return true
		})
	}
}

// T1: a 429 on replica A cools the connection on B and C within 1 s (p50
// and p99 over 20 trials, both replicas each trial), and while it cools
// the upstream sees no further request for it through B or C (their
// traffic goes to the second connection).
func TestClusterCooldownReachesEveryReplica(t *testing.T) {
	f, conns := startFleet(t, nil, "fk-t1-a", "fk-t1-b")
	k1, k2 := conns["fk-t1-a"], conns["fk-t1-b"]
	// No session pins: every request starts at K1 when it is eligible (a
	// pin to the fallback would keep later trials off K1).
	f.patchEverywhere(t, `{"sessionAffinity":{"ttlMs":0}}`, `"ttlMs":0`)
	// Fill-first: K1 is tried first, K2 is the fallback.
	f.manage[0].Must(t, "PATCH", "/api/connections/"+k1, `{"priority":1}`, 200)
	f.manage[0].Must(t, "PATCH", "/api/connections/"+k2, `{"priority":2}`, 200)
	f.seeAll(t, k1, k2)
	for i := range f.manage {
		until(t, 5*time.Second, "priorities on "+f.c.Replica(i).Name, func() bool {
			r := f.chat(t, f.c.Replica(i).URL(), "fleet/m1")
			return r.Status == 200 && r.Header.Get("X-Switchyard-Selected-Connection-Id") == k1
		})
	}

	var lat []time.Duration
	for trial := range 20 {
		f.fu.Script("fk-t1-a", fakeupstream.Step{Status: 429, RetryAfter: "30"})
		before := f.fu.CountFor("fk-t1-a")
		r := f.chat(t, f.c.Replica(0).URL(), "fleet/m1")
		t0 := time.Now()
		if r.Status != 200 || r.Header.Get("X-Switchyard-Selected-Connection-Id") != k2 {
			t.Fatalf("trial %d: request via A answered %d on %q, want 200 on K2 after K1's 429: %s",
				trial, r.Status, r.Header.Get("X-Switchyard-Selected-Connection-Id"), r.Body)
		}
		if got := f.fu.CountFor("fk-t1-a"); got != before+1 {
			st, _ := f.manage[0].Do(context.Background(), "GET", "/api/resilience/cooldowns?provider=fleet", "")
			t.Fatalf("trial %d: K1 received %d requests, want 1; A's view: %s", trial, got-before, st.Body)
		}
		if !f.cooldowns(t, 0)[k1].cooling() {
			t.Fatalf("trial %d: K1 not cooling on A after its 429", trial)
		}
		var mu sync.Mutex
		var wg sync.WaitGroup
		for i := 1; i < 3; i++ {
			wg.Go(func() {
				ok := false
				deadline := t0.Add(5 * time.Second)
				for time.Now().Before(deadline) {
					if f.cooldowns(t, i)[k1].cooling() {
						ok = true
						break
					}
					time.Sleep(10 * time.Millisecond)
				}
				d := time.Since(t0)
				mu.Lock()
				defer mu.Unlock()
				if !ok {
					t.Errorf("trial %d: K1 not cooling on %s within 5 s", trial, f.c.Replica(i).Name)
					return
				}
				lat = append(lat, d)
			})
		}
		wg.Wait()
		if t.Failed() {
			t.FailNow()
		}
		// Traffic through B and C while K1 cools: served by K2, none for K1.
		for i := 1; i < 3; i++ {
			for range 2 {
				r := f.chat(t, f.c.Replica(i).URL(), "fleet/m1")
				if r.Status != 200 || r.Header.Get("X-Switchyard-Selected-Connection-Id") != k2 {
					t.Fatalf("trial %d: request via %s answered %d on %q, want 200 on K2", trial, f.c.Replica(i).Name,
						r.Status, r.Header.Get("X-Switchyard-Selected-Connection-Id"))
				}
			}
		}
		if got := f.fu.CountFor("fk-t1-a"); got != before+1 {
			t.Fatalf("trial %d: K1 received %d requests while cooling, want only the one that cooled it", trial, got-before-1)
		}
		// Next trial: an admin reset through A, seen by every replica.
		f.manage[0].Must(t, "POST", "/api/connections/"+k1+"/reset", "", 200)
		for i := range f.manage {
			until(t, 5*time.Second, "reset on "+f.c.Replica(i).Name, func() bool {
				it, ok := f.cooldowns(t, i)[k1]
				return ok && !it.cooling()
			})
		}
	}
	p50, p99 := percentile(lat, 50), percentile(lat, 99)
	t.Logf("cooldown propagation A → B, C over 20 trials (%d samples): p50 %v, p99 %v", len(lat), p50, p99)
	if p99 > time.Second {
		t.Errorf("cooldown p99 propagation %v, want ≤ 1 s", p99)
	}
}

// T2: 30 concurrent failures of one connection, 10 through each replica,
// are one episode fleet-wide: backoff level 1 on every replica (not 3, not
// 30), the breaker counted once, one cooldown applied across the fleet.
func TestClusterConcurrentFailuresAreOneEpisode(t *testing.T) {
	f, conns := startFleet(t, nil, "fk-t2")
	k1 := conns["fk-t2"]
	// No waiting out the cooldown (a retry after it would be a second
	// episode) and a breaker that does not open on one episode.
	f.patchEverywhere(t, `{"waitForCooldown":{"enabled":false},"providerBreaker":{"apikey":{"failureThreshold":10,"degradationThreshold":5}}}`,
		`"waitForCooldown":{"enabled":false`)
	f.seeAll(t, k1)
	for i := range f.manage {
		until(t, 5*time.Second, "connection served on "+f.c.Replica(i).Name, func() bool {
			return f.chat(t, f.c.Replica(i).URL(), "fleet/m1").Status == 200
		})
	}
	var cooldownsBefore float64
	for i := range f.manage {
		cooldownsBefore += f.metricSum(t, i, "switchyard_cooldowns_applied_total")
	}
	// Every request is in flight before the first answer: the fake holds
	// each 503 for 1.5 s.
	f.fu.Script("fk-t2", fakeupstream.Step{Status: 503, Times: 30, Delay: 1500 * time.Millisecond})
	before := f.fu.CountFor("fk-t2")
	statuses := make([]int, 30)
	var wg sync.WaitGroup
	for n := range 30 {
		wg.Go(func() {
			statuses[n] = f.chat(t, f.c.Replica(n%3).URL(), "fleet/m1").Status
		})
	}
	wg.Wait()
	hits := f.fu.CountFor("fk-t2") - before
	for n, s := range statuses {
		if s == 200 || s == 500 {
			t.Errorf("request %d answered %d, want the upstream's failure passed on", n, s)
		}
	}
	if hits < 30 {
		t.Fatalf("the upstream saw %d of the 30 requests, want all in flight together", hits)
	}
	var cooldowns float64
	for i := range f.manage {
		cooldowns += f.metricSum(t, i, "switchyard_cooldowns_applied_total")
	}
	episodes := cooldowns - cooldownsBefore
	levels := make([]int, 3)
	counts := make([]int, 3)
	for i := range f.manage {
		until(t, 5*time.Second, "K1 cooling on "+f.c.Replica(i).Name, func() bool {
			it := f.cooldowns(t, i)[k1]
			levels[i] = it.BackoffLevel
			return it.cooling()
		})
		until(t, 5*time.Second, "breaker counted on "+f.c.Replica(i).Name, func() bool {
			b, ok := f.breaker(t, i)
			counts[i] = b.FailureCount
			return ok && b.FailureCount > 0
		})
	}
	t.Logf("30 concurrent failures (%d upstream hits) through 3 replicas: %v episode(s), backoff levels %v, breaker counts %v, statuses %v",
		hits, episodes, levels, counts, statuses)
	if episodes != 1 {
		t.Errorf("cooldowns applied across the fleet: %v, want 1 episode", episodes)
	}
	for i := range f.manage {
		if levels[i] != 1 {
			t.Errorf("backoff level on %s: %d, want 1", f.c.Replica(i).Name, levels[i])
		}
		if counts[i] != 1 {
			t.Errorf("breaker failure count on %s: %d, want 1", f.c.Replica(i).Name, counts[i])
		}
	}
}

// T12: one provider's three connections fail through replica A until its
// breaker opens; B and C refuse the provider within 1 s without calling
// the upstream; once the reset time has passed, concurrent traffic through
// all three replicas sends at most halfOpenRequests probes fleet-wide
// before the first probe's success closes the breaker.
func TestClusterBreakerSharedWithBoundedProbes(t *testing.T) {
	keys := []string{"fk-t12-a", "fk-t12-b", "fk-t12-c"}
	f, conns := startFleet(t, nil, keys...)
	const halfOpen = 1
	f.patchEverywhere(t, fmt.Sprintf(`{"waitForCooldown":{"enabled":false},`+
		`"connectionCooldown":{"apikey":{"baseCooldownMs":1000,"maxCooldownMs":1000}},`+
		`"providerBreaker":{"apikey":{"failureThreshold":3,"degradationThreshold":2,"resetTimeoutMs":4000,"halfOpenRequests":%d}}}`, halfOpen),
		fmt.Sprintf(`"halfOpenRequests":%d`, halfOpen))
	var ids []string
	for p, k := range keys {
		ids = append(ids, conns[k])
		f.manage[0].Must(t, "PATCH", "/api/connections/"+conns[k], fmt.Sprintf(`{"priority":%d}`, p+1), 200)
	}
	f.seeAll(t, ids...)
	for i := range f.manage {
		until(t, 5*time.Second, "connections served on "+f.c.Replica(i).Name, func() bool {
			return f.chat(t, f.c.Replica(i).URL(), "fleet/m1").Status == 200
		})
	}

	// Every connection answers 503 through A: one episode each, three
	// counted failures, OPEN.
	for _, k := range keys {
		f.fu.Script(k, fakeupstream.Step{Status: 503, Times: 100})
	}
	until(t, 10*time.Second, "breaker OPEN on A", func() bool {
		f.chat(t, f.c.Replica(0).URL(), "fleet/m1")
		b, _ := f.breaker(t, 0)
		return b.State == "OPEN"
	})
	t0 := time.Now()
	var lat []time.Duration
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := 1; i < 3; i++ {
		wg.Go(func() {
			ok := testkit.PollUntil(5*time.Second, func() bool { b, _ := f.breaker(t, i); return b.State == "OPEN" })
			d := time.Since(t0)
			mu.Lock()
			defer mu.Unlock()
			if !ok {
				t.Errorf("breaker not OPEN on %s within 5 s", f.c.Replica(i).Name)
				return
			}
			lat = append(lat, d)
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	t.Logf("breaker OPEN propagation A → B, C: %v", lat)
	for _, d := range lat {
		if d > time.Second {
			t.Errorf("breaker OPEN reached a replica after %v, want ≤ 1 s", d)
		}
	}
	// The upstream recovers, slowly: a probe's success takes 1.5 s.
	for _, k := range keys {
		f.fu.Script(k, fakeupstream.Step{Delay: 1500 * time.Millisecond, Times: 1000})
	}
	hitsOpen := f.fu.Count()
	for i := 1; i < 3; i++ {
		r := f.chat(t, f.c.Replica(i).URL(), "fleet/m1")
		if r.Status == 200 {
			t.Errorf("request via %s served while the breaker is OPEN", f.c.Replica(i).Name)
		}
		t.Logf("via %s while OPEN: %d %s", f.c.Replica(i).Name, r.Status, r.Header.Get("X-Switchyard-Error-Code"))
	}
	if got := f.fu.Count() - hitsOpen; got != 0 {
		t.Errorf("the upstream received %d requests while the breaker was OPEN", got)
	}

	// HALF_OPEN once the reset time has passed (a health read moves it).
	until(t, 10*time.Second, "breaker HALF_OPEN", func() bool {
		b, _ := f.breaker(t, 1)
		return b.State == "HALF_OPEN"
	})
	start := f.fu.Count()
	statuses := make([]int, 30)
	for n := range 30 {
		wg.Go(func() {
			statuses[n] = f.chat(t, f.c.Replica(n%3).URL(), "fleet/m1").Status
		})
	}
	wg.Wait()
	hits := f.fu.Hits()[start:]
	// The probes are the requests the upstream received before the first
	// success ended (after it the breaker is CLOSED and traffic flows).
	var firstEnd time.Time
	for _, h := range hits {
		if h.Status == 200 && h.Ended() && (firstEnd.IsZero() || h.TEnd.Before(firstEnd)) {
			firstEnd = h.TEnd
		}
	}
	probes := 0
	for _, h := range hits {
		if firstEnd.IsZero() || h.TStart.Before(firstEnd) {
			probes++
		}
	}
	served := 0
	for _, s := range statuses {
		if s == 200 {
			served++
		}
	}
	t.Logf("HALF_OPEN: 30 concurrent requests through 3 replicas, %d probe(s) reached the upstream (limit %d), %d served, %d upstream hits in all",
		probes, halfOpen, served, len(hits))
	if probes == 0 || probes > halfOpen {
		t.Errorf("probes fleet-wide during HALF_OPEN: %d, want 1..%d", probes, halfOpen)
	}
	until(t, 5*time.Second, "breaker CLOSED everywhere after the probe's success", func() bool {
		for i := range f.manage {
			if b, _ := f.breaker(t, i); b.State != "CLOSED" {
				return false
			}
		}
		return true
	})
}
