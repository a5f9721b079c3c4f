package app_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"switchyard/internal/testkit"
	"switchyard/internal/testkit/cluster"
)

// monitor records the commands a Redis server receives (MONITOR) until
// stop; each command is its arguments.
type monitor struct {
	conn net.Conn
	mu   sync.Mutex
	cmds [][]string
	done chan struct{}
}

var monitorArg = regexp.MustCompile(`"((?:[^"\\]|\\.)*)"`)

func startMonitor(t *testing.T, redisURL string) *monitor {
	t.Helper()
	u, err := url.Parse(redisURL)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Write([]byte("MONITOR\r\n")); err != nil {
		t.Fatal(err)
	}
	rd := bufio.NewReader(conn)
	if line, err := rd.ReadString('\n'); err != nil || line != "+OK\r\n" {
		t.Fatalf("MONITOR: %q %v", line, err)
	}
	m := &monitor{conn: conn, done: make(chan struct{})}
	go func() {
		defer close(m.done)
		for {
			line, err := rd.ReadString('\n')
			if err != nil {
				return
			}
			var args []string
			for _, a := range monitorArg.FindAllStringSubmatch(line, -1) {
				args = append(args, a[1])
			}
			m.mu.Lock()
			m.cmds = append(m.cmds, args)
			m.mu.Unlock()
		}
	}()
	t.Cleanup(m.stop)
	return m
}

func (m *monitor) stop() {
	m.conn.Close()
	<-m.done
}

// drain waits until the monitor has seen a marker command sent after
// everything before it (MONITOR's output lags behind the commands), then
// stops it.
func (m *monitor) drain(t *testing.T, redisURL string) {
	t.Helper()
	u, _ := url.Parse(redisURL)
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte("ECHO monitor-drained\r\n")); err != nil {
		t.Fatal(err)
	}
	seen := func() bool {
		m.mu.Lock()
		defer m.mu.Unlock()
		for _, c := range m.cmds {
			if len(c) == 2 && c[1] == "monitor-drained" {
				return true
			}
		}
		return false
	}
	until(t, 10*time.Second, "the monitor's output caught up", seen)
	m.stop()
}

// admissions counts the admission scripts among the EVALSHA commands seen,
// by their keys: a key's limits (keyAdmit: the key's rate bucket first), a
// slot alone (slotAcquire: 4 keys, the waiters second), a queue alone
// (queueDecide: 5 keys, the running grants second) and a slot with its
// queue (dispatchAdmit: 9 keys, both). Releases and renewals have other
// keys and are not counted.
func (m *monitor) admissions() map[string]int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := map[string]int{}
	for _, c := range m.cmds {
		if len(c) < 4 || !strings.EqualFold(c[0], "evalsha") {
			continue
		}
		nkeys, _ := strconv.Atoi(c[2])
		keys := c[3:min(len(c), 3+nkeys)]
		switch {
		case nkeys == 2 && strings.HasPrefix(keys[0], "sy:krpm:"):
			n["key"]++
		case nkeys == 4 && strings.HasSuffix(keys[1], ":wq"):
			n["slot"]++
		case nkeys == 5 && strings.HasSuffix(keys[1], ":run"):
			n["queue"]++
		case nkeys == 9 && strings.HasSuffix(keys[1], ":wq") && strings.HasSuffix(keys[5], ":run"):
			n["slot+queue"]++
		}
	}
	return n
}

