package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"sync"
	"time"
)

// runSSE is scenario (d), streaming cost: closed-loop streams of
// cfg.sseEvents content events. The per-event cost of a hop is (process CPU
// per stream on the path − process CPU per stream going direct) / events.
func runSSE(ctx context.Context, cfg *config, t *topology, rep *report) error {
	names := []string{"direct", "baseline", "gateway"}
	ps := t.paths()
	runs := map[string][]loopRun{}
	ttfb := map[string][]float64{}
	var mu sync.Mutex
	prof, err := profileFile(cfg, "cpu-sse-gateway.pprof")
	if err != nil {
		return err
	}
	if prof != nil {
		defer prof.Close()
	}
	for r := 0; r < cfg.sseReps && ctx.Err() == nil; r++ {
		for k := range names {
			n := names[(k+r)%len(names)]
			p := ps[n]
			cl := newClient(cfg.sseConcurrency * 2)
			body := chatBody(p.model(modelSSE), true, "sse")
			var local []float64
			var firstErr error
			op := func(ctx context.Context, w int) bool {
				res := streamRead(ctx, cl, p, body, "sse-"+strconv.Itoa(w), nil)
				if res.err != nil || res.events != cfg.sseEvents {
					mu.Lock()
					if firstErr == nil && ctx.Err() == nil {
						firstErr = fmt.Errorf("%v (%d events)", res.err, res.events)
					}
					mu.Unlock()
					return false
				}
				mu.Lock()
				local = append(local, durMs(res.ttfb))
				mu.Unlock()
				return true
			}
			closedLoop(ctx, t.pidOf(n), cfg.sseConcurrency, 200*time.Millisecond, op)
			mu.Lock()
			local = local[:0]
			mu.Unlock()
			var waitProf func()
			if n == "gateway" {
				waitProf = t.cpuProfile(ctx, n, prof, cfg.sseDuration)
				prof = nil
			}
			run := closedLoop(ctx, t.pidOf(n), cfg.sseConcurrency, cfg.sseDuration, op)
			if waitProf != nil {
				waitProf()
			}
			cl.CloseIdleConnections()
			runs[n] = append(runs[n], run)
			mu.Lock()
			ttfb[n] = append(ttfb[n], local...)
			mu.Unlock()
			if run.failed > 0 {
				rep.warn("sse: %d failed streams on %s (rep %d), first: %v", run.failed, n, r+1, firstErr)
			}
			fmt.Fprintf(os.Stderr, "  %-9s rep %d: %7.0f streams/s, %6.1f µs CPU/stream (%s, %.0f%% of a core)\n", n, r+1, run.rps(), run.cpuPerOp(),
				t.proxyLabel(n), 100*run.coreShare())
		}
	}
	perEvent := map[string][]float64{}
	for _, n := range []string{"baseline", "gateway"} {
		for i, run := range runs[n] {
			switch {
			case t.procs: // the proxy's own process
				perEvent[n] = append(perEvent[n], run.cpuPerOp()/float64(cfg.sseEvents))
			case i < len(runs["direct"]):
				perEvent[n] = append(perEvent[n], (run.cpuPerOp()-runs["direct"][i].cpuPerOp())/float64(cfg.sseEvents))
			}
		}
	}
	evMetric, evNote := "hop CPU per event (path − direct)", "process CPU per stream minus direct, divided by content events"
	if t.procs {
		evMetric, evNote = "proxy process CPU per event", "proxy process CPU per stream / content events"
		if t.pinned {
			evNote += "; proxy pinned to CPU 0 with GOMAXPROCS=1"
		}
	}
	ev := strconv.Itoa(cfg.sseEvents)
	for _, n := range names {
		rep.add(result{Scenario: "d sse", Metric: "streams/s " + n + " (" + ev + " events, c=" + strconv.Itoa(cfg.sseConcurrency) + ")",
			Unit: "streams/s", Value: median(rpsOf(runs[n])), Samples: len(runs[n])})
	}
	g, b := median(perEvent["gateway"]), median(perEvent["baseline"])
	rep.add(result{Scenario: "d sse", Metric: evMetric, Unit: "µs", Value: g, Baseline: f64(b), Ratio: ratio(g, b),
		Target: "≤ 2× bare proxy", Pass: boolp(b > 0 && g <= 2*b), Samples: len(perEvent["gateway"]), Note: evNote})
	gt, bt, dt := median(ttfb["gateway"]), median(ttfb["baseline"]), median(ttfb["direct"])
	rep.add(result{Scenario: "d sse", Metric: "added TTFB p50 (path − direct)", Unit: "ms", Value: gt - dt, Baseline: f64(bt - dt),
		Ratio: ratio(gt-dt, bt-dt), Samples: len(ttfb["gateway"]), Note: fmt.Sprintf("direct TTFB p50 %.3f ms", dt)})
	return nil
}

