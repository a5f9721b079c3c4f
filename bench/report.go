package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// result is one row of the report (60-quality §5.5).
type result struct {
	ID       string      `json:"id"`
	Scenario string      `json:"scenario"`
	Metric   string      `json:"metric"`
	Unit     string      `json:"unit"`
	Value    float64     `json:"value"`
	Baseline *float64    `json:"baseline"`
	Ratio    *float64    `json:"ratio"`
	Target   string      `json:"target"`
	Pass     *bool       `json:"pass"`
	Samples  int         `json:"samples"`
	IQR      *[2]float64 `json:"iqr,omitempty"`
	Note     string      `json:"note,omitempty"`
}

type machine struct {
	CPUModel    string  `json:"cpu_model"`
	VCPUs       int     `json:"vcpus"`
	MemGiB      float64 `json:"mem_gib"`
	Kernel      string  `json:"kernel"`
	Go          string  `json:"go"`
	Virtualised bool    `json:"virtualised"`
	NoFile      uint64  `json:"nofile"`
	LoadAvg     string  `json:"loadavg_at_start"`
}

type report struct {
	Schema   string         `json:"schema"`
	Time     string         `json:"time"`
	Git      gitInfo        `json:"git"`
	Machine  machine        `json:"machine"`
	Config   map[string]any `json:"config"`
	Warnings []string       `json:"warnings"`
	Results  []result       `json:"results"`
	Details  map[string]any `json:"details,omitempty"`
}

type gitInfo struct {
	Commit string `json:"commit"`
	Dirty  bool   `json:"dirty"`
}

func (r *report) add(res result) {
	if res.ID == "" {
		res.ID = res.Scenario + "." + strings.NewReplacer(" ", "_", "/", "_", "(", "", ")", "", ",", "", "%", "pct", "−", "-").Replace(res.Metric)
	}
	r.Results = append(r.Results, res)
}

func (r *report) warn(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	r.Warnings = append(r.Warnings, msg)
	fmt.Fprintln(os.Stderr, "warning:", msg)
}

func (r *report) detail(key string, v any) {
	if r.Details == nil {
		r.Details = map[string]any{}
	}
	r.Details[key] = v
}

func f64(v float64) *float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	return &v
}
func boolp(v bool) *bool { return &v }

func ratio(a, b float64) *float64 {
	if b == 0 {
		return nil
	}
	return f64(a / b)
}

func machineInfo() machine {
	m := machine{VCPUs: runtime.NumCPU(), Go: runtime.Version()}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "model name"); ok && m.CPUModel == "" {
				m.CPUModel = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
			}
			if strings.HasPrefix(line, "flags") && strings.Contains(line, " hypervisor") {
				m.Virtualised = true
			}
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "MemTotal:"); ok {
				f := strings.Fields(v)
				if len(f) > 0 {
					kb, _ := strconv.ParseFloat(f[0], 64)
					m.MemGiB = math.Round(kb/1024/1024*10) / 10
				}
			}
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	var rl syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl) == nil {
		m.NoFile = rl.Cur
	}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		m.LoadAvg = strings.Join(strings.Fields(string(b))[:3], " ")
	}
	return m
}

func loadAvg1() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}

func gitState() gitInfo {
	var g gitInfo
	if out, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output(); err == nil {
		g.Commit = strings.TrimSpace(string(out))
	}
	if out, err := exec.Command("git", "status", "--porcelain", "--untracked-files=no").Output(); err == nil {
		g.Dirty = len(strings.TrimSpace(string(out))) > 0
	}
	return g
}

func newReport(cfg *config) *report {
	r := &report{Schema: "switchyard-bench/1", Time: time.Now().UTC().Format(time.RFC3339), Git: gitState(), Machine: machineInfo(),
		Config: cfg.asMap(), Warnings: []string{}}
	return r
}

func (r *report) writeJSON(path string) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// fmtVal prints a value with its unit, 3–4 significant digits.
func fmtVal(v float64, unit string) string {
	var s string
	switch {
	case unit == "" && v == math.Trunc(v) && math.Abs(v) < 1e9:
		s = strconv.FormatFloat(v, 'f', 0, 64)
	case v == 0:
		s = "0"
	case math.Abs(v) >= 1000:
		s = strconv.FormatFloat(v, 'f', 0, 64)
	case math.Abs(v) >= 100:
		s = strconv.FormatFloat(v, 'f', 1, 64)
	case math.Abs(v) >= 1:
		s = strconv.FormatFloat(v, 'f', 2, 64)
	default:
		s = strconv.FormatFloat(v, 'f', 3, 64)
	}
	if unit == "" {
		return s
	}
	return s + " " + unit
}

// writeMarkdown prints the table of 60-quality §5.5.
func (r *report) writeMarkdown(w io.Writer) {
	fmt.Fprintln(w, "| scenario | metric | Switchyard | baseline | ratio | target | pass |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|")
	for _, res := range r.Results {
		base, rat, pass := "—", "—", "—"
		if res.Baseline != nil {
			base = fmtVal(*res.Baseline, res.Unit)
		}
		if res.Ratio != nil {
			rat = strconv.FormatFloat(*res.Ratio, 'f', 2, 64) + "×"
		}
		if res.Pass != nil {
			pass = "fail"
			if *res.Pass {
				pass = "pass"
			}
		}
		target := res.Target
		if target == "" {
			target = "reported"
		}
		val := fmtVal(res.Value, res.Unit)
		if res.IQR != nil {
			val += fmt.Sprintf(" (IQR %s–%s)", fmtVal(res.IQR[0], ""), fmtVal(res.IQR[1], ""))
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s |\n", res.Scenario, res.Metric, val, base, rat, target, pass)
	}
	notes := false
	for _, res := range r.Results {
		if res.Note == "" {
			continue
		}
		if !notes {
			fmt.Fprintln(w)
			fmt.Fprintln(w, "Notes:")
			notes = true
		}
		fmt.Fprintf(w, "- %s, %s: %s\n", res.Scenario, res.Metric, res.Note)
	}
	if len(r.Warnings) > 0 {
		fmt.Fprintln(w)
		fmt.Fprintln(w, "Warnings:")
		for _, msg := range r.Warnings {
			fmt.Fprintln(w, "- "+msg)
		}
	}
}

// docsBlockers lists why this run should not replace the table in the
// docs: warnings, and throughput ratios marked not judged.
func (r *report) docsBlockers() []string {
	var why []string
	if n := len(r.Warnings); n > 0 {
		why = append(why, fmt.Sprintf("%d warning(s), first: %s", n, r.Warnings[0]))
	}
	for _, res := range r.Results {
		if strings.Contains(res.Note, "saturated: false") {
			why = append(why, res.Scenario+" "+res.Metric+": saturated: false")
		}
	}
	return why
}
