package views

import (
	"net/url"
	"strconv"
	"strings"
	"time"

	"switchyard/services"
	"switchyard/services/human"
)

// ---------------------------------------------------------------------------
// Request logs (50-dashboard §6.7).

// LogsPageVM is the Request logs page; Detail is the open drawer, if any.
type LogsPageVM struct {
	Filters LogFiltersVM
	List    LogsListVM
	Detail  *LogDetailVM
}

// OptionVM is one <option>.
type OptionVM struct {
	Value string
	Label string
}

// LogRanges are the time range choices; "" is any time, "custom" uses Since and Until.
var LogRanges = []OptionVM{
	{"", "Any time"}, {"15m", "Last 15 minutes"}, {"1h", "Last hour"}, {"6h", "Last 6 hours"},
	{"24h", "Last 24 hours"}, {"7d", "Last 7 days"}, {"custom", "Custom (from / to)"},
}

// LogRangeDuration is the length of a range choice (0 for any time and custom).
func LogRangeDuration(r string) time.Duration {
	switch r {
	case "15m":
		return 15 * time.Minute
	case "1h":
		return time.Hour
	case "6h":
		return 6 * time.Hour
	case "24h":
		return 24 * time.Hour
	case "7d":
		return 7 * 24 * time.Hour
	}
	return 0
}

// logOutcomeLabels word the outcome filter's choices.
var logOutcomeLabels = map[string]string{
	services.RequestOutcomeSuccess:           "Success",
	services.RequestOutcomeClientError:       "Client error",
	services.RequestOutcomeUpstreamError:     "Upstream error",
	services.RequestOutcomeFailover:          "Failover happened",
	services.RequestOutcomeEmergencyFallback: "Emergency fallback",
	services.RequestOutcomeAborted:           "Client aborted",
}

// LogOutcomes are the outcome choices in the order of the service.
func LogOutcomes() []OptionVM {
	out := []OptionVM{{"", "All outcomes"}}
	for _, o := range services.RequestOutcomes {
		l := logOutcomeLabels[o]
		if l == "" {
			l = o
		}
		out = append(out, OptionVM{o, l})
	}
	return out
}

// LogFiltersVM is the filter form, values as typed.
type LogFiltersVM struct {
	Range, Since, Until, Outcome, Model, Provider, Connection, Key, Stream, RequestID string
	// Tail is the live tail switch (it belongs to the form, so the address keeps it).
	Tail      bool
	Keys      []OptionVM
	Conns     []OptionVM
	Providers []string
	Errors    FieldErrors
}

// Query is the filters and the live tail switch as URL parameters (blank
// ones left out).
func (f LogFiltersVM) Query() url.Values {
	q := f.filterQuery()
	if f.Tail {
		q.Set(LogTailParam, "on")
	}
	return q
}

// LogTailParam is the live tail switch's parameter ("on" when switched on).
const LogTailParam = "tail"

// filterQuery is the filters as URL parameters, without the live tail switch.
func (f LogFiltersVM) filterQuery() url.Values {
	q := url.Values{}
	set := func(k, v string) {
		if v = strings.TrimSpace(v); v != "" {
			q.Set(k, v)
		}
	}
	set("range", f.Range)
	if f.Range == "custom" || f.Range == "" {
		set("since", f.Since)
		set("until", f.Until)
	}
	set("outcome", f.Outcome)
	set("model", f.Model)
	set("provider", f.Provider)
	set("connectionId", f.Connection)
	set("keyId", f.Key)
	set("stream", f.Stream)
	set("requestId", f.RequestID)
	return q
}

// Active reports whether any filter is set (the live tail switch is none).
func (f LogFiltersVM) Active() bool { return len(f.filterQuery()) > 0 }

// TailRowsURL is the live tail's poll of the entries newer than after (a
// cursor; "" when the list was empty) matching the filters.
func (f LogFiltersVM) TailRowsURL(after string) string {
	q := f.filterQuery()
	if after != "" {
		q.Set("after", after)
	}
	if len(q) == 0 {
		return LogRowsPath
	}
	return LogRowsPath + "?" + q.Encode()
}