func rpsOf(rs []loopRun) []float64 {
	var out []float64
	for _, r := range rs {
		out = append(out, r.rps())
	}
	return out
}

// memNow is live memory after a full GC: heap in use + stacks in use, and
// the goroutine count.
type memNow struct {
	heapInuse, stackInuse, heapAlloc uint64
	goroutines                       int
	rssKiB                           int64 // procs topology: VmRSS of the proxy's process
}

func readMem() memNow {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return memNow{heapInuse: ms.HeapInuse, stackInuse: ms.StackInuse, heapAlloc: ms.HeapAlloc, goroutines: runtime.NumGoroutine()}
}

// stacks is the goroutine stack memory per open stream, KiB.
func (d idleDelta) stacks() float64 {
	if d.opened == 0 {
		return 0
	}
	return (float64(d.after.stackInuse) - float64(d.before.stackInuse)) / float64(d.opened) / 1024
}

// idleDelta is the memory n open streams on one path hold.
type idleDelta struct {
	n          int
	inuse      float64 // Δ(HeapInuse + StackInuse) per stream, bytes
	live       float64 // Δ(HeapAlloc + StackInuse) per stream, bytes
	goroutines float64 // Δ goroutines per stream
	opened     int
	before     memNow
	after      memNow
}

// openIdle opens n streams whose upstream sends one content event and then
// stalls, waits until every client has its first event, settles, reads
// memory, then closes them all.
//
// measure reads the memory figures (readMem in process).
func openIdle(ctx context.Context, cfg *config, t *topology, p *path, n int, measure func() memNow) (idleDelta, error) {
	cl := newClient(n)
	cl.Transport.(*http.Transport).MaxConnsPerHost = 0
	body := chatBody(p.model(modelIdle), true, "idle")
	before := measure()
	sctx, cancel := context.WithCancel(ctx)
	var wg, first sync.WaitGroup
	first.Add(n)
	sem := make(chan struct{}, 64) // open at most 64 at once
	var mu sync.Mutex
	var failures []error
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			var once sync.Once
			signal := func() { once.Do(func() { <-sem; first.Done() }) }
			res := streamRead(sctx, cl, p, body, "idle-"+strconv.Itoa(i), signal)
			if res.events == 0 {
				mu.Lock()
				failures = append(failures, res.err)
				mu.Unlock()
				signal()
			}
		}()
	}
	allFirst := make(chan struct{})
	go func() { first.Wait(); close(allFirst) }()
	var err error
	select {
	case <-allFirst:
	case <-time.After(60 * time.Second):
		err = fmt.Errorf("not every stream had its first event within 60 s")
	case <-ctx.Done():
		err = ctx.Err()
	}
	sleepCtx(ctx, cfg.idleSettle)
	after := measure()
	if f, _ := profileFile(cfg, "heap-idle-"+p.name+".pprof"); f != nil {
		t.dumpProfile(ctx, p.name, "heap", 0, f)
	}
	if f, _ := profileFile(cfg, "goroutines-idle-"+p.name+".txt"); f != nil {
		t.dumpProfile(ctx, p.name, "goroutine", 1, f)
	}
	mu.Lock()
	nf := len(failures)
	if nf > 0 && err == nil {
		err = fmt.Errorf("%d of %d streams failed (first: %v)", nf, n, failures[0])
	}
	mu.Unlock()
	cancel()
	wg.Wait()
	cl.CloseIdleConnections()
	// Let server-side goroutines of the closed streams end (bounded).
	for i := 0; i < 50 && before.rssKiB == 0 && runtime.NumGoroutine() > before.goroutines+10; i++ {
		time.Sleep(100 * time.Millisecond)
	}
	ok := n - nf
	d := idleDelta{n: n, opened: ok, before: before, after: after}
	if ok > 0 {
		d.inuse = (float64(after.heapInuse+after.stackInuse) - float64(before.heapInuse+before.stackInuse)) / float64(ok)
		d.live = (float64(after.heapAlloc+after.stackInuse) - float64(before.heapAlloc+before.stackInuse)) / float64(ok)
		d.goroutines = float64(after.goroutines-before.goroutines) / float64(ok)
	}
	return d, err
}

