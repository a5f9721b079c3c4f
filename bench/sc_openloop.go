package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"
)

// olRun is one measured open-loop attack.
type olRun struct {
	lat          []float64 // ms, every response
	codes        map[string]int
	ok, total    int
	cpu          time.Duration
	elapsed      time.Duration
	rssMean      float64
	rssPeak      float64
	fallbackReqs int // gateway answers with X-Switchyard-Fallback-Attempts > 0
	errorCodes   map[string]int
	errors       map[string]int // distinct transport errors (first 5)
	unsent       int            // scheduled by the rate but never sent (the attacker fell behind)
}

// success counts requests the attacker could not send as failures.
func (r *olRun) success() float64 {
	if r.total+r.unsent == 0 {
		return 0
	}
	return 100 * float64(r.ok) / float64(r.total+r.unsent)
}

// vegetaClient is the HTTP client every attacker of one path shares, so the
// keep-alive connections opened during the warm-up serve the measured run
// (a vegeta Attacker is single-use: Attack stops it when it ends). Every
// transport setting is made here, once: vegeta's Connections, MaxConnections,
// KeepAlive and Proxy options write the shared transport's fields, which the
// previous attacker's dial goroutines may still be reading (a data race).
func vegetaClient(timeout time.Duration) *http.Client {
	return &http.Client{
		Timeout: timeout,
		Transport: &http.Transport{
			Proxy:               nil,
			DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			MaxIdleConnsPerHost: 10000,
			// A bound, so a stall of the shared machine cannot snowball into
			// thousands of new connections and exhaust file descriptors: at
			// 3,000 req/s and 60 ms about 180 requests are in flight.
			MaxConnsPerHost:    1500,
			IdleConnTimeout:    90 * time.Second,
			DisableCompression: true,
		},
	}
}

// newAttacker is a vegeta attacker over cl (from vegetaClient), whose
// transport it leaves untouched.
func newAttacker(cl *http.Client) *vegeta.Attacker {
	return vegeta.NewAttacker(
		vegeta.Client(cl),
		vegeta.Workers(64),
		vegeta.MaxWorkers(1500), // as MaxConnsPerHost
		vegeta.MaxBody(0),
		vegeta.Timeout(cl.Timeout),
		vegeta.Redirects(vegeta.NoFollow),
	)
}

func vegetaTarget(p *path, body []byte, session string) vegeta.Target {
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("Authorization", p.auth)
	if session != "" {
		h.Set("X-Session-Id", session)
	}
	return vegeta.Target{Method: http.MethodPost, URL: p.url, Body: body, Header: h}
}

// attack runs a constant-rate attack on one target for d and collects every
// result. When onResult is set it sees each result too.
// CPU and RSS are measured on process pid (0: this process).
func attack(ctx context.Context, pid int, atk *vegeta.Attacker, tgt vegeta.Target, rate int, d time.Duration, onResult func(*vegeta.Result)) *olRun {
	return attackWith(ctx, pid, atk, vegeta.NewStaticTargeter(tgt), rate, d, onResult)
}

func attackWith(ctx context.Context, pid int, atk *vegeta.Attacker, tr vegeta.Targeter, rate int, d time.Duration, onResult func(*vegeta.Result)) *olRun {
	run := &olRun{codes: map[string]int{}, errorCodes: map[string]int{}, errors: map[string]int{}}
	stopped := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
			atk.Stop()
		case <-stopped:
		}
	}()
	defer close(stopped)
	rss := startRSS(pid, 250*time.Millisecond)
	cpu0, t0 := procCPU(pid), time.Now()
	for res := range atk.Attack(tr, vegeta.Rate{Freq: rate, Per: time.Second}, d, "bench") {
		run.total++
		code := strconv.Itoa(int(res.Code))
		if res.Code == 0 {
			code = "error"
		}
		run.codes[code]++
		if res.Code == http.StatusOK && res.Error == "" {
			run.ok++
		}
		run.lat = append(run.lat, durMs(res.Latency))
		if res.Error != "" {
			if _, seen := run.errors[res.Error]; seen || len(run.errors) < 5 {
				run.errors[res.Error]++
			}
		}
		if res.Headers != nil {
			if v := res.Headers.Get("X-Switchyard-Fallback-Attempts"); v != "" && v != "0" {
				run.fallbackReqs++
			}
			if v := res.Headers.Get("X-Switchyard-Error-Code"); v != "" {
				run.errorCodes[v]++
			}
		}
		if onResult != nil {
			onResult(res)
		}
	}
	run.cpu, run.elapsed = procCPU(pid)-cpu0, time.Since(t0)
	// The pacer schedules rate × d hits (one fewer at the boundary).
	if want := int(float64(rate)*d.Seconds()) - 1; ctx.Err() == nil && run.total < want {
		run.unsent = want - run.total
	}
	run.rssMean, run.rssPeak = rss.finish()
	return run
}

