// Command testsummary reads `go test -json` streams on stdin and prints each
// failure with its last 50 output lines, every skipped test with its message,
// and a closing count line. Extra failed items (a vet or build failure, a
// stale generated file) are passed as arguments: -fail "name: reason".
// It exits 0 only when nothing failed.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"
)

type event struct {
	Action     string
	Package    string
	Test       string
	Output     string
	Elapsed    float64
	ImportPath string
}

type multi []string

func (m *multi) String() string     { return strings.Join(*m, ",") }
func (m *multi) Set(v string) error { *m = append(*m, v); return nil }

func main() {
	var fails multi
	var skips multi
	start := flag.Int64("start", 0, "unix seconds when the run started (for the elapsed time)")
	flag.Var(&fails, "fail", "an extra failed item (repeatable)")
	flag.Var(&skips, "skip", "an extra skipped item (repeatable)")
	flag.Parse()

	t := newTally()
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		t.read(sc.Bytes())
	}
	t.buildFailure()
	t.print(fails, skips)
	elapsed := int64(0)
	if *start > 0 {
		elapsed = time.Now().Unix() - *start
	}
	fmt.Printf("==== %d passed, %d failed, %d skipped in %ds ====\n", t.passed, t.failed, t.skipped, elapsed)
	fmt.Printf("tests: %d passed, %d failed, %d skipped\n", t.passed, t.failed, t.skipped)
	if t.failed > 0 {
		os.Exit(1)
	}
}

// tally is what the test events said so far.
type tally struct {
	output                  map[string][]string // per "package test", and "(build)" for non-JSON lines
	passed, failed, skipped int
	failedNames             []string
	skipMsgs                map[string]string
	pkgHadFailure           map[string]bool
}

func newTally() *tally {
	return &tally{output: map[string][]string{}, skipMsgs: map[string]string{}, pkgHadFailure: map[string]bool{}}
}

// read takes one line of the go test -json stream.
func (t *tally) read(line []byte) {
	var e event
	if err := json.Unmarshal(line, &e); err != nil || e.Action == "" {
		// Build errors and other non-JSON lines.
		if s := strings.TrimSpace(string(line)); s != "" {
			t.output["(build)"] = append(t.output["(build)"], s)
		}
		return
	}
	key := e.Package + " " + e.Test
	switch e.Action {
	case "output":
		t.output[key] = append(t.output[key], strings.TrimRight(e.Output, "\n"))
	case "pass":
		if e.Test != "" {
			t.passed++
		}
	case "fail":
		switch {
		case e.Test != "":
			t.failed++
			t.failedNames = append(t.failedNames, key)
			t.pkgHadFailure[e.Package] = true
		case !t.pkgHadFailure[e.Package]:
			// A package failing outside any test: panic, timeout, TestMain.
			t.failed++
			t.failedNames = append(t.failedNames, key)
		}
	case "build-fail":
		t.failed++
		t.failedNames = append(t.failedNames, e.ImportPath+" (build)")
	case "build-output":
		k := e.ImportPath + " (build)"
		t.output[k] = append(t.output[k], strings.TrimRight(e.Output, "\n"))
	case "skip":
		if e.Test != "" {
			t.skipped++
			msg := ""
			for _, o := range t.output[key] {
				if s := strings.TrimSpace(o); s != "" && !strings.HasPrefix(s, "=== ") && !strings.HasPrefix(s, "--- SKIP") {
					msg = s
				}
			}
			t.skipMsgs[key] = msg
		}
	}
}

// buildFailure counts non-JSON output that reads like a build error as one
// failure.
func (t *tally) buildFailure() {
	for _, l := range t.output["(build)"] {
		if strings.Contains(l, "FAIL") || strings.Contains(l, "cannot") || strings.Contains(l, "undefined") || strings.Contains(l, ".go:") {
			t.failed++
			t.failedNames = append(t.failedNames, "(build)")
			return
		}
	}
}

// print lists each failure with its last 50 output lines, then the extra
// failures, the skipped tests with their messages and the extra skips.
func (t *tally) print(fails, skips []string) {
	for _, name := range t.failedNames {
		fmt.Printf("--- FAILED: %s\n", name)
		lines := t.output[name]
		if len(lines) > 50 {
			lines = lines[len(lines)-50:]
		}
		for _, l := range lines {
			fmt.Println("    " + l)
		}
	}
	for _, f := range fails {
		t.failed++
		fmt.Printf("--- FAILED: %s\n", f)
	}
	keys := make([]string, 0, len(t.skipMsgs))
	for k := range t.skipMsgs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Printf("--- SKIPPED: %s: %s\n", k, t.skipMsgs[k])
	}
	for _, s := range skips {
		t.skipped++
		fmt.Printf("--- SKIPPED: %s\n", s)
	}
}