// runIdle is scenario (d), idle memory: N concurrent open streams per path,
// measured from runtime.MemStats after a GC. Because everything shares one
// process, a path's own cost is its delta minus the delta of the same N
// streams going direct (client and fake upstream side).
func runIdle(ctx context.Context, cfg *config, t *topology, rep *report) error {
	if t.procs {
		return runIdleProcs(ctx, cfg, t, rep)
	}
	ps := t.paths()
	res := map[string]idleDelta{}
	t.baselineTransport.CloseIdleConnections()
	for _, n := range []string{"direct", "baseline", "gateway"} {
		d, err := openIdle(ctx, cfg, t, ps[n], cfg.idleStreams, readMem)
		if err != nil {
			rep.warn("idle %s: %v", n, err)
		}
		res[n] = d
		stack := d.stacks()
		fmt.Fprintf(os.Stderr, "  %-9s %d streams: %.1f KiB/stream in use (%.1f KiB of it stacks), %.1f KiB live, %.2f goroutines/stream (process totals; goroutines %d → %d)\n",
			n, d.opened, d.inuse/1024, stack, d.live/1024, d.goroutines, d.before.goroutines, d.after.goroutines)
	}
	ns := strconv.Itoa(cfg.idleStreams)
	g := (res["gateway"].inuse - res["direct"].inuse) / 1024
	b := (res["baseline"].inuse - res["direct"].inuse) / 1024
	stacks := func(p string) float64 { return res[p].stacks() - res["direct"].stacks() }
	rep.add(result{Scenario: "d idle streams", Metric: "memory per idle open stream at " + ns, Unit: "KiB", Value: g, Baseline: f64(b), Ratio: ratio(g, b),
		Target: "≤ 64 KiB", Pass: boolp(g <= 64), Samples: res["gateway"].opened,
		Note: fmt.Sprintf("Δ(HeapInuse+StackInuse)/stream after GC, path minus direct; of it goroutine stacks %.1f KiB (bare proxy %.1f KiB)",
			stacks("gateway"), stacks("baseline"))})
	gl := (res["gateway"].live - res["direct"].live) / 1024
	bl := (res["baseline"].live - res["direct"].live) / 1024
	rep.add(result{Scenario: "d idle streams", Metric: "live heap+stack per idle stream at " + ns, Unit: "KiB", Value: gl, Baseline: f64(bl), Ratio: ratio(gl, bl),
		Samples: res["gateway"].opened, Note: "Δ(HeapAlloc+StackInuse)/stream after GC, path minus direct"})
	gg := res["gateway"].goroutines - res["direct"].goroutines
	bg := res["baseline"].goroutines - res["direct"].goroutines
	rep.add(result{Scenario: "d idle streams", Metric: "goroutines per idle stream", Unit: "", Value: gg, Baseline: f64(bg), Ratio: ratio(gg, bg),
		Target: "≤ 4 (expected)", Pass: boolp(gg <= 4), Samples: res["gateway"].opened})
	return nil
}

