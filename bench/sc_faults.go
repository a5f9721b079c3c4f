package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"

	"switchyard/services/resilience"
)

// runFaults is scenario (e), failure injection: a constant rate on the
// direct route fakef/<model>, whose provider has two connections (fill-first:
// fk-f1 first, then fk-f2). In the middle of the run fk-f1 answers 503 for
// cfg.faultLength. Reported: requests lost (any non-200 answer or transport
// error the client sees), requests served after a failover, and the time
// until every request succeeds again.
func runFaults(ctx context.Context, cfg *config, t *topology, rep *report) error {
	p := &path{name: "gateway", url: t.gatewayURL + "/v1/chat/completions", auth: "Bearer " + t.clientKey}
	// Every request is its own session (distinct user text, no session
	// header), so no affinity pin keeps traffic off the failed connection
	// once it is eligible again: what is measured is cooldown and lockout.
	var seq atomic.Int64
	tr := vegeta.Targeter(func(tgt *vegeta.Target) error {
		*tgt = vegetaTarget(p, chatBody("fakef/"+modelFail, false, "faults-"+strconv.FormatInt(seq.Add(1), 10)), "")
		return nil
	})
	cl := vegetaClient(10 * time.Second)
	defer cl.CloseIdleConnections()
	primary := warmPrimary(ctx, cfg, t, cl, tr)
	faultOn := time.Now().Add(cfg.faultStart)
	recs, run := attackThroughBurst(ctx, cfg, t, cl, tr, primary, faultOn)
	sum := summarizeFaults(recs, cfg)
	fmt.Fprintf(os.Stderr, "  %d requests, %d lost %v, %d served after failover, recovered %s after the burst; failed connection back after %s\n",
		len(recs), sum.lost, sum.failCodes, sum.failover, sum.recovered.Round(time.Millisecond), fmtOff(sum.backAt))
	fs, fe := cfg.faultStart, cfg.faultStart+cfg.faultLength
	scen := fmt.Sprintf("f faults (503 burst %s on 1 of 2 conns, %d rps)", cfg.faultLength, cfg.faultRate)
	rep.add(result{Scenario: scen, Metric: "requests lost", Unit: "", Value: float64(sum.lost), Target: "0", Pass: boolp(sum.lost == 0), Samples: len(recs),
		Note: fmt.Sprintf("failed answers by status/code: %v", sum.failCodes)})
	rep.add(result{Scenario: scen, Metric: "requests served after failover", Unit: "", Value: float64(sum.failover), Samples: len(recs)})
	rep.add(result{Scenario: scen, Metric: "time until all requests succeed again (after burst end)", Unit: "ms", Value: durMs(sum.recovered),
		Target: "≤ 4 s (API-key base cooldown 3 s + 1 s)", Pass: boolp(sum.recovered <= 4*time.Second), Samples: len(recs),
		Note: fmt.Sprintf("burst %s–%s; first failure at %s, last failed answer at %s", fs, fe, fmtOff(sum.firstFail), fmtOff(sum.lastFail))})
	// Why the connection stays out: its cooldown and lockouts at the end.
	why := t.failedConnState(ctx, primary, faultOn)
	rep.detail("faults_failed_connection_state", why)
	backNote := "it did not serve again before the run ended: " + why
	backVal := durMs(cfg.faultDuration - fe)
	if sum.backAt >= 0 {
		backNote, backVal = "", durMs(sum.backAt)
	}
	rep.add(result{Scenario: scen, Metric: "time until the failed connection serves again (after burst end)", Unit: "ms", Value: backVal,
		Samples: len(recs), Note: backNote})
	rep.add(result{Scenario: scen, Metric: "p99 latency over the run", Unit: "ms", Value: percentile(run.lat, 99), Samples: run.total})
	rep.detail("faults_buckets", sum.buckets)
	rep.detail("faults_fail_codes", sum.failCodes)
	return nil
}

// warmPrimary warms the route up and returns the connection that served
// most of it: fill-first serves everything from the first one (fk-f1).
func warmPrimary(ctx context.Context, cfg *config, t *topology, cl *http.Client, tr vegeta.Targeter) string {
	servedBy := map[string]int{}
	attackWith(ctx, t.pidOf("gateway"), newAttacker(cl), tr, cfg.faultRate, 500*time.Millisecond, func(r *vegeta.Result) {
		if r.Headers != nil {
			servedBy[r.Headers.Get("X-Switchyard-Selected-Connection-Id")]++
		}
	})
	primary := ""
	for id, n := range servedBy {
		if primary == "" || n > servedBy[primary] {
			primary = id
		}
	}
	return primary
}

// faultRec is one request of the fault run.
type faultRec struct {
	at       time.Duration // send time since start
	end      time.Duration
	ok       bool
	code     string
	failover bool
	primary  bool // served by the connection the burst hits
}

