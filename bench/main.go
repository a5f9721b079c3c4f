// Command bench measures Switchyard's overhead against a bare
// httputil.ReverseProxy in one process (60-quality §5, 60-quality §5.2
// topology adapted to a single process tree): the fake upstream, the bare
// proxy and the gateway (app.Build behind a real http.Server) all listen on
// 127.0.0.1 and every scenario interleaves the paths so noise on a shared
// machine hits them alike. Every loop is bounded; the run stops by itself.
//
//	go run ./bench [scenario ...] [flags]
//	go run ./bench -scenarios latency,throughput -json bench/results/latest.json
//
// Scenarios: latency, throughput, openloop, sse, idle, faults (default: all).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

var allScenarios = []string{"latency", "throughput", "openloop", "sse", "idle", "micro", "faults"}

type config struct {
	scenarios []string
	quick     bool
	features  string // all | minimal
	minimal   bool   // also measure the minimal gateway path (direct provider/model, one plain connection)

	// (a) latency
	rounds, perRound, warmup int
	// (b) throughput
	concurrency int
	duration    time.Duration
	reps        int
	// (c) open loop
	rates           []int
	olDuration      time.Duration
	olWarmup        time.Duration
	upstreamLatency time.Duration
	// (d) SSE
	sseEvents      int
	sseEventGap    time.Duration
	sseConcurrency int
	sseDuration    time.Duration
	sseReps        int
	idleStreams    int
	idleSettle     time.Duration
	// (e) faults
	faultRate     int
	faultDuration time.Duration
	faultStart    time.Duration
	faultLength   time.Duration

	// (e) micro-benchmarks
	microCount     int
	microBenchtime time.Duration

	topology    string // procs | inproc
	databaseURL string // shared mode: a second gateway on this PostgreSQL (a schema of its own)
	redisURL    string // shared mode with fleet-wide limits: that gateway's Redis
	pin         string // auto | off
	moduleDir   string // where go build runs (the module root)

	jsonOut    string
	outDir     string // every run's JSON as <UTC time>-<short commit>.json
	docsAnyway bool
	writeDocs  string
	profileDir string
	timeout    time.Duration
}

func (c *config) asMap() map[string]any {
	rates := make([]string, len(c.rates))
	for i, r := range c.rates {
		rates[i] = strconv.Itoa(r)
	}
	return map[string]any{
		"scenarios": strings.Join(c.scenarios, ","), "quick": c.quick, "features": c.features, "minimal_path": c.minimal,
		"rounds": c.rounds, "per_round": c.perRound, "warmup": c.warmup,
		"concurrency": c.concurrency, "duration": c.duration.String(), "reps": c.reps,
		"rates": strings.Join(rates, ","), "openloop_duration": c.olDuration.String(), "openloop_warmup": c.olWarmup.String(),
		"upstream_latency": c.upstreamLatency.String(),
		"sse_events":       c.sseEvents, "sse_event_gap": c.sseEventGap.String(), "sse_concurrency": c.sseConcurrency, "sse_duration": c.sseDuration.String(), "sse_reps": c.sseReps,
		"idle_streams": c.idleStreams, "idle_settle": c.idleSettle.String(),
		"fault_rate": c.faultRate, "fault_duration": c.faultDuration.String(), "fault_start": c.faultStart.String(),
		"fault_length": c.faultLength.String(),
		"topology":     c.topology, "pin": c.pin, "shared_mode": c.databaseURL != "", "shared_redis": c.redisURL != "",
		// pinned: (b) and (d) streaming cost ran with the proxy on CPU 0 at
		// GOMAXPROCS=1; gomaxprocs: the proxies' GOMAXPROCS in the other scenarios.
		"pinned": c.topology == "procs" && canPin(c), "gomaxprocs": runtime.NumCPU(),
	}
}

// parseFlags reads the harness's command line (flags and scenario names).
func parseFlags(args []string) (*config, error) {
	c := &config{}
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	scen, rates := c.addFlags(fs)
	names, err := parseInterleaved(fs, args)
	if err != nil {
		return nil, err
	}
	if err := c.setScenarios(*scen, names); err != nil {
		return nil, err
	}
	if err := c.setRates(*rates); err != nil {
		return nil, err
	}
	if err := c.check(); err != nil {
		return nil, err
	}
	if c.quick {
		c.shorten()
	}
	return c, nil
}