// LogRowsPath answers the live tail's poll.
const LogRowsPath = "/logs/rows"

// LogTailTrigger is when the live tail polls: every 5 s (50-dashboard
// §3.5), when the tab shows again, and when a detail drawer, which pauses
// it, closes.
const LogTailTrigger = "every 5s, refresh, " + EventDrawerClosed + " from:document"

// Custom reports whether the from/to fields apply.
func (f LogFiltersVM) Custom() bool {
	return f.Range == "custom" || f.Range == "" && (f.Since != "" || f.Until != "")
}

// LogsListVM is the table region: rows, pagination and empty states.
type LogsListVM struct {
	Rows []LogRowVM
	// OlderURL continues the list; NewestURL returns to the first page.
	OlderURL  string
	NewestURL string
	Filtered  bool
	Errors    FieldErrors // a bad filter (422)
	// Tail is the live tail switch, shown on the first page only; TailURL,
	// set while it is on there, is its poll (LogFiltersVM.TailRowsURL).
	Tail    bool
	TailURL string
}

// FirstPage reports the list's first page (no cursor), the one the live
// tail switch is shown on (also above a filter error, so it keeps its state).
func (vm LogsListVM) FirstPage() bool { return vm.NewestURL == "" }

// LogTailVM is the answer of one live tail poll: the entries that arrived,
// newest first, and the poll with the new cursor. Gap: more arrived than
// one poll shows (a page, 50); the older of them are left out and ListURL
// (the list with these filters) shows them all.
type LogTailVM struct {
	Rows    []LogRowVM
	PollURL string
	Gap     bool
	ListURL string
}

// LogRowVM is one request in the list.
type LogRowVM struct {
	ID        string
	ShortID   string
	Time      *TimeVM
	KeyName   string
	KeyPrefix string
	Requested string
	Combo     string
	Served    string // provider/model, "" when nothing served
	Conn      string // connection name (or id)
	Status    int
	ErrorCode string
	Attempts  int
	Stream    bool
	Latency   string
	TTFT      string
	TokensIn  string
	TokensOut string
	// Fallback: the emergency fallback was tried; FallbackFailed: and it
	// did not serve either.
	Fallback       bool
	FallbackFailed bool
	// Cost is the estimated cost ("—" when no price is known).
	Cost string
}

// StatusClass picks the badge colour of the status (the number is the text).
func (r LogRowVM) StatusClass() string {
	switch {
	case r.Status >= 200 && r.Status < 300:
		return "ok"
	case r.Status == 499:
		return "neutral"
	case r.Status >= 500:
		return "error"
	}
	return "warning"
}

// StatusIcon pairs the status with an icon (never colour alone).
func (r LogRowVM) StatusIcon() string {
	if r.Status >= 200 && r.Status < 300 {
		return "check"
	}
	return "alert"
}

// URL is the row's detail page.
func (r LogRowVM) URL() string { return "/logs/" + url.PathEscape(r.ID) }

// NewLogRowVM describes one entry; conns names connection ids.
func NewLogRowVM(e services.RequestLogEntry, conns map[string]string, now time.Time) LogRowVM {
	at := e.CreatedAt
	r := LogRowVM{ID: e.ID, ShortID: shortID(e.ID), Time: NewTimeVM(&at, now), KeyName: e.APIKeyName, KeyPrefix: e.APIKeyPrefix,
		Requested: e.RequestedModel, Combo: e.ComboName, Status: e.Status, ErrorCode: e.ErrorCode, Attempts: e.Attempts,
		Stream: e.Stream, Latency: human.Duration(millis(e.LatencyMs), human.Latency), TokensIn: human.Thousands(e.PromptTokens), TokensOut: human.Thousands(e.CompletionTokens),
		Fallback: e.EmergencyFallback, FallbackFailed: e.EmergencyFallback && e.Outcome != services.RequestOutcomeEmergencyFallback,
		Cost: CostText(e.EstimatedCost)}
	if e.Provider != "" {
		r.Served = e.Provider + "/" + e.Model
	}
	r.Conn = connName(conns, e.ConnectionID)
	if e.TtftMs != nil {
		r.TTFT = human.Duration(millis(*e.TtftMs), human.Latency)
	}
	return r
}

