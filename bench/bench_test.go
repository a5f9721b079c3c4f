package main

import (
	"os"
	"slices"
	"strings"
	"testing"
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
	cfg, err := parseFlags(append(slices.Clone(tiny), "-topology", "procs", "-pin", "off", "-database-url", dsn, "latency", "throughput"))
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
			want[r.Metric] = r.Ratio != nil
		}
	}
	for m, ok := range want {
		if !ok {
			t.Errorf("no ratio for %q", m)
		}
	}
}