// addFlags declares every flag on c; the scenario list and the open-loop
// rates come back as text to parse after the flags.
func (c *config) addFlags(fs *flag.FlagSet) (scen, rates *string) {
	scen = fs.String("scenarios", "all", "comma-separated: "+strings.Join(allScenarios, ",")+" or all (positional names work too)")
	fs.BoolVar(&c.quick, "quick", false, "divide every duration by 5 and rounds by 2 (smoke run)")
	fs.StringVar(&c.features, "features", "all", "all: breaker, window gate, model lockout, slots, queue, affinity, request log, metrics; minimal: window gate and lockout off")
	fs.BoolVar(&c.minimal, "minimal", true, "also measure the minimal gateway path (provider/model with one plain connection) in latency and throughput")
	fs.IntVar(&c.rounds, "rounds", 7, "(a) interleaved rounds")
	fs.IntVar(&c.perRound, "per-round", 200, "(a) sequential requests per path per round")
	fs.IntVar(&c.warmup, "warmup", 15, "(a) warm-up requests per path")
	fs.IntVar(&c.concurrency, "concurrency", 32, "(b) closed-loop workers")
	fs.DurationVar(&c.duration, "duration", 3*time.Second, "(b) length of one closed-loop run (first 10% discarded)")
	fs.IntVar(&c.reps, "reps", 3, "(b) repetitions, paths alternating")
	rates = fs.String("rates", "1000,3000", "(c) open-loop rates, requests per second")
	fs.DurationVar(&c.olDuration, "openloop-duration", 5*time.Second, "(c) measured length per rate and path")
	fs.DurationVar(&c.olWarmup, "openloop-warmup", time.Second, "(c) warm-up at the same rate, discarded")
	fs.DurationVar(&c.upstreamLatency, "upstream-latency", 60*time.Millisecond, "(c) fixed delay of the fake upstream in the open-loop scenario")
	fs.IntVar(&c.sseEvents, "sse-events", 20, "(d) content events per stream")
	fs.DurationVar(&c.sseEventGap, "sse-event-gap", time.Millisecond, "(d) pause between content events of the fake upstream (0: back to back, and a proxy that copies bytes then coalesces several events into one write)")
	fs.IntVar(&c.sseConcurrency, "sse-concurrency", 32, "(d) closed-loop stream workers")
	fs.DurationVar(&c.sseDuration, "sse-duration", 3*time.Second, "(d) length of one stream run")
	fs.IntVar(&c.sseReps, "sse-reps", 2, "(d) repetitions, paths alternating")
	fs.IntVar(&c.idleStreams, "idle-streams", 2000, "(d) concurrent idle open streams for the memory measure")
	fs.DurationVar(&c.idleSettle, "idle-settle", 3*time.Second, "(d) settle time before reading memory")
	fs.IntVar(&c.faultRate, "fault-rate", 200, "(e) constant request rate during failure injection")
	fs.DurationVar(&c.faultDuration, "fault-duration", 15*time.Second, "(e) total length of the failure-injection run")
	fs.DurationVar(&c.faultStart, "fault-start", 4*time.Second, "(e) when the 503 burst starts")
	fs.DurationVar(&c.faultLength, "fault-length", 5*time.Second, "(e) how long connection fk-f1 answers 503")
	fs.StringVar(&c.topology, "topology", "procs", "procs: fake upstream, bare proxy and the gateway binary (go build) as child processes, CPU and RSS per process (60-quality §5.2); inproc: all in this process (needed by -profile-dir)")
	fs.StringVar(&c.databaseURL, "database-url", os.Getenv("SWITCHYARD_BENCH_DATABASE_URL"), "shared mode: also run the gateway on this PostgreSQL database (postgres://…, a schema of its own per run; default $SWITCHYARD_BENCH_DATABASE_URL) as the path gateway-shared beside the embedded one, in (a) latency and (b) throughput (procs topology)")
	fs.StringVar(&c.redisURL, "redis-url", os.Getenv("SWITCHYARD_BENCH_REDIS_URL"), "shared mode with fleet-wide limits: the shared-mode gateway also uses this Redis or Valkey (redis://…; default $SWITCHYARD_BENCH_REDIS_URL) for its max_concurrent slots, request queue, window gate and key limits; needs -database-url")
	fs.StringVar(&c.pin, "pin", "auto", "auto: in (b) and (d) streaming cost, the proxy under test on CPU 0 with GOMAXPROCS=1 and the fake upstream and load generator on CPU 1 (procs topology, ≥ 2 CPUs); off: never pin")
	fs.IntVar(&c.microCount, "micro-count", 10, "(e) go test -count for the micro-benchmarks (median reported)")
	fs.DurationVar(&c.microBenchtime, "micro-benchtime", 100*time.Millisecond, "(e) go test -benchtime per micro-benchmark run")
	fs.StringVar(&c.outDir, "out", "bench/results", "directory for this run's JSON as <UTC time>-<short commit>.json (git-ignored; \"\" writes none)")
	fs.BoolVar(&c.docsAnyway, "docs-despite-warnings", false, "with -write-docs, write the table even if the run has warnings or an unsaturated throughput run (the warnings are listed under it)")
	fs.StringVar(&c.jsonOut, "json", "", "write the JSON report to this file")
	fs.StringVar(&c.writeDocs, "write-docs", "", "rewrite the block between <!-- bench:begin --> and <!-- bench:end --> of this file (docs/PERFORMANCE.md) with this run's table")
	fs.StringVar(&c.profileDir, "profile-dir", "", "write CPU profiles of the first gateway and bare-proxy runs of (b) and the first gateway run of (d), heap profiles and goroutine stacks at the idle-stream measurement and an allocation profile of the whole run into this directory")
	fs.DurationVar(&c.timeout, "timeout", 10*time.Minute, "hard bound on the whole run")
	return scen, rates
}

