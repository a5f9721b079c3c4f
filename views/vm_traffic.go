package views

import (
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"switchyard/services"
)

// Overview traffic chart and top failing targets (50-dashboard §6.3), both
// read from the request log.

// Chart geometry, in SVG user units (the SVG scales to its container).
const (
	chartWidth   = 720
	chartHeight  = 180
	chartLeft    = 36 // room for the y-axis labels
	chartRight   = 4
	chartTop     = 8
	chartBottom  = 22 // room for the x-axis labels
	chartPlotW   = chartWidth - chartLeft - chartRight
	chartPlotH   = chartHeight - chartTop - chartBottom
	chartBarGap  = 0.2 // share of a slot left empty between bars
	maxFailTable = 5   // top failing targets shown
)

// chartBucket is how much time one bar covers for a window: a minute for
// the last hour; a quarter of an hour for the last 24 hours (1,440 bars
// would be thinner than a pixel).
func chartBucket(span time.Duration) time.Duration {
	if span <= time.Hour {
		return time.Minute
	}
	return 15 * time.Minute
}

// TrafficChartVM is the requests chart of the Overview: one bar per bucket,
// successes and failures stacked, drawn server-side as inline SVG.
type TrafficChartVM struct {
	Bucket    time.Duration
	Buckets   []ChartBucketVM // oldest first
	Successes int
	Failures  int
	Aborted   int // client aborts: counted apart, not drawn
	Max       int // the tallest bar (successes + failures)
	WindowLbl string
}

// ChartBucketVM is one bar.
type ChartBucketVM struct {
	Start time.Time
	OK    int
	Fail  int
}

// NewTrafficChartVM counts entries (any order) into buckets of the window
// that ends at now. Success is as in the traffic tiles (NewTrafficVM);
// client aborts are left out. Entries outside the window are ignored.
func NewTrafficChartVM(entries []services.RequestLogEntry, w OverviewWindow, now time.Time) TrafficChartVM {
	b := chartBucket(w.Span)
	end := now.Truncate(b).Add(b) // the bucket holding now is the last
	n := int(w.Span / b)
	start := end.Add(-time.Duration(n) * b)
	vm := TrafficChartVM{Bucket: b, Buckets: make([]ChartBucketVM, n), WindowLbl: strings.ToLower(w.Label)}
	for i := range vm.Buckets {
		vm.Buckets[i].Start = start.Add(time.Duration(i) * b)
	}
	for _, e := range entries {
		if e.CreatedAt.Before(start) || !e.CreatedAt.Before(end) || e.CreatedAt.After(now) {
			continue
		}
		i := int(e.CreatedAt.Sub(start) / b)
		switch {
		case e.Outcome == services.RequestOutcomeAborted:
			vm.Aborted++
		case succeeded(e):
			vm.Buckets[i].OK++
			vm.Successes++
		default:
			vm.Buckets[i].Fail++
			vm.Failures++
		}
	}
	for _, bk := range vm.Buckets {
		vm.Max = max(vm.Max, bk.OK+bk.Fail)
	}
	return vm
}

// succeeded is the success rule of the traffic tiles: a 2xx final status
// that, for a stream, ended without an in-band error.
func succeeded(e services.RequestLogEntry) bool {
	return e.Status >= 200 && e.Status < 300 && e.Outcome != services.RequestOutcomeUpstreamError &&
		e.Outcome != services.RequestOutcomeClientError
}

// Empty reports a window without a drawn request.
func (c TrafficChartVM) Empty() bool { return c.Successes+c.Failures == 0 }

// Unit names what one bar covers ("minute", "15 minutes").
func (c TrafficChartVM) Unit() string {
	if c.Bucket == time.Minute {
		return "minute"
	}
	return strconv.Itoa(int(c.Bucket/time.Minute)) + " minutes"
}

// Title is the chart's title ("Requests per minute").
func (c TrafficChartVM) Title() string { return "Requests per " + c.Unit() }

// Desc summarises the chart in words, for its <desc>.
func (c TrafficChartVM) Desc() string {
	total := c.Successes + c.Failures
	s := Thousands(int64(total)) + " " + pluralWord(total, "request", "requests") + " in the " + c.WindowLbl + ": " +
		Thousands(int64(c.Successes)) + " succeeded, " + Thousands(int64(c.Failures)) + " failed."
	if total > 0 {
		busiest := c.Buckets[0]
		for _, b := range c.Buckets {
			if b.OK+b.Fail > busiest.OK+busiest.Fail {
				busiest = b
			}
		}
		s += " Busiest " + c.Unit() + ": " + c.BucketLabel(busiest) + " with " + Thousands(int64(busiest.OK+busiest.Fail)) + "."
	}
	if c.Aborted > 0 {
		s += " " + Thousands(int64(c.Aborted)) + " client " + pluralWord(c.Aborted, "abort is", "aborts are") + " not shown."
	}
	return s
}