func connName(conns map[string]string, id string) string {
	if n, ok := conns[id]; ok && n != "" {
		return n
	}
	return id
}

// shortID keeps the end of a request id, where ULIDs differ.
func shortID(id string) string {
	if len(id) <= 12 {
		return id
	}
	return "…" + id[len(id)-10:]
}

// LogDetailVM is the detail drawer of one request.
type LogDetailVM struct {
	Row             LogRowVM
	ClientRequestID string
	Endpoint        string
	Outcome         string
	StreamOutcome   string
	Strategy        string
	ComboPath       string
	UpstreamLatency string
	CachedTokens    string
	ReasoningTokens string
	Warnings        []string
	Attempts        []AttemptVM
	// Timeline is the attempts and waits in time order; TimelineSum says
	// how they add up to the total (TimelineRecorded false: logged before
	// waits and start offsets were recorded).
	Timeline         []TimelineItemVM
	TimelineSum      string
	TimelineRecorded bool
	Bodies           []BodyVM
	// CloseURL is where closing the drawer leads (the list, filters kept).
	CloseURL string
}

// AttemptVM is one entry of the attempt timeline.
type AttemptVM struct {
	Index     int
	Target    string
	Conn      string
	Status    string
	Outcome   string
	Detail    string
	ErrorCode string
	Latency   string
	Hint      string
	Success   bool
	// Offset is the attempt's start after receipt ("+415 ms"), empty when
	// unknown; Effects word what its failure changed ("none" when nothing).
	Offset  string
	Effects []string
}

// WaitVM is one wait of the timeline.
type WaitVM struct {
	Index    int
	Title    string
	Reason   string
	Target   string
	Offset   string
	Duration string
}

// SkipVM is a target the request passed over without dispatching.
type SkipVM struct {
	Index  int
	Target string
	// Conn names the connection whose gate decided it, empty when the
	// whole target was skipped.
	Conn string
	// Cause words the reason ("breaker open", "model locked", …); Detail
	// refines it; RetryIn is the timer left ("17 s"), empty for a hard
	// exclusion.
	Cause   string
	Detail  string
	RetryIn string
	Offset  string
}

// TimelineItemVM is an attempt, a wait or a skipped target.
type TimelineItemVM struct {
	Attempt *AttemptVM
	Wait    *WaitVM
	Skip    *SkipVM
}

// Class is the timeline item's modifier.
func (a AttemptVM) Class() string {
	if a.Success {
		return "timeline__item--success"
	}
	return "timeline__item--failed"
}

// BodyVM is one captured body.
type BodyVM struct {
	Label     string
	Text      string
	Truncated bool
}

// reasonTexts word the classifications of 20-resilience §1.4.
var reasonTexts = map[string]string{
	"success":           "success",
	"rate_limit":        "rate limit",
	"quota_exhausted":   "quota exhausted",
	"credits_exhausted": "credits exhausted",
	"auth_error":        "authentication error",
	"forbidden":         "forbidden",
	"not_found":         "model not found",
	"model_capacity":    "model at capacity",
	"server_error":      "server error",
	"transient":         "transient error",
	"request_rejected":  "request rejected",
	"caller_error":      "caller error",
	"client_abort":      "client aborted",
	"local_limit":       "local limit",
}

// ReasonText words a classification ("rate_limit" → "rate limit").
func ReasonText(r string) string {
	if t, ok := reasonTexts[r]; ok {
		return t
	}
	return strings.ReplaceAll(r, "_", " ")
}