// parseInterleaved parses the flags and returns the positional scenario
// names, which may come before, between or after the flags.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var names []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			break
		}
		names = append(names, rest[0])
		args = rest[1:]
	}
	return names, nil
}

// setScenarios picks the scenarios from -scenarios and the positional names,
// each once, in the order given ("all" adds the missing ones).
func (c *config) setScenarios(scen string, names []string) error {
	if scen != "all" || len(names) == 0 {
		names = append(names, strings.Split(scen, ",")...)
	}
	for _, n := range names {
		n = strings.TrimSpace(n)
		switch {
		case n == "" || n == "all":
			for _, s := range allScenarios {
				if !slices.Contains(c.scenarios, s) {
					c.scenarios = append(c.scenarios, s)
				}
			}
		case n == "idle-streams":
			c.scenarios = append(c.scenarios, "idle")
		case slices.Contains(allScenarios, n):
			if !slices.Contains(c.scenarios, n) {
				c.scenarios = append(c.scenarios, n)
			}
		default:
			return fmt.Errorf("unknown scenario %q (want %s or all)", n, strings.Join(allScenarios, ", "))
		}
	}
	return nil
}

// setRates reads -rates, the open-loop requests per second.
func (c *config) setRates(rates string) error {
	for _, s := range strings.Split(rates, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 || n > 20000 {
			return fmt.Errorf("-rates: %q is not a rate from 1 to 20000", s)
		}
		c.rates = append(c.rates, n)
	}
	return nil
}

// check orders the scenarios (idle streams first), validates the flags that
// depend on each other and finds the module for the gateway build.
func (c *config) check() error {
	// Idle streams run first: later scenarios leave pooled upstream
	// connections (and their goroutines) in the proxies that idle streams
	// would reuse, hiding part of a stream's cost.
	if i := slices.Index(c.scenarios, "idle"); i > 0 {
		c.scenarios = append([]string{"idle"}, slices.Delete(c.scenarios, i, i+1)...)
	}
	if c.topology != "procs" && c.topology != "inproc" {
		return fmt.Errorf("-topology: want procs or inproc")
	}
	if c.redisURL != "" && c.databaseURL == "" {
		return fmt.Errorf("-redis-url: the fleet-wide limits need the shared database: give -database-url too")
	}
	if c.databaseURL != "" && c.topology != "procs" {
		return fmt.Errorf("-database-url: the shared-mode gateway runs as a process: use -topology procs")
	}
	if c.pin != "auto" && c.pin != "off" {
		return fmt.Errorf("-pin: want auto or off")
	}
	if c.topology == "procs" || slices.Contains(c.scenarios, "micro") {
		out, err := exec.Command("go", "env", "GOMOD").Output()
		gomod := strings.TrimSpace(string(out))
		if err != nil || gomod == "" || gomod == os.DevNull {
			return fmt.Errorf("the gateway build and the micro-benchmarks need the module: run from inside it (go env GOMOD: %q, %v)", gomod, err)
		}
		c.moduleDir = filepath.Dir(gomod)
	}
	if c.features != "all" && c.features != "minimal" {
		return fmt.Errorf("-features: want all or minimal")
	}
	if c.rounds < 1 || c.perRound < 1 || c.concurrency < 1 || c.reps < 1 || c.sseConcurrency < 1 || c.sseReps < 1 ||
		c.idleStreams < 1 || c.idleStreams > 5000 || c.microCount < 1 || c.faultRate < 1 || c.sseEvents < 1 {
		return fmt.Errorf("counts must be positive (idle-streams at most 5000)")
	}
	if c.faultStart+c.faultLength >= c.faultDuration {
		return fmt.Errorf("-fault-start + -fault-length must end before -fault-duration")
	}
	return nil
}

