package app_test

// T8 of the scale-out design (§5): the shared PostgreSQL restarted under
// traffic. A server of the test's own (initdb + pg_ctl), never the shared
// test server: it is stopped for a few seconds and started again while
// three replicas serve.

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"switchyard/internal/fakeupstream"
	"switchyard/internal/testkit"
	"switchyard/internal/testkit/cluster"
)

// replicaHealth is the part of the admin health report T8 reads.
type replicaHealth struct {
	Status   string `json:"status"`
	Database struct {
		OK     bool   `json:"ok"`
		Status string `json:"status"`
	} `json:"database"`
	ChangeFeed *struct {
		Connected    bool   `json:"connected"`
		LastResyncAt string `json:"lastResyncAt"`
		Reconnects   int64  `json:"reconnects"`
	} `json:"changeFeed"`
}

func healthOf(t *testing.T, c *cluster.Client) (int, replicaHealth) {
	t.Helper()
	r, err := c.Do(context.Background(), "GET", "/api/monitoring/health", "")
	if err != nil {
		t.Fatalf("health via %s: %v", c.Base, err)
	}
	var h replicaHealth
	_ = json.Unmarshal(r.Body, &h)
	return r.Status, h
}

// publicStatus reads an unauthenticated health endpoint of base.
func publicStatus(t *testing.T, base, path string) (int, string) {
	t.Helper()
	r, err := cluster.NewClient(base, "").Do(context.Background(), "GET", path, "")
	if err != nil {
		t.Fatalf("GET %s%s: %v", base, path, err)
	}
	return r.Status, fmt.Sprint(r.JSON()["status"])
}