// NewLogDetailVM describes one entry with its attempts.
func NewLogDetailVM(e services.RequestLogEntry, conns map[string]string, now time.Time, closeURL string) LogDetailVM {
	d := LogDetailVM{Row: NewLogRowVM(e, conns, now), ClientRequestID: e.ClientRequestID, Endpoint: e.Endpoint,
		Outcome: logOutcomeLabels[e.Outcome], StreamOutcome: e.StreamOutcome, Strategy: e.Strategy, ComboPath: e.ComboPath,
		UpstreamLatency: human.Duration(millis(e.UpstreamLatencyMs), human.Latency), CachedTokens: human.Thousands(e.CachedTokens),
		ReasoningTokens: human.Thousands(e.ReasoningTokens), Warnings: e.Warnings, CloseURL: closeURL}
	if d.Outcome == "" {
		d.Outcome = e.Outcome
	}
	tl := e.Timeline()
	d.TimelineRecorded = tl.Recorded
	d.TimelineSum = timelineSum(tl, len(e.AttemptLog), len(e.Waits))
	waits, skips := 0, 0
	for _, row := range tl.Rows {
		switch row.Kind {
		case services.TimelineAttempt:
			av := newAttemptVM(len(d.Attempts)+1, row.Attempt, conns, e.CreatedAt, tl.Recorded)
			d.Attempts = append(d.Attempts, av)
			d.Timeline = append(d.Timeline, TimelineItemVM{Attempt: &av})
		case services.TimelineWait:
			waits++
			w := row.Wait
			wv := WaitVM{Index: waits, Title: waitTitles[w.Kind], Reason: ReasonText(w.Reason), Target: w.Target,
				Offset: "+" + human.Thousands(w.StartOffsetMs) + " ms", Duration: human.Duration(millis(w.WaitedMs), human.Latency)}
			if wv.Title == "" {
				wv.Title = "Waited"
			}
			if w.Kind == services.WaitKindSlot || w.Kind == services.WaitKindQueue {
				wv.Target = connName(conns, w.Target)
			}
			d.Timeline = append(d.Timeline, TimelineItemVM{Wait: &wv})
		case services.TimelineSkip:
			skips++
			sv := newSkipVM(skips, row.Skip, conns)
			d.Timeline = append(d.Timeline, TimelineItemVM{Skip: &sv})
		}
	}
	if b := e.Bodies; b != nil {
		add := func(label string, c *services.CapturedBody) {
			if c != nil {
				d.Bodies = append(d.Bodies, BodyVM{Label: label, Text: c.Text, Truncated: c.Truncated})
			}
		}
		add("Client request", b.Request)
		add("Upstream request", b.UpstreamRequest)
		add("Response", b.Response)
	}
	return d
}

// skipCauses word why the walk passed a target over (the exclusion
// reasons of diagnostics.excluded and the gates behind "unavailable").
var skipCauses = map[string]string{
	"circuit_open":               "breaker open",
	"provider_cooldown":          "provider held back by the window gate",
	"cooling":                    "connection cooling down",
	"model_lockout":              "model locked",
	"quota_window":               "quota window used up",
	"lease_busy":                 "lease held by another client",
	"disabled":                   "connection disabled",
	"not_allowed":                "connection not allowed for this key",
	"no_connection":              "no connection",
	"incompatible":               "cannot serve this endpoint",
	"tool_limit":                 "too many tools for this model",
	"failed":                     "same model already failed",
	"target_saturated":           "entry saturated, tried last",
	"target_saturated_fail_open": "entry saturated",
	"attempt_cap":                "attempt limit reached",
	"deadline":                   "request deadline reached",
}

func newSkipVM(index int, k *services.SkipRecord, conns map[string]string) SkipVM {
	cause := k.Cause()
	sv := SkipVM{Index: index, Target: k.Target, Cause: skipCauses[cause], Offset: "+" + human.Thousands(k.AtOffsetMs) + " ms"}
	if sv.Cause == "" {
		sv.Cause = strings.ReplaceAll(cause, "_", " ")
	}
	if k.Detail != "" && k.Detail != cause {
		sv.Detail = strings.ReplaceAll(k.Detail, "_", " ")
	}
	if k.ConnectionID != "" {
		sv.Conn = connName(conns, k.ConnectionID)
	}
	if k.RetryAfterMs > 0 {
		sv.RetryIn = human.Duration(millis(k.RetryAfterMs), human.Latency)
	}
	return sv
}

