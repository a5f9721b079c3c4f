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

	output := map[string][]string{}
	var passed, failed, skipped int
	var failedNames []string
	skipMsgs := map[string]string{}
	pkgHadFailure := map[string]bool{}
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if err := json.Unmarshal(line, &e); err != nil || e.Action == "" {
			// Build errors and other non-JSON lines.
			if s := strings.TrimSpace(string(line)); s != "" {
				output["(build)"] = append(output["(build)"], s)
			}
			continue
		}
		key := e.Package + " " + e.Test
		switch e.Action {
		case "output":
			output[key] = append(output[key], strings.TrimRight(e.Output, "\n"))
		case "pass":
			if e.Test != "" {
				passed++
			}
		case "fail":
			switch {
			case e.Test != "":
				failed++
				failedNames = append(failedNames, key)
				pkgHadFailure[e.Package] = true
			case !pkgHadFailure[e.Package]:
				// A package failing outside any test: panic, timeout, TestMain.
				failed++
				failedNames = append(failedNames, key)
			}
		case "build-fail":
			failed++
			failedNames = append(failedNames, e.ImportPath+" (build)")
		case "build-output":
			k := e.ImportPath + " (build)"
			output[k] = append(output[k], strings.TrimRight(e.Output, "\n"))
		case "skip":
			if e.Test != "" {
				skipped++
				msg := ""
				for _, o := range output[key] {
					if t := strings.TrimSpace(o); t != "" && !strings.HasPrefix(t, "=== ") && !strings.HasPrefix(t, "--- SKIP") {
						msg = t
					}
				}
				skipMsgs[key] = msg
			}
		}
	}
	if b := output["(build)"]; len(b) > 0 {
		for _, l := range b {
			if strings.Contains(l, "FAIL") || strings.Contains(l, "cannot") || strings.Contains(l, "undefined") || strings.Contains(l, ".go:") {
				failed++
				failedNames = append(failedNames, "(build)")
				break
			}
		}
	}
	for _, name := range failedNames {
		fmt.Printf("--- FAILED: %s\n", name)
		lines := output[name]
		if len(lines) > 50 {
			lines = lines[len(lines)-50:]
		}
		for _, l := range lines {
			fmt.Println("    " + l)
		}
	}
	for _, f := range fails {
		failed++
		fmt.Printf("--- FAILED: %s\n", f)
	}
	keys := make([]string, 0, len(skipMsgs))
	for k := range skipMsgs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Printf("--- SKIPPED: %s: %s\n", k, skipMsgs[k])
	}
	for _, s := range skips {
		skipped++
		fmt.Printf("--- SKIPPED: %s\n", s)
	}
	elapsed := int64(0)
	if *start > 0 {
		elapsed = time.Now().Unix() - *start
	}
	fmt.Printf("==== %d passed, %d failed, %d skipped in %ds ====\n", passed, failed, skipped, elapsed)
	fmt.Printf("tests: %d passed, %d failed, %d skipped\n", passed, failed, skipped)
	if failed > 0 {
		os.Exit(1)
	}
}