// shorten is -quick: every duration divided by 5, fewer rounds and streams.
func (c *config) shorten() {
	div := func(d *time.Duration) { *d /= 5 }
	for _, d := range []*time.Duration{&c.duration, &c.olDuration, &c.olWarmup, &c.sseDuration, &c.faultDuration, &c.faultStart, &c.faultLength, &c.idleSettle} {
		div(d)
	}
	c.rounds = max(3, c.rounds/2)
	c.perRound = max(20, c.perRound/5)
	c.idleStreams = max(50, c.idleStreams/5)
	c.microCount = min(c.microCount, 3)
	c.microBenchtime = min(c.microBenchtime, 20*time.Millisecond)
}

// commandLine is how this run was started, for the report.
func commandLine() string {
	args := []string{"go run ./bench"}
	for _, a := range os.Args[1:] {
		if strings.ContainsAny(a, " '\"") {
			a = "'" + a + "'"
		}
		args = append(args, a)
	}
	return strings.Join(args, " ")
}

// writeDocsBlock replaces the text between the bench markers of path.
func writeDocsBlock(path, block string) error {
	const begin, end = "<!-- bench:begin -->", "<!-- bench:end -->"
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	s := string(b)
	i, j := strings.Index(s, begin), strings.Index(s, end)
	if i < 0 || j < i {
		return fmt.Errorf("%s: no %s … %s block", path, begin, end)
	}
	s = s[:i+len(begin)] + "\n" + block + s[j:]
	return os.WriteFile(path, []byte(s), 0o644)
}

func main() {
	if ok, err := runRole(os.Args[1:]); ok {
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		return
	}
	cfg, err := parseFlags(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(2)
	}
	if _, err := run(cfg); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// run measures the scenarios of cfg and writes the report where cfg says.
func run(cfg *config) (*report, error) {
	ctx, cancel := context.WithTimeout(context.Background(), cfg.timeout)
	defer cancel()
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt)
	defer stop()

	rep := newReport(cfg)
	warnShared(cfg, rep)
	raiseNoFile(rep)
	if cfg.profileDir != "" {
		if err := os.MkdirAll(cfg.profileDir, 0o755); err != nil {
			return nil, err
		}
		runtime.MemProfileRate = 64 << 10
	}
	fmt.Fprintf(os.Stderr, "bench: starting fake upstream, bare proxy and gateway (features=%s)\n", cfg.features)
	topo, err := startTopology(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("start: %w", err)
	}
	defer topo.close()
	fmt.Fprintf(os.Stderr, "bench: fake upstream %s, bare proxy %s, gateway %s\n", topo.directURL, topo.baselineURL, topo.gatewayURL)
	if err := topo.checkPaths(ctx, cfg); err != nil {
		return nil, fmt.Errorf("sanity check: %w", err)
	}
	started := time.Now()
	if err := runScenarios(ctx, cfg, topo, rep); err != nil {
		return nil, err
	}
	topo.reportRequestLog(ctx, rep)
	rep.detail("elapsed_s", time.Since(started).Seconds())
	if ctx.Err() != nil {
		rep.warn("run stopped early: %v", ctx.Err())
	}
	if cfg.profileDir != "" && !topo.procs {
		if f, err := os.Create(filepath.Join(cfg.profileDir, "allocs.pprof")); err == nil {
			pprof.Lookup("allocs").WriteTo(f, 0)
			f.Close()
		}
	}
	if err := writeOutputs(cfg, rep); err != nil {
		return nil, err
	}
	return rep, nil
}

