package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// loopRun is one closed-loop run's measured window.
type loopRun struct {
	ok, failed int64
	elapsed    time.Duration
	cpu        time.Duration
}

func (r loopRun) rps() float64 { return float64(r.ok) / r.elapsed.Seconds() }

// coreShare is the measured process's CPU time over the window's length
// (1.0 = one core busy all the time).
func (r loopRun) coreShare() float64 { return r.cpu.Seconds() / r.elapsed.Seconds() }

// cpuPerOp is process CPU per completed operation, in µs.
func (r loopRun) cpuPerOp() float64 {
	if r.ok == 0 {
		return 0
	}
	return float64(r.cpu.Microseconds()) / float64(r.ok)
}

// closedLoop runs c workers calling op until d has passed; the first 10 %
// is discarded. op returns false for a failed operation.
//
// cpu is measured on process pid (0: this process).
func closedLoop(ctx context.Context, pid, c int, d time.Duration, op func(ctx context.Context, worker int) bool) loopRun {
	ctx, cancel := context.WithCancel(ctx)
	var ok, failed atomic.Int64
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for w := 0; w < c; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if op(ctx, w) {
					ok.Add(1)
				} else if ctx.Err() == nil {
					failed.Add(1)
				}
			}
		}()
	}
	warm := d / 10
	sleepCtx(ctx, warm)
	ok0, f0, cpu0, t0 := ok.Load(), failed.Load(), procCPU(pid), time.Now()
	sleepCtx(ctx, d-warm)
	ok1, f1, cpu1, t1 := ok.Load(), failed.Load(), procCPU(pid), time.Now()
	close(stop)
	// Let in-flight operations finish (bounded); then cancel the rest.
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		cancel()
		<-done
	}
	cancel()
	return loopRun{ok: ok1 - ok0, failed: f1 - f0, elapsed: t1.Sub(t0), cpu: cpu1 - cpu0}
}

