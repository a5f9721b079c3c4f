package views

import (
	"net/url"
	"strconv"
	"strings"
	"time"

	"switchyard/services/human"
	"switchyard/services/stats"
)

// Overview traffic chart, top failing targets and estimated cost
// (50-dashboard §6.3), all read from the in-memory traffic buckets.

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

// NewTrafficChartVM draws the summary's minutes into buckets of the window
// that ends at now: one per minute over an hour, one per quarter hour over
// a day. Client aborts are counted apart, not drawn.
func NewTrafficChartVM(s stats.Summary, w OverviewWindow, now time.Time) TrafficChartVM {
	b := chartBucket(w.Span)
	end := now.Truncate(b).Add(b) // the bucket holding now is the last
	n := int(w.Span / b)
	start := end.Add(-time.Duration(n) * b)
	vm := TrafficChartVM{Bucket: b, Buckets: make([]ChartBucketVM, n), WindowLbl: strings.ToLower(w.Label)}
	for i := range vm.Buckets {
		vm.Buckets[i].Start = start.Add(time.Duration(i) * b)
	}
	for _, p := range s.PerMinute {
		if p.T.Before(start) || !p.T.Before(end) {
			continue
		}
		i := int(p.T.Sub(start) / b)
		vm.Buckets[i].OK += p.OK
		vm.Buckets[i].Fail += p.Failed
		vm.Successes += p.OK
		vm.Failures += p.Failed
		vm.Aborted += p.Aborted
	}
	for _, bk := range vm.Buckets {
		vm.Max = max(vm.Max, bk.OK+bk.Fail)
	}
	return vm
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
	s := human.Plural(total, "request", "requests") + " in the " + c.WindowLbl + ": " +
		human.Thousands(int64(c.Successes)) + " succeeded, " + human.Thousands(int64(c.Failures)) + " failed."
	if total > 0 {
		busiest := c.Buckets[0]
		for _, b := range c.Buckets {
			if b.OK+b.Fail > busiest.OK+busiest.Fail {
				busiest = b
			}
		}
		s += " Busiest " + c.Unit() + ": " + c.BucketLabel(busiest) + " with " + human.Thousands(int64(busiest.OK+busiest.Fail)) + "."
	}
	if c.Aborted > 0 {
		s += " " + human.Plural(c.Aborted, "client abort is", "client aborts are") + " not shown."
	}
	return s
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
		{Pos: svgNum(chartLeft), Label: "−" + human.Duration(span, human.Length), Align: "start"},
		{Pos: svgNum(chartLeft + chartPlotW/2), Label: "−" + human.Duration(half, human.Length), Align: "middle"},
		{Pos: svgNum(chartLeft + chartPlotW), Label: "now", Align: "end"},
	}
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
}

// Target is "provider/model".
func (f FailingTargetVM) Target() string { return f.Provider + "/" + f.Model }

// NewFailingTargetsVM words the summary's failing targets (most failures
// first, at most five); names maps connection ids to names.
func NewFailingTargetsVM(list []stats.FailingTarget, names map[string]string, now time.Time) []FailingTargetVM {
	out := make([]FailingTargetVM, 0, min(len(list), maxFailTable))
	for _, t := range list {
		if len(out) == maxFailTable {
			break
		}
		f := FailingTargetVM{Provider: t.Provider, Model: t.Model, ConnectionID: t.ConnectionID, Failures: t.Failures}
		var head []string
		if t.Last.Status != 0 {
			head = append(head, strconv.Itoa(t.Last.Status))
		}
		switch {
		case t.Last.Reason != "":
			head = append(head, reasonText(t.Last.Reason))
		case t.Last.Code != "":
			head = append(head, t.Last.Code)
		}
		f.LastError = strings.Join(head, " ")
		f.LastDetail, _ = shortText(t.Last.Detail)
		f.Connection = names[t.ConnectionID]
		if f.Connection == "" {
			f.Connection = t.ConnectionID
		}
		at := t.Last.At
		f.Last = NewTimeVM(&at, now)
		q := url.Values{"range": {"1h"}, "provider": {f.Provider}}
		if f.ConnectionID != "" {
			q.Set("connectionId", f.ConnectionID)
		}
		f.LogsHref = "/logs?" + q.Encode()
		out = append(out, f)
	}
	return out
}

// CostVM is "Estimated cost" of the Overview: the window's total and the
// most expensive keys, connections and models, always marked as an
// estimate from the price table.
type CostVM struct {
	Total    string // "$0.0123", or "—" when no request had a price
	Priced   bool
	Unpriced int // requests with tokens but no price
	ByKey    []CostRowVM
	ByConn   []CostRowVM
	ByModel  []CostRowVM
}

// CostRowVM is one key, connection or model.
type CostRowVM struct {
	Label    string
	Sub      string // the key's prefix, the connection's provider
	Requests string
	Tokens   string // "1,200 / 310"
	Cost     string
	Unpriced int
}

// maxCostRows is how many rows each cost table shows.
const maxCostRows = 5

// NewCostVM reads the cost tables from a summary; names maps connection ids to names.
func NewCostVM(s stats.Summary, names map[string]string) CostVM {
	vm := CostVM{Total: CostText(s.Cost), Priced: s.Cost.Known, Unpriced: s.Unpriced}
	rows := func(us []stats.Usage, label func(stats.Usage) (string, string)) []CostRowVM {
		var out []CostRowVM
		for _, u := range us {
			if len(out) == maxCostRows {
				break
			}
			l, sub := label(u)
			out = append(out, CostRowVM{Label: l, Sub: sub, Requests: human.Thousands(int64(u.Requests)),
				Tokens: human.Thousands(u.TokensIn) + " / " + human.Thousands(u.TokensOut), Cost: CostText(u.Cost), Unpriced: u.Unpriced})
		}
		return out
	}
	vm.ByKey = rows(s.ByKey, func(u stats.Usage) (string, string) {
		if u.Name == "" {
			return u.ID, ""
		}
		return u.Name, u.Prefix + "…"
	})
	vm.ByConn = rows(s.ByConnection, func(u stats.Usage) (string, string) {
		n := names[u.ID]
		if n == "" {
			n = u.ID
		}
		return n, u.Provider
	})
	vm.ByModel = rows(s.ByModel, func(u stats.Usage) (string, string) { return u.ID, "" })
	return vm
}

// Empty reports a window without requests.
func (c CostVM) Empty() bool { return len(c.ByKey)+len(c.ByConn)+len(c.ByModel) == 0 }

// costTileValue is the tile's figure: "≈ $0.0123", or "—" without a price.
func costTileValue(c CostVM) string {
	if !c.Priced {
		return "—"
	}
	return "≈ " + c.Total
}