// attackThroughBurst runs the constant rate for cfg.faultDuration while
// primary answers 503 from faultOn for cfg.faultLength, and returns every
// request sorted by send time.
func attackThroughBurst(ctx context.Context, cfg *config, t *topology, cl *http.Client, tr vegeta.Targeter, primary string, faultOn time.Time) ([]faultRec, *olRun) {
	var mu sync.Mutex
	var recs []faultRec
	start := faultOn.Add(-cfg.faultStart)
	faultOff := faultOn.Add(cfg.faultLength)
	// Script the burst at the wall-clock times (bounded by ctx).
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		sleepCtx(ctx, time.Until(faultOn))
		if err := t.scriptFail(ctx, true); err != nil {
			fmt.Fprintf(os.Stderr, "bench: faults: %v\n", err)
		}
		sleepCtx(ctx, time.Until(faultOff))
		t.scriptFail(context.WithoutCancel(ctx), false) // healthy again
	}()
	run := attackWith(ctx, t.pidOf("gateway"), newAttacker(cl), tr, cfg.faultRate, cfg.faultDuration, func(r *vegeta.Result) {
		x := faultRec{at: r.Timestamp.Sub(start), end: r.End().Sub(start), ok: r.Code == http.StatusOK && r.Error == ""}
		x.code = strconv.Itoa(int(r.Code))
		if r.Headers != nil {
			if v := r.Headers.Get("X-Switchyard-Error-Code"); v != "" {
				x.code += " " + v
			}
			if v := r.Headers.Get("X-Switchyard-Fallback-Attempts"); v != "" && v != "0" {
				x.failover = true
			}
			x.primary = x.ok && r.Headers.Get("X-Switchyard-Selected-Connection-Id") == primary
		}
		if r.Code == 0 {
			x.code = "transport error"
		}
		mu.Lock()
		recs = append(recs, x)
		mu.Unlock()
	})
	wg.Wait()
	t.scriptFail(context.WithoutCancel(ctx), false)
	sort.Slice(recs, func(i, j int) bool { return recs[i].at < recs[j].at })
	return recs, run
}

// faultBucket is one second of the fault run, for the JSON detail.
type faultBucket struct {
	Second   int `json:"second"`
	Requests int `json:"requests"`
	Failed   int `json:"failed"`
	Failover int `json:"failover"`
}

// faultSummary is what the fault run measured.
type faultSummary struct {
	lost, failover      int
	firstFail, lastFail time.Duration // -1: nothing failed
	backAt              time.Duration // when the failed connection served again after the burst, -1: never
	recovered           time.Duration // until every request succeeds again, from the end of the burst
	failCodes           map[string]int
	buckets             []faultBucket
}

// summarizeFaults counts the lost and failed-over requests and times the
// recovery of the requests and of the connection the burst hit.
func summarizeFaults(recs []faultRec, cfg *config) faultSummary {
	sum := faultSummary{firstFail: -1, lastFail: -1, backAt: -1, failCodes: map[string]int{}}
	for _, r := range recs {
		if r.failover {
			sum.failover++
		}
		if !r.ok {
			sum.lost++
			sum.failCodes[r.code]++
			if sum.firstFail < 0 {
				sum.firstFail = r.at
			}
			sum.lastFail = max(sum.lastFail, r.end)
		}
	}
	fe := cfg.faultStart + cfg.faultLength
	for _, r := range recs {
		if r.primary && r.at >= fe {
			sum.backAt = r.at - fe
			break
		}
	}
	// 0 when nothing failed after the burst ended.
	if sum.lastFail > fe {
		sum.recovered = sum.lastFail - fe
	}
	for _, r := range recs {
		s := int(r.at / time.Second)
		for len(sum.buckets) <= s {
			sum.buckets = append(sum.buckets, faultBucket{Second: len(sum.buckets)})
		}
		sum.buckets[s].Requests++
		if !r.ok {
			sum.buckets[s].Failed++
		}
		if r.failover {
			sum.buckets[s].Failover++
		}
	}
	return sum
}

// failedConnState says why a connection is out of rotation: its cooldown,
// lockouts and the provider breaker, read from the services in process or
// from the management API of the gateway binary.
func (t *topology) failedConnState(ctx context.Context, conn string, faultOn time.Time) string {
	if t.procs {
		var parts []string
		if b, err := t.adminGet(ctx, "/api/resilience/cooldowns"); err == nil {
			var doc struct {
				Connections []map[string]any `json:"connections"`
			}
			json.Unmarshal(b, &doc)
			for _, c := range doc.Connections {
				if c["id"] == conn {
					parts = append(parts, fmt.Sprintf("status %v, backoff level %v, rate limited until %v", c["status"], c["backoffLevel"], c["rateLimitedUntil"]))
				}
			}
		}
		if b, err := t.adminGet(ctx, "/api/resilience/model-cooldowns"); err == nil {
			var doc struct {
				Items []map[string]any `json:"items"`
			}
			json.Unmarshal(b, &doc)
			for _, l := range doc.Items {
				if l["connectionId"] == conn {
					parts = append(parts, fmt.Sprintf("model lockout %v:%v (%v, %v) until %v", l["keyShape"], l["lockKey"], l["reason"], l["lastStatus"], l["until"]))
				}
			}
		}
		if len(parts) == 0 {
			return "no cooldown or lockout reported by the management API"
		}
		return strings.Join(parts, ", ")
	}
	primary := conn
	res := t.srv.Resilience()
	cst := res.Cooldowns.State(primary)
	why := fmt.Sprintf("backoff level %d", cst.BackoffLevel)
	if cst.RateLimitedUntil != nil {
		why += fmt.Sprintf(", cooling until burst start + %s", cst.RateLimitedUntil.Sub(faultOn).Round(time.Second))
	}
	for _, l := range res.Lockouts.List(resilience.LockFilter{ConnectionID: primary}) {
		if l.Active {
			why += fmt.Sprintf(", model lockout %s:%s until burst start + %s", l.Shape, l.LockKey, l.Until.Sub(faultOn).Round(time.Second))
		}
	}
	if b := res.Breakers.Status("fakef"); b.State != "" {
		why += fmt.Sprintf(", provider breaker %s", b.State)
	}
	return why
}

func fmtOff(d time.Duration) string {
	if d < 0 {
		return "—"
	}
	return d.Round(time.Millisecond).String()
}