// profileFile creates a profile in -profile-dir (nil without the flag).
func profileFile(cfg *config, name string) (*os.File, error) {
	if cfg.profileDir == "" {
		return nil, nil
	}
	return os.Create(filepath.Join(cfg.profileDir, name))
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// runThroughput is scenario (b): closed loop at saturation, c keep-alive
// workers, reps runs per path with the paths alternating. In one process the
// bare proxy and the gateway share the CPUs with the load generator and the
// fake upstream, so two views are reported: the RPS ratio, and the CPU the
// hop itself costs per request (process CPU per request on the path minus
// process CPU per request going direct, same repetition).
func runThroughput(ctx context.Context, cfg *config, t *topology, rep *report) error {
	names := []string{"direct", "baseline", "gateway"}
	if cfg.minimal {
		names = append(names, "gateway-min")
	}
	ps := t.paths()
	if _, ok := ps["gateway-shared"]; ok {
		names = append(names, "gateway-shared")
	}
	// One CPU profile of the first gateway run, and one of the first bare
	// proxy run to compare it with (go tool pprof -diff_base).
	profs := map[string]*os.File{}
	for _, n := range []string{"gateway", "baseline"} {
		f, err := profileFile(cfg, "cpu-throughput-"+n+".pprof")
		if err != nil {
			return err
		}
		if f != nil {
			defer f.Close()
			profs[n] = f
		}
	}
	runs := map[string][]loopRun{}
	for r := 0; r < cfg.reps && ctx.Err() == nil; r++ {
		for k := range names {
			n := names[(k+r)%len(names)]
			p := ps[n]
			cl := newClient(cfg.concurrency * 2)
			body := chatBody(p.model(modelFast), false, "throughput")
			sessions := make([]string, cfg.concurrency)
			for i := range sessions {
				sessions[i] = "tp-" + strconv.Itoa(i)
			}
			op := func(ctx context.Context, w int) bool {
				_, err := doJSON(ctx, cl, p, body, sessions[w])
				return err == nil
			}
			// Warm the connections.
			closedLoop(ctx, t.pidOf(n), cfg.concurrency, 200*time.Millisecond, op)
			waitProf := t.cpuProfile(ctx, n, profs[n], cfg.duration)
			run := closedLoop(ctx, t.pidOf(n), cfg.concurrency, cfg.duration, op)
			waitProf()
			delete(profs, n) // one run per path is enough for a profile
			cl.CloseIdleConnections()
			runs[n] = append(runs[n], run)
			if run.failed > 0 {
				rep.warn("throughput: %d failed requests on %s (rep %d)", run.failed, n, r+1)
			}
			fmt.Fprintf(os.Stderr, "  %-11s rep %d: %8.0f req/s, %6.1f µs CPU/req (%s, %.0f%% of a core)\n", n, r+1, run.rps(), run.cpuPerOp(),
				t.proxyLabel(n), 100*run.coreShare())
		}
	}
	if t.procs {
		reportThroughputProcs(cfg, t, rep, names, runs)
		return nil
	}
	rps := map[string][]float64{}
	hopCPU := map[string][]float64{}
	for _, n := range names {
		for i, run := range runs[n] {
			rps[n] = append(rps[n], run.rps())
			if n != "direct" && i < len(runs["direct"]) {
				hopCPU[n] = append(hopCPU[n], run.cpuPerOp()-runs["direct"][i].cpuPerOp())
			}
		}
	}
	c := strconv.Itoa(cfg.concurrency)
	for _, n := range names {
		q := iqr(rps[n])
		rep.add(result{Scenario: "b throughput", Metric: "req/s " + n + ", c=" + c, Unit: "req/s", Value: median(rps[n]), Samples: len(rps[n]), IQR: &q})
	}
	bl, gw := median(rps["baseline"]), median(rps["gateway"])
	rep.add(result{Scenario: "b throughput", Metric: "gateway / baseline req/s", Unit: "req/s", Value: gw, Baseline: f64(bl), Ratio: ratio(gw, bl),
		Target: "≥ 0.6× bare proxy", Pass: boolp(bl > 0 && gw/bl >= 0.6), Samples: len(rps["gateway"]),
		Note: "shared CPUs: the load generator and the fake upstream compete with the proxy under test"})
	if cfg.minimal {
		gm := median(rps["gateway-min"])
		rep.add(result{Scenario: "b throughput", Metric: "gateway-min / baseline req/s", Unit: "req/s", Value: gm, Baseline: f64(bl), Ratio: ratio(gm, bl),
			Samples: len(rps["gateway-min"])})
	}
	blCPU, gwCPU := median(hopCPU["baseline"]), median(hopCPU["gateway"])
	rep.add(result{Scenario: "b throughput", Metric: "hop CPU per request (path − direct)", Unit: "µs", Value: gwCPU, Baseline: f64(blCPU),
		Ratio: ratio(gwCPU, blCPU), Target: "", Samples: len(hopCPU["gateway"]),
		Note: "process CPU per request on the path minus going direct; 1e6/value ≈ requests per core"})
	if gwCPU > 0 && blCPU > 0 {
		rep.add(result{Scenario: "b throughput", Metric: "implied req/s per core (1e6 / hop CPU)", Unit: "req/s", Value: 1e6 / gwCPU,
			Baseline: f64(1e6 / blCPU), Ratio: ratio(blCPU, gwCPU), Target: "≥ 0.6× bare proxy (≈ 10k req/s)", Pass: boolp(blCPU/gwCPU >= 0.6),
			Samples: len(hopCPU["gateway"])})
	}
	if cfg.minimal {
		gmCPU := median(hopCPU["gateway-min"])
		rep.add(result{Scenario: "b throughput", Metric: "hop CPU per request, minimal path", Unit: "µs", Value: gmCPU, Baseline: f64(blCPU),
			Ratio: ratio(gmCPU, blCPU), Samples: len(hopCPU["gateway-min"])})
	}
	rep.detail("throughput_runs", runsDetail(runs))
	return nil
}

// reportThroughputProcs reports (b) of a process-per-role run: each proxy's
// own CPU per request, and the req/s ratio judged only where both proxies
// saturated their core (60-quality §5.3 (b): ≥ 90 % of it).
func reportThroughputProcs(cfg *config, t *topology, rep *report, names []string, runs map[string][]loopRun) {
	c := strconv.Itoa(cfg.concurrency)
	rps := map[string][]float64{}
	cpu := map[string][]float64{}
	satAll := map[string]bool{}
	for _, n := range names {
		satAll[n] = true
		for _, run := range runs[n] {
			rps[n] = append(rps[n], run.rps())
			cpu[n] = append(cpu[n], run.cpuPerOp())
			if run.coreShare() < 0.9 {
				satAll[n] = false
			}
		}
	}
	place := "unpinned, default GOMAXPROCS"
	if t.pinned {
		place = "proxy pinned to CPU 0 with GOMAXPROCS=1; fake upstream and load generator on CPU 1"
	}
	for _, n := range names {
		q := iqr(rps[n])
		note := fmt.Sprintf("%s; %s used %.0f %% of a core (median)", place, t.proxyLabel(n), 100*median(shares(runs[n])))
		rep.add(result{Scenario: "b throughput", Metric: "req/s " + n + ", c=" + c, Unit: "req/s", Value: median(rps[n]), Samples: len(rps[n]), IQR: &q, Note: note})
	}
	bl, gw := median(rps["baseline"]), median(rps["gateway"])
	judged := t.pinned && satAll["baseline"] && satAll["gateway"]
	var pass *bool
	note := "judged: both proxies saturated their core in every run"
	if judged {
		pass = boolp(bl > 0 && gw/bl >= 0.6)
	} else {
		note = "saturated: false — not judged (a proxy used < 90 % of its core in some run, or the run was not pinned); see CPU per request"
	}
	rep.add(result{Scenario: "b throughput", Metric: "gateway / baseline req/s (per core)", Unit: "req/s", Value: gw, Baseline: f64(bl), Ratio: ratio(gw, bl),
		Target: "≥ 0.6× bare proxy", Pass: pass, Samples: len(rps["gateway"]), Note: note})
	if cfg.minimal {
		gm := median(rps["gateway-min"])
		rep.add(result{Scenario: "b throughput", Metric: "gateway-min / baseline req/s", Unit: "req/s", Value: gm, Baseline: f64(bl), Ratio: ratio(gm, bl),
			Samples: len(rps["gateway-min"])})
	}
	blCPU, gwCPU := median(cpu["baseline"]), median(cpu["gateway"])
	rep.add(result{Scenario: "b throughput", Metric: "proxy process CPU per request", Unit: "µs", Value: gwCPU, Baseline: f64(blCPU),
		Ratio: ratio(gwCPU, blCPU), Samples: len(cpu["gateway"]), Note: "utime+stime of the proxy's process over the window / requests"})
	if gwCPU > 0 && blCPU > 0 {
		// Where the req/s ratio cannot be judged (the bare proxy is cheaper
		// than the load generator and fake upstream sharing CPU 1 can drive),
		// CPU per request of each pinned proxy is the per-core figure.
		r := result{Scenario: "b throughput", Metric: "req/s per core implied by CPU per request (1e6 / µs)", Unit: "req/s", Value: 1e6 / gwCPU,
			Baseline: f64(1e6 / blCPU), Ratio: ratio(blCPU, gwCPU), Samples: len(cpu["gateway"])}
		if !judged && t.pinned {
			r.Target, r.Pass = "≥ 0.6× bare proxy (judged here: the req/s ratio is not)", boolp(blCPU/gwCPU >= 0.6)
			r.Note = fmt.Sprintf("the bare proxy ran at %.0f %% of its core: below saturation a proxy spends somewhat more CPU per request, which favours the gateway in this ratio",
				100*median(shares(runs["baseline"])))
		}
		rep.add(r)
	}
	if cfg.minimal {
		gm := median(cpu["gateway-min"])
		rep.add(result{Scenario: "b throughput", Metric: "proxy process CPU per request, minimal path", Unit: "µs", Value: gm, Baseline: f64(blCPU),
			Ratio: ratio(gm, blCPU), Samples: len(cpu["gateway-min"])})
	}
	if _, ok := runs["gateway-shared"]; ok {
		// Shared mode: CPU per request of the gateway on PostgreSQL (and
		// Redis) against the embedded gateway, same run and placement.
		sh := median(cpu["gateway-shared"])
		limit, target, what := cfg.sharedTarget()
		rep.add(result{Scenario: "b throughput", Metric: "proxy process CPU per request, shared mode / embedded", Unit: "µs", Value: sh, Baseline: f64(gwCPU),
			Ratio: ratio(sh, gwCPU), Target: target, Pass: boolp(gwCPU > 0 && sh <= limit*gwCPU), Samples: len(cpu["gateway-shared"]),
			Note: what + "; " + place})
		rep.add(result{Scenario: "b throughput", Metric: "req/s shared mode / embedded", Unit: "req/s", Value: median(rps["gateway-shared"]), Baseline: f64(gw),
			Ratio: ratio(median(rps["gateway-shared"]), gw), Samples: len(rps["gateway-shared"])})
	}
	rep.detail("throughput_runs", runsDetail(runs))
}

func shares(rs []loopRun) []float64 {
	var out []float64
	for _, r := range rs {
		out = append(out, r.coreShare())
	}
	return out
}

// runsDetail is every run of every path for the JSON report.
func runsDetail(runs map[string][]loopRun) map[string]any {
	detail := map[string]any{}
	for n, rs := range runs {
		var list []map[string]any
		for _, r := range rs {
			list = append(list, map[string]any{"rps": r.rps(), "cpu_us_per_req": r.cpuPerOp(), "core_share": r.coreShare(), "ok": r.ok, "failed": r.failed})
		}
		detail[n] = list
	}
	return detail
}