// runOpenLoop is scenario (c): vegeta at constant rates against the bare
// proxy and the gateway, the fake upstream adding a fixed delay. Reported
// per path: p50/p90/p99, latency minus the upstream delay, success %, the
// status histogram, process CPU and RSS (one process: an upper bound of the
// gateway's own share).
func runOpenLoop(ctx context.Context, cfg *config, t *topology, rep *report) error {
	ps := t.paths()
	names := []string{"direct", "baseline", "gateway"}
	upMs := durMs(cfg.upstreamLatency)
	for _, rate := range cfg.rates {
		res := map[string]*olRun{}
		for _, n := range names {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			p := ps[n]
			tgt := vegetaTarget(p, chatBody(p.model(modelSlow), false, "openloop"), "ol-session")
			cl := vegetaClient(10 * time.Second)
			attack(ctx, t.pidOf(n), newAttacker(cl), tgt, rate, cfg.olWarmup, nil) // warm-up, discarded
			run := attack(ctx, t.pidOf(n), newAttacker(cl), tgt, rate, cfg.olDuration, nil)
			cl.CloseIdleConnections()
			res[n] = run
			for e, k := range run.errors {
				fmt.Fprintf(os.Stderr, "  %5d rps %-9s: %d × %s\n", rate, n, k, e)
			}
			fmt.Fprintf(os.Stderr, "  %5d rps %-9s: p50 %.2f ms p99 %.2f ms, success %.2f%% (%d not sent), CPU %.0f%% of one core, RSS peak %.0f MiB\n",
				rate, n, percentile(run.lat, 50), percentile(run.lat, 99), run.success(), run.unsent,
				100*run.cpu.Seconds()/run.elapsed.Seconds(), run.rssPeak)
		}
		rs := strconv.Itoa(rate)
		gw, bl, dr := res["gateway"], res["baseline"], res["direct"]
		for _, q := range []float64{50, 90, 99} {
			qs := "p" + strconv.Itoa(int(q))
			g, b := percentile(gw.lat, q), percentile(bl.lat, q)
			rep.add(result{Scenario: "c open loop " + rs + " rps", Metric: qs + " latency", Unit: "ms", Value: g, Baseline: f64(b), Ratio: ratio(g, b),
				Samples: gw.total, Note: fmt.Sprintf("direct %.2f ms", percentile(dr.lat, q))})
		}
		g50, b50, d50 := percentile(gw.lat, 50)-upMs, percentile(bl.lat, 50)-upMs, percentile(dr.lat, 50)-upMs
		rep.add(result{Scenario: "c open loop " + rs + " rps", Metric: "p50 minus upstream delay", Unit: "ms", Value: g50, Baseline: f64(b50),
			Ratio: ratio(g50, b50), Samples: gw.total, Note: fmt.Sprintf("direct %.3f ms", d50)})
		target, pass := "≥ 99.9 % success", gw.success() >= 99.9
		if rate <= 1000 {
			target, pass = "100 % success", gw.ok == gw.total && gw.unsent == 0 && gw.total > 0
		}
		rep.add(result{Scenario: "c open loop " + rs + " rps", Metric: "success", Unit: "%", Value: gw.success(), Baseline: f64(bl.success()),
			Target: target, Pass: boolp(pass), Samples: gw.total, Note: fmt.Sprintf("gateway statuses %v, %d not sent; baseline %v, %d not sent", gw.codes, gw.unsent, bl.codes, bl.unsent)})
		cpuPct := func(r *olRun) float64 { return 100 * r.cpu.Seconds() / r.elapsed.Seconds() }
		// In process, every path's figures are the whole process's, so the
		// hop's share is the path minus direct; with child processes they
		// are the proxy's own.
		cpuNote := fmt.Sprintf("direct %.0f%% (fake-upstream process); gateway and bare-proxy processes", cpuPct(dr))
		cpuRatio := ratio(cpuPct(gw), cpuPct(bl))
		rssWhat := "the gateway process"
		if !t.procs {
			cpuNote, cpuRatio = fmt.Sprintf("direct %.0f%%; ratio is of the hop's share (path − direct)", cpuPct(dr)), nil
			if g, b := cpuPct(gw)-cpuPct(dr), cpuPct(bl)-cpuPct(dr); g > 0 && b > 0 {
				cpuRatio = ratio(g, b)
			}
			rssWhat = "the whole process (fake upstream, bare proxy and vegeta included)"
		}
		rep.add(result{Scenario: "c open loop " + rs + " rps", Metric: "process CPU (% of one core)", Unit: "%", Value: cpuPct(gw), Baseline: f64(cpuPct(bl)),
			Ratio: cpuRatio, Samples: gw.total, Note: cpuNote})
		rssTarget, rssPass := "", (*bool)(nil)
		if rate <= 1000 {
			rssTarget, rssPass = "gateway RSS peak < 150 MiB", boolp(gw.rssPeak < 150)
		}
		rep.add(result{Scenario: "c open loop " + rs + " rps", Metric: "process RSS peak", Unit: "MiB", Value: gw.rssPeak, Baseline: f64(bl.rssPeak),
			Target: rssTarget, Pass: rssPass, Samples: gw.total,
			Note: fmt.Sprintf("mean %.0f MiB; RSS of %s", gw.rssMean, rssWhat)})
		rep.detail("openloop_"+rs, map[string]any{
			"gateway": map[string]any{"codes": gw.codes, "error_codes": gw.errorCodes, "fallback_requests": gw.fallbackReqs, "rss_mean_mib": gw.rssMean,
				"errors": gw.errors},
			"baseline": map[string]any{"codes": bl.codes, "rss_mean_mib": bl.rssMean, "errors": bl.errors},
			"direct":   map[string]any{"codes": dr.codes, "errors": dr.errors},
		})
	}
	return nil
}
