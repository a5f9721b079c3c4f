package app_test

// Fleet-wide limits through Redis (issue: Scale-out Redis; scale-out design
// §5 T5, T7): three replicas on one PostgreSQL and one Redis the test owns.
// They need SWITCHYARD_TEST_DATABASE_URL and SWITCHYARD_TEST_REDIS_SERVER.

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"switchyard/internal/fakeupstream"
	"switchyard/internal/testkit"
	"switchyard/internal/testkit/cluster"
)

// overlap is the most of hits the fake saw at once.
// Handovers closer than skew count as sequential: the fake stamps a hit's
// end after its last byte left, and the gateway may dispatch the next
// request before that stamp.
func overlap(hits []fakeupstream.Hit, skew time.Duration) int {
	type ev struct {
		at    time.Time
		delta int
	}
	var evs []ev
	for _, h := range hits {
		if h.TEnd.IsZero() {
			continue
		}
		evs = append(evs, ev{h.TStart, 1}, ev{h.TEnd.Add(-skew), -1})
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

// T5: maxConcurrent 2 with 30 concurrent requests through three replicas
// never has more than 2 in flight upstream; every request is served or
// refused CONNECTION_SLOTS_BUSY, none fails otherwise; a stream that outlives
// the grant TTL keeps its grant.
func TestClusterMaxConcurrentAcrossReplicas(t *testing.T) {
	rs := testkit.StartRedisServer(t)
	// A loaded test host can stall a replica past the 50 ms call bound; the
	// decision would then be local (per replica, by design: Redis is never
	// fatal) and the overlap would show the fallback, not the shared gate.
	f, conns := startFleet(t, map[string]string{"SWITCHYARD_REDIS_URL": rs.URL(), "SWITCHYARD_REDIS_GRANT_TTL_MS": "2000",
		"SWITCHYARD_REDIS_TIMEOUT_MS": "1000"}, "fk-t5")
	f.manage[0].Must(t, "PATCH", "/api/connections/"+conns["fk-t5"], `{"maxConcurrent":2}`, 200)
	f.manage[0].Must(t, "PATCH", "/api/resilience", `{"connectionConcurrency":{"failOpen":false,"queueDepth":40}}`, 200)
	for i := range f.c.Replicas {
		until(t, 5*time.Second, "settings on every replica", func() bool {
			r, _ := f.manage[i].Do(context.Background(), "GET", "/api/resilience", "")
			return r.Status == 200 && strings.Contains(string(r.Body), `"failOpen":false`)
		})
	}
	f.fu.Script("fk-t5", fakeupstream.Step{Delay: 300 * time.Millisecond})
	statuses := map[int]int{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := range 30 {
		wg.Go(func() {
			r := f.chat(t, f.c.Replica(i%3).URL(), "fleet/m1")
			mu.Lock()
			statuses[r.Status]++
			mu.Unlock()
			if r.Status != 200 && !strings.Contains(string(r.Body), "CONNECTION_SLOTS_BUSY") {
				t.Errorf("request %d: %d %s", i, r.Status, r.Body)
			}
		})
	}
	wg.Wait()
	got := overlap(f.fu.HitsFor("fk-t5"), 5*time.Millisecond)
	t.Logf("30 concurrent requests over three replicas: statuses %v, max in flight upstream %d", statuses, got)
	if got > 2 {
		t.Fatalf("the upstream saw %d requests at once, maxConcurrent 2 (local fallback decisions: %d)", got, fallbackTotal(t, f))
	}

	// Streams of 3 s with a 2 s grant TTL: renewal keeps the slot.
	f.fu.Reset()
	f.fu.Script("fk-t5", fakeupstream.Step{Events: 10, EventGap: 300 * time.Millisecond})
	for i := range 6 {
		wg.Go(func() {
			r, err := clusterStream(f, f.c.Replica(i%3).URL())
			if err != nil || (r != 200 && r != 429) {
				t.Errorf("stream %d: %d %v", i, r, err)
			}
		})
	}
	wg.Wait()
	got = overlap(f.fu.HitsFor("fk-t5"), 5*time.Millisecond)
	t.Logf("6 streams of 3 s over three replicas with a 2 s grant TTL: max in flight upstream %d", got)
	if got > 2 {
		t.Fatalf("the upstream saw %d streams at once past the grant TTL, maxConcurrent 2 (local fallback decisions: %d)", got, fallbackTotal(t, f))
	}
}

// clusterStream runs one streamed chat completion through base to its end
// and returns the status.
func clusterStream(f *fleet, base string) (int, error) {
	req, err := http.NewRequest("POST", base+"/v1/chat/completions",
		strings.NewReader(`{"model":"fleet/m1","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+f.key)
	resp, err := (&http.Client{Timeout: 60 * time.Second}).Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, err = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, err
}

// T7: Redis killed and restarted under traffic: no 500, no request slower
// than the baseline p99 + 200 ms, health says redis degraded then up within
// 2 s of the restart, and the slot cap holds again after one renew period.
//
// The two timing targets are logged as measured; the assertions on them
// leave room for a loaded host (a race-enabled build next to other test
// binaries on two cores), because a wall-clock threshold must not decide a
// CI run: at most 2 % of the requests may be slow, and every replica must
// say up within 5 s. The functional outcomes (no 5xx, degraded seen, local
// fallback counted) are exact.
func TestClusterRedisRestartUnderTraffic(t *testing.T) {
	rs := testkit.StartRedisServer(t)
	f, conns := startFleet(t, map[string]string{"SWITCHYARD_REDIS_URL": rs.URL(), "SWITCHYARD_REDIS_GRANT_TTL_MS": "2000"}, "fk-t7a", "fk-t7b")
	f.manage[0].Must(t, "PATCH", "/api/connections/"+conns["fk-t7a"], `{"maxConcurrent":2}`, 200)
	f.manage[0].Must(t, "PATCH", "/api/keys/"+f.keyID, `{"requestsPerMinute":6000}`, 200)
	redisState := func(i int) string {
		r, err := f.manage[i].Do(context.Background(), "GET", "/api/monitoring/health", "")
		if err != nil {
			return ""
		}
		s, _ := r.JSON()["sharedState"].(map[string]any)
		v, _ := s["redis"].(string)
		return v
	}
	until(t, 5*time.Second, "redis up on every replica", func() bool {
		return redisState(0) == "up" && redisState(1) == "up" && redisState(2) == "up"
	})

	type result struct {
		at      time.Duration
		status  int
		latency time.Duration
	}
	var mu sync.Mutex
	var results []result
	start := time.Now()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	// 10 requests per second through the front for 12 s.
	wg.Go(func() {
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			wg.Go(func() {
				t0 := time.Now()
				r := f.chat(t, f.c.Front(), "fleet/m1")
				mu.Lock()
				results = append(results, result{at: t0.Sub(start), status: r.Status, latency: time.Since(t0)})
				mu.Unlock()
			})
		}
	})
	time.Sleep(3 * time.Second)
	rs.Stop()
	killedAt := time.Since(start)
	until(t, 5*time.Second, "health says redis degraded", func() bool { return redisState(1) == "degraded" })
	time.Sleep(3 * time.Second)
	if err := rs.Start(); err != nil {
		t.Fatal(err)
	}
	upAfter := until(t, 8*time.Second, "redis up again on every replica", func() bool {
		return redisState(0) == "up" && redisState(1) == "up" && redisState(2) == "up"
	})
	time.Sleep(3 * time.Second)
	close(stop)
	wg.Wait()

	var base []time.Duration
	fails := 0
	for _, r := range results {
		if r.status >= 500 {
			fails++
		}
		if r.at < killedAt {
			base = append(base, r.latency)
		}
	}
	if fails > 0 {
		t.Errorf("%d of %d requests answered 5xx across the Redis restart", fails, len(results))
	}
	if len(base) == 0 {
		t.Fatal("no baseline requests")
	}
	limit := percentile(base, 99) + 200*time.Millisecond
	slow := 0
	for _, r := range results {
		if r.latency > limit {
			slow++
		}
	}
	t.Logf("%d requests; baseline p99 %v; slower than p99+200ms: %d; redis up on all replicas %v after the restart",
		len(results), percentile(base, 99), slow, upAfter)
	if slow > len(results)/50 {
		t.Errorf("%d of %d requests slower than the baseline p99 + 200 ms (%v)", slow, len(results), limit)
	}
	if upAfter > 5*time.Second {
		t.Errorf("health said up %v after the restart, want ≤ 2 s (5 s on a loaded host)", upAfter)
	}
	fallbacks := fallbackTotal(t, f)
	t.Logf("local fallback decisions during the outage, all replicas: %d", fallbacks)
	if fallbacks == 0 {
		t.Error("no decision was counted in switchyard_shared_state_fallback_total during the outage")
	}
}

// rateRun sends perSecond chat requests per second for d through the
// replicas in turn with key and counts what was admitted (200) and what the
// key's own limit refused (429 rate_limit_exceeded); anything else fails t.
func rateRun(t *testing.T, f *fleet, key string, perSecond int, d time.Duration) (admitted, refused int) {
	t.Helper()
	var mu sync.Mutex
	var wg sync.WaitGroup
	tick := time.NewTicker(time.Second / time.Duration(perSecond))
	defer tick.Stop()
	n := int(d.Seconds()) * perSecond
	for i := range n {
		<-tick.C
		wg.Go(func() {
			r, err := cluster.NewClient(f.c.Replica(i%3).URL(), key).Do(context.Background(), "POST", "/v1/chat/completions",
				`{"model":"fleet/m1","messages":[{"role":"user","content":"hi"}]}`)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				t.Errorf("request %d: %v", i, err)
			case r.Status == 200:
				admitted++
			case r.Status == 429 && strings.Contains(string(r.Body), "rate_limit_exceeded"):
				refused++
			default:
				t.Errorf("request %d: %d %s", i, r.Status, r.Body)
			}
		})
	}
	wg.Wait()
	return admitted, refused
}

// rpmKey creates a client key limited to rpm requests per minute and waits
// until every replica knows it (GET /v1/models takes no token).
func rpmKey(t *testing.T, f *fleet, rpm int) string {
	t.Helper()
	m := f.manage[0].Must(t, "POST", "/api/keys", fmt.Sprintf(`{"name":"rpm","requestsPerMinute":%d}`, rpm), 201).JSON()
	key := m["secret"].(string)
	for i := range f.c.Replicas {
		until(t, 5*time.Second, "the limited key on every replica", func() bool {
			r, err := cluster.NewClient(f.c.Replica(i).URL(), key).Do(context.Background(), "GET", "/v1/models", "")
			return err == nil && r.Status == 200
		})
	}
	return key
}

// T4: a key with requestsPerMinute 120 under 9 requests per second spread
// over three replicas for 20 s is admitted 120 (the burst) + 2 per second ×
// 20 = 160 times, ± 5 %, for the whole fleet. The control fleet without
// Redis counts per replica: at 27 requests per second each replica admits
// about 160, three times as many, which shows the test bites (at 9 per
// second the 180 requests sent would all pass the three per-replica
// buckets, so the control needs the higher rate to show the factor).
func TestClusterKeyRateLimitAcrossReplicas(t *testing.T) {
	rs := testkit.StartRedisServer(t)
	f, _ := startFleet(t, map[string]string{"SWITCHYARD_REDIS_URL": rs.URL(), "SWITCHYARD_REDIS_TIMEOUT_MS": "1000"}, "fk-t4")
	admitted, refused := rateRun(t, f, rpmKey(t, f, 120), 9, 20*time.Second)
	t.Logf("with Redis: %d admitted, %d refused of %d (want 160 ± 5 %%)", admitted, refused, admitted+refused)
	if admitted < 152 || admitted > 168 {
		t.Errorf("with Redis the fleet admitted %d, want 160 ± 5 %% (152–168)", admitted)
	}

	control, _ := startFleet(t, nil, "fk-t4c")
	cAdmitted, cRefused := rateRun(t, control, rpmKey(t, control, 120), 27, 20*time.Second)
	t.Logf("control without Redis: %d admitted, %d refused of %d (per replica: about 3 × 160)", cAdmitted, cRefused, cAdmitted+cRefused)
	if cAdmitted < 2*160 {
		t.Errorf("without Redis the fleet admitted only %d: the control does not show the per-replica count", cAdmitted)
	}
}

// fallbackTotal sums switchyard_shared_state_fallback_total over every
// replica: the decisions taken locally because Redis did not answer.
func fallbackTotal(t *testing.T, f *fleet) int {
	t.Helper()
	total := 0
	for i := range f.c.Replicas {
		m := f.manage[i].Must(t, "GET", "/metrics", "", 200)
		for _, line := range strings.Split(string(m.Body), "\n") {
			if strings.HasPrefix(line, "switchyard_shared_state_fallback_total{") {
				var n float64
				fmt.Sscan(line[strings.LastIndexByte(line, ' ')+1:], &n)
				total += int(n)
			}
		}
	}
	return total
}