// procMem reads a proxy process's VmRSS and, for the gateway, its Go heap,
// stacks and goroutines from /metrics.
func (t *topology) procMem(ctx context.Context, path string) memNow {
	m := memNow{rssKiB: procStatus(t.pidOf(path), "VmRSS")}
	if path == "gateway" {
		if g, err := t.gatewayMetrics(ctx); err == nil {
			m.heapInuse = uint64(g["go_memstats_heap_inuse_bytes"])
			m.stackInuse = uint64(g["go_memstats_stack_inuse_bytes"])
			m.heapAlloc = uint64(g["go_memstats_heap_alloc_bytes"])
			m.goroutines = int(g["go_goroutines"])
		}
	}
	return m
}

// runIdleProcs is scenario (d), idle memory, of a process-per-role run
// (60-quality §5.3 (d)): per proxy, 200 warm-up streams, settle, read RSS;
// open N streams whose upstream sends one event and stalls; once every
// client has its first event, settle, read RSS again. Per stream = ΔRSS / N.
func runIdleProcs(ctx context.Context, cfg *config, t *topology, rep *report) error {
	ps := t.paths()
	res := map[string]idleDelta{}
	for _, n := range []string{"baseline", "gateway"} {
		p := ps[n]
		cl := newClient(64)
		body := chatBody(p.model(modelSSE), true, "warm")
		var left sync.WaitGroup
		for w := 0; w < 50; w++ {
			left.Add(1)
			go func() {
				defer left.Done()
				for i := 0; i < 4; i++ {
					streamRead(ctx, cl, p, body, "warm-"+strconv.Itoa(w), nil)
				}
			}()
		}
		left.Wait()
		cl.CloseIdleConnections()
		sleepCtx(ctx, cfg.idleSettle)
		d, err := openIdle(ctx, cfg, t, p, cfg.idleStreams, func() memNow { return t.procMem(ctx, n) })
		if err != nil {
			rep.warn("idle %s: %v", n, err)
		}
		res[n] = d
		fmt.Fprintf(os.Stderr, "  %-9s %d streams: RSS %d → %d KiB, %.1f KiB/stream\n", n, d.opened, d.before.rssKiB, d.after.rssKiB, d.rssPer())
	}
	ns := strconv.Itoa(cfg.idleStreams)
	g, b := res["gateway"], res["baseline"]
	gw := g.after
	note := fmt.Sprintf("ΔVmRSS of the proxy's process / open streams (settle %s)", cfg.idleSettle)
	if gw.goroutines > 0 && g.opened > 0 {
		note += fmt.Sprintf("; gateway Go heap in use %+.1f KiB, stacks %+.1f KiB per stream (from /metrics)",
			(float64(gw.heapInuse)-float64(g.before.heapInuse))/float64(g.opened)/1024, g.stacks())
	}
	rep.add(result{Scenario: "d idle streams", Metric: "memory per idle open stream at " + ns, Unit: "KiB", Value: g.rssPer(), Baseline: f64(b.rssPer()),
		Ratio: ratio(g.rssPer(), b.rssPer()), Target: "≤ 64 KiB", Pass: boolp(g.opened > 0 && g.rssPer() <= 64), Samples: g.opened, Note: note})
	if gw.goroutines > 0 {
		rep.add(result{Scenario: "d idle streams", Metric: "gateway goroutines per idle stream", Unit: "", Value: g.goroutines,
			Target: "≤ 4 (expected)", Pass: boolp(g.goroutines <= 4), Samples: g.opened, Note: "Δ go_goroutines / open streams"})
	}
	return nil
}

// rssPer is ΔRSS per open stream, KiB.
func (d idleDelta) rssPer() float64 {
	if d.opened == 0 {
		return 0
	}
	return float64(d.after.rssKiB-d.before.rssKiB) / float64(d.opened)
}
