package main

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// TestMain lets the test binary stand in for the bench binary: the
// process-per-role topology starts the fake upstream and the bare proxy as
// hidden subcommands of os.Executable().
func TestMain(m *testing.M) {
	if ok, err := runRole(os.Args[1:]); ok {
		if err != nil {
			os.Stderr.WriteString(err.Error() + "\n")
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// tiny is every scenario with loads small enough for CI: a smoke run that
// keeps the harness compiling and working, never a timed assertion
// (60-quality §5.1).
var tiny = []string{"-quick", "-rounds", "1", "-per-round", "5", "-warmup", "2", "-reps", "1", "-duration", "300ms",
	"-rates", "50", "-openloop-duration", "400ms", "-openloop-warmup", "100ms", "-upstream-latency", "5ms",
	"-sse-duration", "300ms", "-sse-reps", "1", "-sse-concurrency", "4", "-concurrency", "4", "-idle-streams", "10", "-idle-settle", "10ms",
	"-fault-rate", "40", "-fault-duration", "1500ms", "-fault-start", "300ms", "-fault-length", "300ms"}

func smoke(t *testing.T, args ...string) *report {
	t.Helper()
	// Every scenario but micro (go test -bench inside go test; parseBench
	// has its own test).
	cfg, err := parseFlags(append(append(slices.Clone(tiny), args...), "latency", "throughput", "openloop", "sse", "idle", "faults"))
	if err != nil {
		t.Fatal(err)
	}
	// -quick divides again what tiny already set; keep the fault window valid.
	cfg.idleStreams = 10
	cfg.outDir = t.TempDir()
	rep, err := run(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range rep.Warnings {
		if strings.HasPrefix(w, "scenario ") || strings.Contains(w, "failed") || strings.Contains(w, "dropped") {
			t.Errorf("warning: %s", w)
		}
	}
	seen := map[string]bool{}
	for _, r := range rep.Results {
		seen[strings.Fields(r.Scenario)[0]] = true
	}
	for _, s := range []string{"a", "b", "c", "d", "f"} {
		if !seen[s] {
			t.Errorf("no results for scenario %s", s)
		}
	}
	return rep
}

// TestHarnessSmokeProcs runs every scenario against child processes (the
// gateway built with go build), unpinned so that the test does not move
// other work between CPUs.
func TestHarnessSmokeProcs(t *testing.T) {
	rep := smoke(t, "-topology", "procs", "-pin", "off")
	var idle bool
	for _, r := range rep.Results {
		if strings.HasPrefix(r.Metric, "memory per idle open stream") {
			idle = true
			if r.Value == 0 && r.Samples == 0 {
				t.Errorf("idle-stream memory measured nothing: %+v", r)
			}
		}
	}
	if !idle {
		t.Error("no idle-stream memory result")
	}
}

// TestHarnessSmokeInproc runs every scenario in one process.
func TestHarnessSmokeInproc(t *testing.T) {
	smoke(t, "-topology", "inproc")
}

// TestProcCPUAndStatus reads this process's CPU time and RSS through the
// /proc paths used for child processes.
func TestProcCPUAndStatus(t *testing.T) {
	pid := os.Getpid()
	if procStatus(pid, "VmRSS") <= 0 {
		t.Fatal("VmRSS not read")
	}
	x := 0
	for i := 0; i < 20_000_000; i++ { // burn some CPU: utime has 10 ms ticks
		x += i % 7
	}
	if procCPU(pid) <= 0 {
		t.Fatalf("CPU time not read (%d)", x)
	}
}

func TestParseBench(t *testing.T) {
	out := []byte(`goos: linux
pkg: switchyard/services/accounts
BenchmarkSelectConnection/n=1000/fill-first-2   	  200000	      5788 ns/op	       0 B/op	       0 allocs/op
BenchmarkSelectConnection/n=1000/fill-first-2   	  200000	      5800 ns/op	       0 B/op	       0 allocs/op
BenchmarkReadChunk-2   	 1000000	       686.0 ns/op	 221.57 MB/s	       0 B/op	       0 allocs/op
BenchmarkWeird-name-x   	 10	       7 ns/op
PASS
`)
	runs := parseBench(out)
	if got := runs["BenchmarkSelectConnection/n=1000/fill-first"]; len(got) != 2 || got[0].ns != 5788 || got[1].ns != 5800 {
		t.Errorf("select runs = %+v", got)
	}
	if got := runs["BenchmarkReadChunk"]; len(got) != 1 || got[0].ns != 686 || got[0].allocs != 0 {
		t.Errorf("read chunk = %+v (MB/s column must be skipped)", got)
	}
	if got := runs["BenchmarkWeird-name-x"]; len(got) != 1 {
		t.Errorf("a name whose last dash is not GOMAXPROCS keeps it: %v", runs)
	}
}

// TestHarnessSmokeShared runs (a) and (b) with the shared-mode gateway on
// the test PostgreSQL beside the embedded one, and checks that the
// shared/embedded ratios are reported (never judged here).
func TestHarnessSmokeShared(t *testing.T) {
	dsn := os.Getenv("SWITCHYARD_TEST_DATABASE_URL")
	if dsn == "" {
		t.Skip("SWITCHYARD_TEST_DATABASE_URL is unset: no PostgreSQL for the shared-mode gateway")
	}
	smokeShared(t, "-database-url", dsn)
}

// TestHarnessSmokeSharedRedis is the shared-mode run with Redis counting
// the limits (-redis-url): the ratios carry the 1.15× budget, and the
// shared-mode gateway really admitted through Redis — the bench client
// key's rate bucket exists there afterwards.
func TestHarnessSmokeSharedRedis(t *testing.T) {
	dsn, rurl := os.Getenv("SWITCHYARD_TEST_DATABASE_URL"), os.Getenv("SWITCHYARD_TEST_REDIS_URL")
	if dsn == "" || rurl == "" {
		t.Skip("SWITCHYARD_TEST_DATABASE_URL or SWITCHYARD_TEST_REDIS_URL is unset: no PostgreSQL and Redis for the shared-mode gateway")
	}
	opt, err := redis.ParseURL(rurl)
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opt)
	defer rdb.Close()
	ctx := context.Background()
	before, err := rdb.Keys(ctx, "sy:krpm:*").Result()
	if err != nil {
		t.Fatal(err)
	}
	rep := smokeShared(t, "-database-url", dsn, "-redis-url", rurl)
	for _, r := range rep.Results {
		if strings.Contains(r.Metric, "shared mode / embedded") && r.Target != "" && r.Target != "≤ 1.15× embedded" {
			t.Errorf("%s: target %q, want the Redis budget", r.Metric, r.Target)
		}
	}
	after, err := rdb.Keys(ctx, "sy:krpm:*").Result()
	if err != nil {
		t.Fatal(err)
	}
	if fresh := slices.DeleteFunc(after, func(k string) bool { return slices.Contains(before, k) }); len(fresh) == 0 {
		t.Errorf("no new per-key rate bucket in Redis: the shared-mode gateway did not admit through Redis")
	}
}

func smokeShared(t *testing.T, flags ...string) *report {
	t.Helper()
	args := append(slices.Clone(tiny), "-topology", "procs", "-pin", "off")
	cfg, err := parseFlags(append(append(args, flags...), "latency", "throughput"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.outDir = t.TempDir()
	rep, err := run(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range rep.Warnings {
		if strings.HasPrefix(w, "scenario ") || strings.Contains(w, "failed") {
			t.Errorf("warning: %s", w)
		}
	}
	want := map[string]bool{"added p50, shared mode / embedded": false, "proxy process CPU per request, shared mode / embedded": false}
	for _, r := range rep.Results {
		if _, ok := want[r.Metric]; ok {
			// A smoke run is a few hundred requests: the embedded gateway's
			// process CPU can round to 0 clock ticks, and then no ratio can be
			// formed. The row is there with its baseline; that is what the
			// smoke checks.
			want[r.Metric] = r.Ratio != nil || r.Baseline != nil && *r.Baseline == 0
		}
	}
	for m, ok := range want {
		if !ok {
			t.Errorf("no ratio for %q", m)
		}
	}
	return rep
}

// TestRedisURLNeedsTheDatabase: -redis-url alone is refused with a reason.
func TestRedisURLNeedsTheDatabase(t *testing.T) {
	_, err := parseFlags([]string{"-topology", "procs", "-redis-url", "redis://127.0.0.1:6379/0", "latency"})
	if err == nil || !strings.Contains(err.Error(), "-database-url") {
		t.Fatalf("err = %v, want the -database-url requirement", err)
	}
}