func pluralWord(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// BucketLabel names a bucket by its UTC start time ("10:42 UTC").
func (c TrafficChartVM) BucketLabel(b ChartBucketVM) string {
	return b.Start.UTC().Format("15:04") + " UTC"
}

// Rows are the buckets that hold requests, for the screen-reader table.
func (c TrafficChartVM) Rows() []ChartBucketVM {
	var out []ChartBucketVM
	for _, b := range c.Buckets {
		if b.OK+b.Fail > 0 {
			out = append(out, b)
		}
	}
	return out
}

// ChartBarVM is one stacked bar in SVG coordinates.
type ChartBarVM struct {
	X, W           string
	OKY, OKH       string // success part (bottom); OKH "0" when none
	FailY, FailH   string // failure part (stacked on top)
	HasOK, HasFail bool
}

// Bars are the stacked bars, oldest left.
func (c TrafficChartVM) Bars() []ChartBarVM {
	if c.Max == 0 || len(c.Buckets) == 0 {
		return nil
	}
	slot := float64(chartPlotW) / float64(len(c.Buckets))
	w := slot * (1 - chartBarGap)
	scale := float64(chartPlotH) / float64(c.ceiling())
	base := float64(chartTop + chartPlotH)
	var out []ChartBarVM
	for i, b := range c.Buckets {
		if b.OK+b.Fail == 0 {
			continue
		}
		okH, failH := float64(b.OK)*scale, float64(b.Fail)*scale
		out = append(out, ChartBarVM{
			X: svgNum(float64(chartLeft) + float64(i)*slot + (slot-w)/2), W: svgNum(w),
			OKY: svgNum(base - okH), OKH: svgNum(okH), FailY: svgNum(base - okH - failH), FailH: svgNum(failH),
			HasOK: b.OK > 0, HasFail: b.Fail > 0,
		})
	}
	return out
}

// ceiling is the y-axis top: the tallest bar rounded up to an even count,
// so the middle grid line falls on a whole number.
func (c TrafficChartVM) ceiling() int {
	if c.Max <= 1 {
		return 2
	}
	return c.Max + c.Max%2
}

// ChartTickVM is a labelled grid line or axis label.
type ChartTickVM struct {
	Pos   string // y for a grid line, x for a time label
	Label string
	Align string // text-anchor of a time label
}

// YTicks are the grid lines at the top and the middle of the scale, and zero.
func (c TrafficChartVM) YTicks() []ChartTickVM {
	top := c.ceiling()
	out := make([]ChartTickVM, 0, 3)
	for _, v := range []int{0, top / 2, top} {
		y := float64(chartTop+chartPlotH) - float64(v)*float64(chartPlotH)/float64(top)
		out = append(out, ChartTickVM{Pos: svgNum(y), Label: strconv.Itoa(v)})
	}
	return out
}

// XTicks label the start, the middle and the end of the window.
func (c TrafficChartVM) XTicks() []ChartTickVM {
	span := c.Bucket * time.Duration(len(c.Buckets))
	half := span / 2
	return []ChartTickVM{
		{Pos: svgNum(chartLeft), Label: "−" + spanText(span), Align: "start"},
		{Pos: svgNum(chartLeft + chartPlotW/2), Label: "−" + spanText(half), Align: "middle"},
		{Pos: svgNum(chartLeft + chartPlotW), Label: "now", Align: "end"},
	}
}

// spanText is "60 min" below two hours, else "12 h".
func spanText(d time.Duration) string {
	if d < 2*time.Hour {
		return strconv.Itoa(int(d/time.Minute)) + " min"
	}
	return strconv.Itoa(int(d/time.Hour)) + " h"
}

// svgNum formats a coordinate with at most one decimal.
func svgNum(f float64) string {
	s := strconv.FormatFloat(f, 'f', 1, 64)
	return strings.TrimSuffix(s, ".0")
}

// Chart constants for the template.
func chartViewBox() string {
	return "0 0 " + strconv.Itoa(chartWidth) + " " + strconv.Itoa(chartHeight)
}

func chartAxisY() string   { return strconv.Itoa(chartTop + chartPlotH) }
func chartAxisX0() string  { return strconv.Itoa(chartLeft) }
func chartAxisX1() string  { return strconv.Itoa(chartLeft + chartPlotW) }
func chartLabelY() string  { return strconv.Itoa(chartHeight - 6) }
func chartYLabelX() string { return strconv.Itoa(chartLeft - 6) }

// FailingTargetVM is one row of "Top failing targets": failed dispatches to
// one provider/model on one connection.
type FailingTargetVM struct {
	Provider     string
	Model        string
	ConnectionID string
	Connection   string // name, or the id when the connection is gone
	Failures     int
	LastError    string // "404 not found"
	LastDetail   string // the upstream's message, cut to 120 characters
	Last         *TimeVM
	LogsHref     string // the request log filtered to the last hour, provider and connection
	lastAt       time.Time
	lastSeq      int
}

// Target is "provider/model".
func (f FailingTargetVM) Target() string { return f.Provider + "/" + f.Model }

// attemptFailed reports a dispatch that failed for a reason of the target's:
// not a success, and not the client's doing or a local limit (the outcomes
// the dispatch metrics leave out, 30-routing §8.1).
func attemptFailed(outcome string) bool {
	switch outcome {
	case "success", "client_abort", "caller_error", "local_limit":
		return false
	}
	return true
}

// failure is one failed dispatch, as the request log holds it.
type failure struct {
	provider, model, conn string
	at                    time.Time // when the request arrived
	seq                   int       // the attempt's place in its request
	status                int
	code, reason, detail  string
}

// NewFailingTargetsVM ranks the targets whose dispatches failed since since
// (entries in any order): most failures first, then the most recent failure;
// at most five. A failed request without an attempt log counts once against
// the target that served it; one that reached no target is not counted.
func NewFailingTargetsVM(entries []services.RequestLogEntry, since time.Time, names map[string]string, now time.Time) []FailingTargetVM {
	type key struct{ provider, model, conn string }
	byKey := map[key]*FailingTargetVM{}
	add := func(x failure) {
		k := key{x.provider, x.model, x.conn}
		f := byKey[k]
		if f == nil {
			f = &FailingTargetVM{Provider: x.provider, Model: x.model, ConnectionID: x.conn}
			byKey[k] = f
		}
		f.Failures++
		if f.Failures > 1 && (x.at.Before(f.lastAt) || x.at.Equal(f.lastAt) && x.seq < f.lastSeq) {
			return // an older failure: the last error stays
		}
		f.lastAt, f.lastSeq = x.at, x.seq
		var head []string
		if x.status != 0 {
			head = append(head, strconv.Itoa(x.status))
		}
		switch {
		case x.reason != "":
			head = append(head, reasonText(x.reason))
		case x.code != "":
			head = append(head, x.code)
		}
		f.LastError = strings.Join(head, " ")
		f.LastDetail, _ = shortText(x.detail)
	}
	for _, e := range entries {
		if e.CreatedAt.Before(since) || e.CreatedAt.After(now) {
			continue
		}
		if len(e.AttemptLog) == 0 {
			if e.Provider != "" && !succeeded(e) && e.Outcome != services.RequestOutcomeAborted {
				add(failure{provider: e.Provider, model: e.Model, conn: e.ConnectionID, at: e.CreatedAt, status: e.Status, code: e.ErrorCode})
			}
			continue
		}
		for _, a := range e.AttemptLog {
			if a.Provider == "" || !attemptFailed(a.Outcome) {
				continue
			}
			add(failure{provider: a.Provider, model: a.Model, conn: a.ConnectionID, at: e.CreatedAt, seq: a.Seq,
				status: a.UpstreamStatus, code: a.ErrorCode, reason: a.Outcome, detail: a.Detail})
		}
	}
	out := make([]FailingTargetVM, 0, len(byKey))
	for _, f := range byKey {
		f.Connection = names[f.ConnectionID]
		if f.Connection == "" {
			f.Connection = f.ConnectionID
		}
		f.Last = NewTimeVM(&f.lastAt, now)
		q := url.Values{"range": {"1h"}, "provider": {f.Provider}}
		if f.ConnectionID != "" {
			q.Set("connectionId", f.ConnectionID)
		}
		f.LogsHref = "/logs?" + q.Encode()
		out = append(out, *f)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		switch {
		case a.Failures != b.Failures:
			return a.Failures > b.Failures
		case !a.lastAt.Equal(b.lastAt):
			return a.lastAt.After(b.lastAt)
		}
		return a.Target()+"\x00"+a.ConnectionID < b.Target()+"\x00"+b.ConnectionID
	})
	if len(out) > maxFailTable {
		out = out[:maxFailTable]
	}
	return out
}