// A request by a key with its own limits through a connection with both
// max_concurrent and rate-limit protection (with limits that never make it
// wait) makes two admission round trips to Redis when its limits are small
// (below the size that keeps reserves): the key's limits at the edge, then
// one script for the slot and the queue of its dispatch — not a slot script
// and then a queue script. With room to spare (the limits a production
// fleet sets far above its traffic) the replica's reserves answer, and the
// same requests make none.
func TestClusterRedisAdmissionRoundTrips(t *testing.T) {
	rs := testkit.StartRedisServer(t)
	f, conns := startFleet(t, map[string]string{"SWITCHYARD_REDIS_URL": rs.URL(), "SWITCHYARD_REDIS_TIMEOUT_MS": "1000"}, "fk-rt")
	protect := `"rateLimitProtection":true,"rateLimitOverrides":{"requestsPerMinute":1000000,"minTimeBetweenRequestsMs":0,"concurrentRequests":10000}}`
	base := f.c.Replica(0).URL()
	run := func(maxConcurrent, keyConcurrency int) map[string]int {
		t.Helper()
		f.manage[0].Must(t, "PATCH", "/api/connections/"+conns["fk-rt"], fmt.Sprintf(`{"maxConcurrent":%d,`, maxConcurrent)+protect, 200)
		m := f.manage[0].Must(t, "POST", "/api/keys", fmt.Sprintf(`{"name":"limited-%d","requestsPerMinute":10000,"maxConcurrentRequests":%d}`,
			keyConcurrency, keyConcurrency), 201).JSON()
		client := cluster.NewClient(base, m["secret"].(string))
		chat := func() int {
			r, err := client.Do(context.Background(), "POST", "/v1/chat/completions", `{"model":"fleet/m1","messages":[{"role":"user","content":"hi"}]}`)
			if err != nil {
				t.Fatal(err)
			}
			return r.Status
		}
		// The settings and the key reach the replica; the scripts get loaded.
		want := fmt.Sprintf(`"maxConcurrent":%d`, maxConcurrent)
		until(t, 10*time.Second, "the limited key admitted through both gates", func() bool {
			r, _ := f.manage[0].Do(context.Background(), "GET", "/api/connections/"+conns["fk-rt"], "")
			return r.Status == 200 && strings.Contains(string(r.Body), `"rateLimitProtection":true`) &&
				strings.Contains(string(r.Body), want) && chat() == 200
		})
		mon := startMonitor(t, rs.URL())
		defer mon.stop()
		for i := range admissionRequests {
			if s := chat(); s != 200 {
				t.Fatalf("request %d: status %d", i, s)
			}
		}
		mon.drain(t, rs.URL())
		got := mon.admissions()
		t.Logf("maxConcurrent %d, key concurrency %d: admission scripts for %d requests: %v",
			maxConcurrent, keyConcurrency, admissionRequests, got)
		return got
	}
	const n = admissionRequests
	if got := run(10, 4); got["key"] != n || got["slot+queue"] != n || got["slot"] != 0 || got["queue"] != 0 {
		t.Fatalf("small limits: admissions %v for %d requests, want %d key and %d slot+queue, no slot or queue alone (local fallback decisions: %d)",
			got, n, n, n, fallbackTotal(t, f))
	}
	// Roomy limits: the warm-up left a token block and a spare grant of the
	// key, a spare slot and the queue's block and spare; an idle sweep
	// between the warm-up and the requests may give the spares back once.
	if got := run(1000, 1000); got["key"] > 1 || got["slot+queue"]+got["slot"] > 1 || got["queue"] > 1 {
		t.Fatalf("roomy limits: admissions %v for %d requests, want at most one of each (local fallback decisions: %d)",
			got, n, fallbackTotal(t, f))
	}
	// The health report shows what the replica holds.
	r := f.manage[0].Must(t, "GET", "/api/monitoring/health", "", 200).JSON()
	shared, _ := r["sharedState"].(map[string]any)
	res, _ := shared["reserves"].(map[string]any)
	if spares, _ := res["spareGrants"].(float64); spares < 1 {
		t.Fatalf("sharedState.reserves %v after requests with roomy limits, want spare grants", shared["reserves"])
	}
	if tokens, _ := res["blockTokens"].(float64); tokens < 1 {
		t.Fatalf("sharedState.reserves %v, want the unspent tokens of the key's and the queue's blocks", shared["reserves"])
	}
}

// admissionRequests is how many requests each phase counts.
const admissionRequests = 10