func TestClusterPostgresRestartMidTraffic(t *testing.T) {
	pg := testkit.StartPostgresServer(t)
	f, _ := startFleetOn(t, pg.URL(), nil, "fk-t8-1", "fk-t8-2")
	ctx := context.Background()
	names := []string{"A", "B", "C"}
	// K3 is the only connection of its provider: its 429 during the outage
	// is the cooldown that must reach the other replicas afterwards.
	k3 := f.manage[0].Must(t, "POST", "/api/connections", fmt.Sprintf(
		`{"provider":"fleet3","name":"k3","apiKey":"fk-t8-3","baseUrl":"%s/v1","custom":{"wireFormat":"openai","authClass":"apikey"}}`,
		f.fu.URL()), 201).JSON()["id"].(string)
	for i := range 3 {
		base := f.c.Replica(i).URL()
		until(t, 5*time.Second, "setup visible on "+names[i], func() bool {
			return f.chat(t, base, "fleet3/m1").Status == 200
		})
	}
	feedBefore := make([]replicaHealth, 3)
	for i := range 3 {
		_, feedBefore[i] = healthOf(t, f.manage[i])
		if feedBefore[i].ChangeFeed == nil || !feedBefore[i].ChangeFeed.Connected {
			t.Fatalf("%s's change feed before the restart: %+v", names[i], feedBefore[i].ChangeFeed)
		}
	}

	stop := steadyTraffic(f, "fleet/m1", 100*time.Millisecond) // 10 req/s
	time.Sleep(2 * time.Second)                                // traffic on every replica first

	// The database goes away.
	if err := pg.Stop(); err != nil {
		t.Fatal(err)
	}
	down := time.Now()

	// Admin writes: 503 with Retry-After on every replica, never 500.
	for i, m := range f.manage {
		var r cluster.Response
		if !testkit.PollUntil(5*time.Second, func() bool {
			r, _ = m.Do(ctx, "PATCH", "/api/resilience", `{"sessionAffinity":{"ttlMs":1111000}}`)
			return r.Status != 200
		}) || r.Status != http.StatusServiceUnavailable || r.Header.Get("Retry-After") == "" {
			t.Errorf("settings PATCH via %s during the outage: %d Retry-After %q %s, want 503 with Retry-After",
				names[i], r.Status, r.Header.Get("Retry-After"), r.Body)
		}
		r, _ = m.Do(ctx, "POST", "/api/keys", `{"name":"during-the-outage"}`)
		if r.Status != http.StatusServiceUnavailable || r.Header.Get("Retry-After") == "" {
			t.Errorf("key create via %s during the outage: %d %s, want 503 with Retry-After", names[i], r.Status, r.Body)
		}
	}
	// Health: the admin report says database degraded; what a load
	// balancer polls stays 200 "degraded", so no replica is pulled out.
	for i, m := range f.manage {
		var h replicaHealth
		var code int
		if !testkit.PollUntil(5*time.Second, func() bool {
			code, h = healthOf(t, m)
			return h.Database.Status == "degraded"
		}) || code != 200 || h.Status != "degraded" || h.Database.OK {
			t.Errorf("admin health via %s during the outage: %d %+v", names[i], code, h)
		}
		for _, path := range []string{"/api/monitoring/health", "/healthz"} {
			if code, st := publicStatus(t, f.c.Replica(i).URL(), path); code != 200 || st != "degraded" {
				t.Errorf("%s via %s during the outage: %d %q, want 200 degraded", path, names[i], code, st)
			}
		}
	}
	// A decision taken during the outage: a 429 through A cools K3 there.
	f.fu.Script("fk-t8-3", fakeupstream.Step{Status: 429, RetryAfter: "600"}, fakeupstream.Step{})
	if r := f.chat(t, f.c.Replica(0).URL(), "fleet3/m1"); r.Status != 429 {
		t.Errorf("K3's 429 via A during the outage: %d %s", r.Status, r.Body)
	}
	if st := connStateMirror(t, f.manage[0], k3); st != "cooling" {
		t.Errorf("K3 on A right after its 429 during the outage: %q, want cooling", st)
	}
	time.Sleep(time.Until(down.Add(4 * time.Second))) // traffic through a 4 s outage

	// The database is back.
	if err := pg.Start(); err != nil {
		t.Fatal(err)
	}
	up := time.Now()
	recovered := make([]time.Duration, 3)
	for i, m := range f.manage {
		recovered[i] = until(t, 30*time.Second, "admin writes via "+names[i]+" after the restart", func() bool {
			r, _ := m.Do(ctx, "POST", "/api/keys", fmt.Sprintf(`{"name":"after-the-outage-%d"}`, i))
			return r.Status == http.StatusCreated
		})
	}
	// Every listener reconnected and resynced after the restart.
	for i, m := range f.manage {
		var h replicaHealth
		until(t, 15*time.Second, names[i]+"'s change feed resynced after the restart", func() bool {
			_, h = healthOf(t, m)
			at, _ := time.Parse(time.RFC3339Nano, h.ChangeFeed.LastResyncAt)
			return h.ChangeFeed != nil && h.ChangeFeed.Connected && at.After(up) && h.Database.OK
		})
		if h.ChangeFeed.Reconnects <= feedBefore[i].ChangeFeed.Reconnects {
			t.Errorf("%s's feed reconnects %d → %d, want more", names[i], feedBefore[i].ChangeFeed.Reconnects, h.ChangeFeed.Reconnects)
		}
		if code, st := publicStatus(t, f.c.Replica(i).URL(), "/api/monitoring/health"); code != 200 || st != "ok" {
			t.Errorf("public health via %s after the restart: %d %q", names[i], code, st)
		}
	}
	// The feed carries changes again: a PATCH via A reaches B and C within 1 s.
	etag := f.manage[0].Must(t, "PATCH", "/api/resilience", `{"sessionAffinity":{"ttlMs":2222000}}`, 200).Header.Get("ETag")
	for i := 1; i < 3; i++ {
		if !testkit.PollUntil(time.Second, func() bool {
			return f.manage[i].Must(t, "GET", "/api/resilience", "", 200).Header.Get("ETag") == etag
		}) {
			t.Errorf("settings PATCHed via A after the restart did not reach %s within 1 s", names[i])
		}
	}
	// The cooldown A took while the database was away: A keeps applying it
	// (its mirror is the authority for its own routing), and once the store
	// answers, A's decision flusher reconciles it (extend-only) and the
	// change feed carries it: B and C see K3 cooling too.
	if st := connStateMirror(t, f.manage[0], k3); st != "cooling" {
		t.Errorf("K3 on A after the restart: %q, want still cooling", st)
	}
	var reconciled time.Duration
	for i := 1; i < 3; i++ {
		var st string
		ok := testkit.PollUntil(10*time.Second, func() bool {
			st = connStateMirror(t, f.manage[i], k3)
			return st == "cooling"
		})
		if !ok {
			t.Errorf("K3, cooled by A during the outage, on %s 10 s after the restart: %q, want cooling", names[i], st)
		}
		reconciled = max(reconciled, time.Since(up))
	}
	// And no replica sends K3 another request while it cools.
	k3Before := f.fu.CountFor("fk-t8-3")
	for i := range 3 {
		if r := f.chat(t, f.c.Replica(i).URL(), "fleet3/m1"); r.Status == 200 {
			t.Errorf("K3's only connection cooling, a request via %s was served: %s", names[i], r.Body)
		}
	}
	if n := f.fu.CountFor("fk-t8-3") - k3Before; n != 0 {
		t.Errorf("the upstream saw %d requests for K3 while the fleet knew it cooling", n)
	}
	t.Logf("K3's outage cooldown on B and C %v after the database was back", reconciled)
	time.Sleep(time.Second) // traffic after the restart
	traffic := stop()

	// /v1 kept serving: no 5xx and no transport error, before, during and
	// after the outage.
	counts := map[string]map[int]int{"before": {}, "during": {}, "after": {}}
	var slowest time.Duration
	for _, s := range traffic {
		phase := "before"
		switch {
		case s.done.After(up):
			phase = "after"
		case s.done.After(down):
			phase = "during"
		}
		counts[phase][s.status]++
		slowest = max(slowest, s.took)
		if s.status >= 500 || s.status < 0 {
			t.Errorf("a /v1 request %s (via %s, done %v after the stop): %d", phase, s.replica, s.done.Sub(down), s.status)
		}
	}
	if counts["during"][200] < 20 {
		t.Errorf("only %d requests served during the 4 s outage: %v", counts["during"][200], counts)
	}
	t.Logf("T8 /v1 statuses %v (slowest %v); admin writes back after %v; outage %v", counts, slowest, recovered, up.Sub(down))

	// The request-log rows of every served request reach the database,
	// those served during the outage included (held, then written).
	db, err := sql.Open("pgx", pg.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var missing []string
	if !testkit.PollUntil(10*time.Second, func() bool {
		stored := map[string]bool{}
		rows, err := db.QueryContext(ctx, `SELECT id FROM request_logs`)
		if err != nil {
			return false
		}
		for rows.Next() {
			var id string
			_ = rows.Scan(&id)
			stored[id] = true
		}
		rows.Close()
		missing = missing[:0]
		for _, s := range traffic {
			if s.status == 200 && !stored[s.id] {
				missing = append(missing, s.id)
			}
		}
		return len(missing) == 0
	}) {
		slices.Sort(missing)
		t.Errorf("%d served requests missing from the request log after the restart: %s", len(missing), strings.Join(missing, " "))
	}
}

// connStateMirror is a replica's in-memory routing state of connection id
// (the resilience read model: healthy, cooling, model_locked, terminal).
func connStateMirror(t *testing.T, c *cluster.Client, id string) string {
	t.Helper()
	var v struct {
		Connections []struct {
			ID     string `json:"id"`
			Status string `json:"status"`
		} `json:"connections"`
	}
	_ = json.Unmarshal(c.Must(t, "GET", "/api/resilience/cooldowns", "", 200).Body, &v)
	for _, cn := range v.Connections {
		if cn.ID == id {
			return cn.Status
		}
	}
	return ""
}