// waitTitles name the kinds of wait.
var waitTitles = map[string]string{
	services.WaitKindSingle:     "Cooldown wait",
	services.WaitKindCombo:      "Cooldown wait (combo)",
	services.WaitKindRetryDelay: "Retry delay",
	services.WaitKindSlot:       "Waited for a connection slot",
	services.WaitKindQueue:      "Waited in the request queue",
}

func newAttemptVM(index int, a *services.AttemptRecord, conns map[string]string, received time.Time, timed bool) AttemptVM {
	av := AttemptVM{Index: index, Target: a.Provider + "/" + a.Model, Conn: connName(conns, a.ConnectionID),
		Outcome: ReasonText(a.Outcome), Detail: strings.ReplaceAll(a.Detail, "_", " "), ErrorCode: a.ErrorCode,
		Latency: human.Duration(millis(a.LatencyMs), human.Latency), Hint: a.RetryHintSource, Success: a.Outcome == "success"}
	if a.UpstreamStatus > 0 {
		av.Status = strconv.Itoa(a.UpstreamStatus)
	} else {
		av.Status = "no response"
	}
	if a.HintMs > 0 && av.Hint != "" {
		av.Hint = human.Duration(millis(a.HintMs), human.Latency) + " from " + av.Hint
	}
	if !timed {
		return av
	}
	av.Offset = "+" + human.Thousands(a.StartOffsetMs) + " ms"
	if av.Success {
		return av
	}
	ended := received.Add(time.Duration(a.StartOffsetMs+a.LatencyMs) * time.Millisecond)
	for _, f := range a.Effects {
		av.Effects = append(av.Effects, effectText(f, ended))
	}
	if len(av.Effects) == 0 {
		av.Effects = []string{"none"}
	}
	return av
}

// effectText words one state change; ended is when the attempt failed.
func effectText(f services.AttemptEffect, ended time.Time) string {
	until := ""
	if f.UntilMs != 0 {
		u := time.UnixMilli(f.UntilMs).UTC()
		until = " until " + u.Format("15:04:05") + " UTC"
		if d := u.Sub(ended); d > 0 {
			until += " (" + human.Duration(d, human.Latency) + ")"
		}
	}
	switch f.Kind {
	case "connection_cooldown":
		return "connection cooled down" + until
	case "model_lockout":
		return "model locked out" + until
	case "terminal":
		return "connection marked " + strings.ReplaceAll(f.TerminalStatus, "_", " ")
	case "breaker_counted":
		return "breaker failure counted"
	case "breaker_opened":
		return "breaker opened"
	case "window_gate":
		return "provider held back by the window gate"
	case "egress_lock":
		return "connections sharing the egress cooled down"
	}
	return strings.ReplaceAll(f.Kind, "_", " ") + until
}

// timelineSum says how the timeline adds up to the request's total.
func timelineSum(tl services.Timeline, attempts, waits int) string {
	if !tl.Recorded {
		return "Total " + human.Thousands(tl.TotalMs) + " ms; this request was logged before waits and start times were recorded."
	}
	return "Total " + human.Thousands(tl.TotalMs) + " ms = " + human.Thousands(tl.AttemptsMs) + " ms in " + human.Plural(attempts, "attempt", "attempts") +
		" + " + human.Thousands(tl.WaitsMs) + " ms in " + human.Plural(waits, "wait", "waits") + " + " + human.Thousands(tl.GapsMs) + " ms in the gateway"
}

// logFocus is the first invalid filter.
func logFocus(f LogFiltersVM) string {
	return firstInvalid([]string{"since", "until", "outcome"}, f.Errors)
}