// warnShared warns when the machine is busy or the processes share CPUs, so
// the report says which numbers to trust.
func warnShared(cfg *config, rep *report) {
	if l := loadAvg1(); l > 0.5 {
		rep.warn("load average %.2f above 0.5 before start: other work shares this machine; compare ratios, not absolutes", l)
	}
	switch {
	case cfg.topology == "inproc":
		rep.warn("single-process run (-topology inproc): gateway, bare proxy, fake upstream and load generator share %d CPUs and one process; CPU and memory of a hop are derived by subtracting the direct path", runtime.NumCPU())
	case !canPin(cfg):
		rep.warn("unpinned run (-pin %s, %d CPUs): the proxy under test shares the CPUs with the fake upstream and the load generator", cfg.pin, runtime.NumCPU())
	}
}

// runScenarios runs the chosen scenarios in order until the context ends;
// a failing scenario is a warning, not the end of the run.
func runScenarios(ctx context.Context, cfg *config, topo *topology, rep *report) error {
	for _, s := range cfg.scenarios {
		if ctx.Err() != nil {
			break
		}
		t0 := time.Now()
		fmt.Fprintf(os.Stderr, "bench: scenario %s\n", s)
		var err error
		if perr := topo.place(ctx, cfg, s == "throughput" || s == "sse"); perr != nil {
			return fmt.Errorf("place processes for %s: %w", s, perr)
		}
		switch s {
		case "latency":
			err = runLatency(ctx, cfg, topo, rep)
		case "throughput":
			err = runThroughput(ctx, cfg, topo, rep)
		case "openloop":
			err = runOpenLoop(ctx, cfg, topo, rep)
		case "sse":
			err = runSSE(ctx, cfg, topo, rep)
		case "idle":
			err = runIdle(ctx, cfg, topo, rep)
		case "micro":
			err = runMicro(ctx, cfg, rep)
		case "faults":
			err = runFaults(ctx, cfg, topo, rep)
		}
		if err != nil {
			rep.warn("scenario %s: %v", s, err)
		}
		fmt.Fprintf(os.Stderr, "bench: scenario %s took %s\n", s, time.Since(t0).Round(100*time.Millisecond))
	}
	return nil
}

// writeOutputs prints the Markdown table and writes it into the docs, the
// results directory and the -json file as asked.
func writeOutputs(cfg *config, rep *report) error {
	sort.SliceStable(rep.Results, func(i, j int) bool { return rep.Results[i].Scenario[0] < rep.Results[j].Scenario[0] })
	var md strings.Builder
	fmt.Fprintf(&md, "Run %s, commit %s (dirty: %v), `%s`\n\n", rep.Time, rep.Git.Commit, rep.Git.Dirty, commandLine())
	m := rep.Machine
	fmt.Fprintf(&md, "Machine: %s, %d vCPU, %.1f GiB, kernel %s, %s, load at start %s\n\n", m.CPUModel, m.VCPUs, m.MemGiB, m.Kernel, m.Go, m.LoadAvg)
	rep.writeMarkdown(&md)
	fmt.Fprintf(os.Stdout, "\n## Switchyard bench\n\n%s", md.String())
	if cfg.writeDocs != "" {
		// 60-quality §5.5: a run with warnings or an unjudged (unsaturated)
		// throughput ratio is not copied into the docs unless asked to.
		if why := rep.docsBlockers(); len(why) > 0 && !cfg.docsAnyway {
			fmt.Fprintf(os.Stderr, "bench: not writing %s: %s (-docs-despite-warnings writes it anyway)\n", cfg.writeDocs, strings.Join(why, "; "))
		} else {
			block := md.String()
			if len(why) > 0 {
				block += "\nWritten with -docs-despite-warnings: " + strings.Join(why, "; ") + ".\n"
			}
			if err := writeDocsBlock(cfg.writeDocs, block); err != nil {
				return err
			}
			fmt.Fprintf(os.Stderr, "bench: updated %s\n", cfg.writeDocs)
		}
	}
	if cfg.outDir != "" {
		stamp := strings.NewReplacer(":", "", "-", "").Replace(rep.Time)
		name := filepath.Join(cfg.outDir, stamp+"-"+shortCommit(rep.Git.Commit)+".json")
		if err := os.MkdirAll(cfg.outDir, 0o755); err == nil {
			if err := rep.writeJSON(name); err != nil {
				return err
			}
			fmt.Fprintf(os.Stderr, "bench: wrote %s\n", name)
		}
	}
	if cfg.jsonOut != "" {
		if err := rep.writeJSON(cfg.jsonOut); err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "bench: wrote %s\n", cfg.jsonOut)
	}
	return nil
}

func shortCommit(c string) string {
	if len(c) > 7 {
		return c[:7]
	}
	if c == "" {
		return "nocommit"
	}
	return c
}
