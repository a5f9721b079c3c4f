package fakeupstream

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// maxBody bounds request bodies; the fake reads them whole before answering (which is also what
// lets net/http notice a client that goes away, see exchange.wait).
const maxBody = 32 << 20

type route int

const (
	routeUnknown route = iota
	routeChat
	routeMessages
	routeEmbeddings
	routeModels
	routeCountTokens
)

func routeOf(path string) (route, string) {
	switch path {
	case "/v1/chat/completions":
		return routeChat, http.MethodPost
	case "/v1/messages":
		return routeMessages, http.MethodPost
	case "/v1/messages/count_tokens":
		return routeCountTokens, http.MethodPost
	case "/v1/embeddings":
		return routeEmbeddings, http.MethodPost
	case "/v1/models":
		return routeModels, http.MethodGet
	}
	return routeUnknown, ""
}

// ServeHTTP serves the provider routes under /v1 and the control routes under /_fake/.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.URL.Path, "/_fake/") {
		s.serveControl(w, r)
		return
	}
	if !s.enter() {
		http.Error(w, "fake upstream closed", http.StatusServiceUnavailable)
		return
	}
	defer s.inflight.Done()
	s.serveAPI(w, r)
}

// serveControl answers the test-facing routes. They are never recorded in the hit log, so a test
// driving the fake over HTTP does not disturb the counts it asserts.
func (s *Server) serveControl(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.URL.Path == "/_fake/healthz" && r.Method == http.MethodGet:
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		io.WriteString(w, "ok\n")
	case r.URL.Path == "/_fake/hits" && r.Method == http.MethodGet:
		w.Header().Set("Content-Type", "application/x-ndjson")
		s.WriteHitLog(w)
	case r.URL.Path == "/_fake/script" && r.Method == http.MethodPost:
		sf, err := ParseScriptFile(io.LimitReader(r.Body, maxBody))
		if err == nil {
			if r.URL.Query().Get("replace") == "1" {
				s.ClearScripts()
			}
			err = s.Apply(sf)
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	case r.URL.Path == "/_fake/reset" && r.Method == http.MethodPost:
		s.Reset()
		w.WriteHeader(http.StatusNoContent)
	default:
		http.Error(w, "unknown control route", http.StatusNotFound)
	}
}

// credentialOf takes the key from Authorization: Bearer or x-api-key (Bearer first, as OpenAI
// clients send it).
func credentialOf(r *http.Request) string {
	if auth := r.Header.Get("Authorization"); auth != "" {
		if k, ok := strings.CutPrefix(auth, "Bearer "); ok {
			return strings.TrimSpace(k)
		}
	}
	return strings.TrimSpace(r.Header.Get("X-Api-Key"))
}

func (s *Server) serveAPI(w http.ResponseWriter, r *http.Request) {
	start := s.now()
	in := inspect(r)
	rec, d := s.record(in, r, start)
	x := &exchange{s: s, w: w, rc: http.NewResponseController(w), r: r, ctx: r.Context(), rec: rec,
		route: in.rt, format: in.format, req: in.req, cred: in.cred, seq: d.seq, models: d.models, step: d.step, rng: d.rng}
	defer x.finish()
	switch {
	case in.readErr != nil:
		x.end = EndClientCancelled
	case d.final == "unknown_route":
		x.writeError(errorSpec{status: http.StatusNotFound, format: in.format, typ: "invalid_request_error", anthropicType: "not_found_error",
			message: fmt.Sprintf("Unknown request URL: %s %s (fake upstream)", r.Method, r.URL.Path)})
	case d.final == "wrong_method":
		x.w.Header().Set("Allow", in.method)
		x.writeError(errorSpec{status: http.StatusMethodNotAllowed, format: in.format, typ: "invalid_request_error",
			message: fmt.Sprintf("Method %s not allowed on %s (fake upstream)", r.Method, r.URL.Path)})
	case d.final == "invalid_json":
		x.writeError(errorSpec{status: http.StatusBadRequest, format: in.format, typ: "invalid_request_error",
			message: "We could not parse the JSON body of your request: " + in.parseErr.Error()})
	default:
		x.run()
	}
}

// inbound is what a request shows before any script is consulted: its
// route and format, the credential, the parsed body and every protocol
// violation a real provider would object to.
type inbound struct {
	rt         route
	method     string // the route's method
	format     string
	body       []byte
	readErr    error
	cred       string
	violations []string
	req        request
	parseErr   error
	action     string // set when the request cannot reach a script
	nonce      string
	headers    []string // header names, sorted
}

// inspect reads and checks a request.
func inspect(r *http.Request) *inbound {
	in := &inbound{format: FormatOpenAI}
	in.rt, in.method = routeOf(r.URL.Path)
	if in.rt == routeMessages || in.rt == routeCountTokens {
		in.format = FormatAnthropic
	}
	in.body, in.readErr = io.ReadAll(io.LimitReader(r.Body, maxBody))
	in.cred = credentialOf(r)
	if in.cred == "" {
		in.violations = append(in.violations, "missing_credential")
	}
	if in.rt == routeMessages || in.rt == routeCountTokens {
		if r.Header.Get("X-Api-Key") == "" {
			in.violations = append(in.violations, "anthropic_missing_x_api_key")
		}
		if r.Header.Get("Anthropic-Version") == "" {
			in.violations = append(in.violations, "anthropic_missing_version")
		}
	}
	if in.rt == routeModels && r.Header.Get("Anthropic-Version") != "" {
		in.format = FormatAnthropic
	}
	switch {
	case in.readErr != nil:
		in.action = "body_read_error"
	case in.rt == routeUnknown:
		in.action = "unknown_route"
		in.violations = append(in.violations, "unknown_route")
	case r.Method != in.method:
		in.action = "wrong_method"
		in.violations = append(in.violations, "wrong_method")
	case in.method == http.MethodPost:
		if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
			in.violations = append(in.violations, "content_type_not_json")
		}
		if in.req, in.parseErr = parseRequest(in.body); in.parseErr != nil {
			in.action = "invalid_json"
			in.violations = append(in.violations, "invalid_json")
		} else if in.req.model == "" {
			in.violations = append(in.violations, "missing_model")
		}
	}
	if m := nonceRE.FindStringSubmatch(in.req.lastUser); m != nil {
		in.nonce = strings.ToLower(m[1])
	}
	in.headers = make([]string, 0, len(r.Header))
	for name := range r.Header {
		in.headers = append(in.headers, name)
	}
	slices.Sort(in.headers)
	return in
}

// recorded is the decision record gives the exchange.
type recorded struct {
	decision
	seq    int64
	final  string   // the hit's action: inspect's, else the decision's
	models []string // the model list a /models request answers with
}

// record numbers the request, decides its answer from the scripts (unless
// inspect already settled it) and logs the hit, all under one lock.
func (s *Server) record(in *inbound, r *http.Request, start time.Time) (*hitRec, recorded) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	seq := s.seq
	attempt := 0
	if in.nonce != "" {
		s.nonces[in.nonce]++
		attempt = s.nonces[in.nonce]
	}
	label := s.labelLocked(in.cred)
	d := recorded{seq: seq, final: in.action}
	if d.final == "" {
		d.decision = s.resolveLocked(in.cred, label, in.req.model, in.format, in.nonce, attempt, seq, s.events)
		d.final = d.action
	}
	if in.rt == routeModels {
		d.models = s.modelsLocked(in.cred, label)
	}
	rec := &hitRec{done: make(chan struct{}), hit: Hit{
		Seq: seq, Nonce: in.nonce, Attempt: attempt, Reproducible: in.nonce != "",
		Credential: in.cred, KeyLabel: label, Method: r.Method, Path: r.URL.Path, Format: in.format,
		Model: in.req.model, Stream: in.req.stream, TStart: start, Action: d.final, Body: in.body,
		Usage:   usageOf(in.rt, in.req),
		Headers: in.headers, Violations: in.violations,
		Tools: in.req.tools, ToolResult: in.req.toolResult, HasToolResult: in.req.hasResult,
	}}
	s.recordLocked(rec)
	return rec, d
}

// exchange is one request being answered.
type exchange struct {
	s      *Server
	w      http.ResponseWriter
	rc     *http.ResponseController
	r      *http.Request
	ctx    context.Context
	rec    *hitRec
	route  route
	format string
	req    request
	cred   string
	seq    int64
	models []string
	step   Step
	rng    *rand.Rand

	end       End
	hijacked  bool
	usageSent bool
}

// finish stamps the end of the hit and releases WaitEnded.
func (x *exchange) finish() {
	end := x.end
	if end == "" {
		end = EndCompleted
	}
	x.s.update(x.rec, func(h *Hit) {
		h.End = end
		h.TEnd = x.s.now()
		h.Usage.Sent = x.usageSent
		if x.route == routeChat || x.route == routeMessages {
			h.Usage.OutputTokens = h.EventsSent
		}
	})
	close(x.rec.done)
}

// wait pauses for d, or until the client leaves or the server closes. It relies on net/http
// cancelling the request context when the connection drops, which it notices only once the body
// has been read — hence serveAPI reads it whole first. Returns false (with the end recorded) when
// the exchange must stop.
func (x *exchange) wait(d time.Duration) bool {
	var timer <-chan time.Time
	if d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		timer = t.C
	} else if d == 0 {
		timer = closedTime
	} // d < 0: forever
	select {
	case <-timer:
		// Prefer reporting a departed client over carrying on.
		select {
		case <-x.ctx.Done():
			x.end = EndClientCancelled
			return false
		default:
			return true
		}
	case <-x.ctx.Done():
		x.end = EndClientCancelled
	case <-x.s.closing:
		x.end = EndServerClosed
	}
	return false
}

var closedTime = func() <-chan time.Time {
	c := make(chan time.Time)
	close(c)
	return c
}()

// commit sends the status line and headers and flushes them, then honours FirstByteDelay.
// The hit is updated before each flush, so a client never sees bytes the hit log does not show
// yet: a test that has read k events can rely on EventsSent ≥ k.
func (x *exchange) commit(status int) bool {
	x.w.WriteHeader(status)
	x.s.update(x.rec, func(h *Hit) {
		h.Status = status
		h.THeaders = x.s.now()
	})
	if err := x.rc.Flush(); err != nil {
		x.end = EndClientCancelled
		return false
	}
	return x.wait(x.step.FirstByteDelay)
}

// write sends p, sliced and paced when the step asks, flushing after each slice. A failed write
// means the client is gone. content marks a content event, counted in EventsSent.
func (x *exchange) write(p []byte, content bool) bool {
	size := x.step.WriteSize
	if x.step.BytesPerSec > 0 && size == 0 {
		size = max(1, x.step.BytesPerSec/50)
	}
	if size <= 0 {
		size = len(p)
	}
	for len(p) > 0 {
		n := min(size, len(p))
		written, err := x.w.Write(p[:n])
		last := n == len(p)
		x.s.update(x.rec, func(h *Hit) {
			h.BytesSent += int64(written)
			if content && last && err == nil {
				h.EventsSent++
			}
		})
		if err == nil {
			err = x.rc.Flush()
		}
		if err != nil {
			x.end = EndClientCancelled
			return false
		}
		p = p[n:]
		if x.step.BytesPerSec > 0 && len(p) > 0 {
			if !x.wait(time.Duration(n) * time.Second / time.Duration(x.step.BytesPerSec)) {
				return false
			}
		}
	}
	return true
}

// hijackClose takes the connection from net/http and closes it: with rst, SO_LINGER 0 makes the
// kernel send RST instead of FIN. net/http flushes what the handler wrote before handing over.
func (x *exchange) hijackClose(rst bool) {
	conn, _, err := x.rc.Hijack()
	if err != nil {
		// Not an HTTP/1 connection: the closest thing net/http offers is aborting the response.
		panic(http.ErrAbortHandler)
	}
	x.hijacked = true
	if tcp, ok := conn.(*net.TCPConn); ok && rst {
		tcp.SetLinger(0)
	}
	conn.Close()
}

func (x *exchange) setHeaders(contentType string) {
	h := x.w.Header()
	if contentType != "" {
		h.Set("Content-Type", contentType)
	}
	id := "req_fake_" + strconv.FormatInt(x.seq, 10)
	if x.format == FormatAnthropic {
		h.Set("Request-Id", id)
	} else {
		h.Set("X-Request-Id", id)
	}
	st := x.step
	now := x.s.now()
	if st.RateLimit != nil {
		setRateLimitHeaders(h, *st.RateLimit, x.format, now)
	}
	if st.RetryAfter != "" {
		h.Set("Retry-After", st.RetryAfter)
	}
	if st.RetryAfterDate > 0 {
		h.Set("Retry-After", HTTPDate(now.Add(st.RetryAfterDate)))
	}
	for k, v := range st.Headers {
		h.Set(k, v)
	}
}

// run answers with the scripted step.
func (x *exchange) run() {
	st := x.step
	delay := st.Delay
	if st.DelayMax > st.Delay {
		delay += time.Duration(x.rng.Int64N(int64(st.DelayMax-st.Delay) + 1))
	}
	if st.Delay == 0 && st.DelayMax == 0 {
		delay = x.s.latency
	}
	if !x.wait(delay) {
		return
	}
	if st.Fault == FaultReset {
		x.end = EndReset
		x.hijackClose(true)
		return
	}
	switch {
	case st.Fault == FaultHTML502:
		x.setHeaders("text/html; charset=utf-8")
		status := st.Status
		if status == 0 {
			status = http.StatusBadGateway
		}
		x.writeBody(status, []byte(html502), false)
	case st.Fault == FaultEmpty200:
		x.setHeaders("")
		x.w.Header().Set("Content-Length", "0")
		x.commit(orInt(st.Status, http.StatusOK))
	case st.Body != "":
		x.setHeaders("application/json")
		x.writeBody(orInt(st.Status, http.StatusOK), []byte(st.Body), false)
	default:
		if e, ok := errorFor(st, x.format, x.cred, x.req.model); ok {
			x.writeError(e)
			return
		}
		x.success(orInt(st.Status, http.StatusOK))
	}
}

func orInt(v, def int) int {
	if v == 0 {
		return def
	}
	return v
}

const html502 = "<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n<center><h1>502 Bad Gateway</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n"

func (x *exchange) writeError(e errorSpec) {
	x.setHeaders("application/json")
	if x.format == FormatAnthropic || e.format == FormatAnthropic {
		x.w.Header().Set("X-Should-Retry", strconv.FormatBool(e.status == 429 || e.status >= 500))
	}
	x.writeBody(e.status, e.body(), false)
}

// success writes the route's healthy answer.
func (x *exchange) success(status int) {
	st := x.step
	switch x.route {
	case routeModels:
		x.setHeaders("application/json")
		x.writeBody(status, x.modelsBody(), true)
		return
	case routeEmbeddings:
		x.setHeaders("application/json")
		if x.writeBody(status, x.embeddingsBody(), true) {
			x.usageSent = true
		}
		return
	case routeCountTokens:
		x.setHeaders("application/json")
		x.writeBody(status, mustJSON(map[string]int{"input_tokens": Tokens(x.req.text)}), true)
		return
	}
	events := orInt(st.Events, x.s.events)
	content := st.Content
	if content == "" {
		content = x.s.content
	}
	chunks := SplitContent(content, events)
	var tool *toolAnswer
	if st.ToolCall != nil && !x.req.hasResult {
		tool = x.toolAnswer(*st.ToolCall)
		chunks = SplitContent(tool.args, min(2, len([]rune(tool.args))))
	}
	usage := Usage{InputTokens: Tokens(x.req.text), OutputTokens: len(chunks)}
	stream := x.req.stream
	switch st.Stream {
	case StreamJSON:
		stream = false
	case StreamSSE:
		stream = true
	}
	created := x.s.now().Unix()
	if !stream {
		x.setHeaders("application/json")
		var body []byte
		text := strings.Join(chunks, "")
		if x.route == routeMessages {
			stop := cmpStr(st.FinishReason, "end_turn")
			var block any = anthropicBlock{Type: "text", Text: text}
			if tool != nil {
				stop, block = "tool_use", anthropicToolUse{Type: "tool_use", ID: tool.id, Name: tool.name, Input: json.RawMessage(tool.args)}
			}
			body = mustJSON(anthropicMessage{ID: "msg_fake_" + strconv.FormatInt(x.seq, 10), Type: "message", Role: "assistant",
				Model: x.req.model, Content: []any{block}, StopReason: &stop,
				Usage: anthropicUsage{InputTokens: usage.InputTokens, OutputTokens: usage.OutputTokens}})
		} else {
			msg, finish := openAIMessage{Role: "assistant", Content: &text}, cmpStr(st.FinishReason, "stop")
			if tool != nil {
				tc := openAIToolCall{ID: tool.id, Type: "function"}
				tc.Function.Name, tc.Function.Arguments = tool.name, tool.args
				msg, finish = openAIMessage{Role: "assistant", ToolCalls: []openAIToolCall{tc}}, "tool_calls"
			}
			body = mustJSON(openAICompletion{ID: "chatcmpl-fake-" + strconv.FormatInt(x.seq, 10), Object: "chat.completion",
				Created: created, Model: x.req.model, SystemFingerprint: "fp_fake",
				Choices: []openAIChoice{{Message: msg,
					Logprobs: json.RawMessage("null"), FinishReason: finish}},
				Usage: openAIUsageWithout{PromptTokens: usage.InputTokens, CompletionTokens: usage.OutputTokens,
					TotalTokens: usage.InputTokens + usage.OutputTokens}})
		}
		if x.writeBody(status, body, true) {
			x.usageSent = true
			x.s.update(x.rec, func(h *Hit) { h.EventsSent = len(chunks) })
		}
		return
	}
	p := streamParams{model: x.req.model, created: created, chunks: chunks, usage: usage,
		includeUsage: x.req.includeUsage, finishReason: st.FinishReason, errType: st.ErrorType, eMsg: st.ErrorMessage, tool: tool}
	if tool != nil {
		p.finishReason = "tool_calls"
		if x.route == routeMessages {
			p.finishReason = "tool_use"
		}
	}
	var plan streamPlan
	if x.route == routeMessages {
		p.id = "msg_fake_" + strconv.FormatInt(x.seq, 10)
		plan = anthropicStream(p)
	} else {
		p.id = "chatcmpl-fake-" + strconv.FormatInt(x.seq, 10)
		plan = openAIStream(p)
	}
	x.setHeaders("text/event-stream; charset=utf-8")
	x.w.Header().Set("Cache-Control", "no-cache")
	x.stream(status, plan)
}

// toolAnswer resolves a scripted tool call against the request: the first
// of Names the request offers, its arguments and an id.
func (x *exchange) toolAnswer(tc ToolCall) *toolAnswer {
	name := tc.Name
	for _, n := range tc.Names {
		if slices.Contains(x.req.tools, n) {
			name = n
			break
		}
	}
	args := cmpStr(tc.Arguments, "{}")
	if a, ok := tc.ArgumentsFor[name]; ok {
		args = a
	}
	id := tc.ID
	if id == "" {
		id = "call_fake_" + strconv.FormatInt(x.seq, 10)
		if x.route == routeMessages {
			id = "toolu_fake_" + strconv.FormatInt(x.seq, 10)
		}
	}
	return &toolAnswer{id: id, name: name, args: args}
}

func cmpStr(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

// stream writes an SSE answer, injecting the step's fault after At content events.
func (x *exchange) stream(status int, plan streamPlan) {
	st := x.step
	if !x.commit(status) {
		return
	}
	for _, ev := range plan.preamble {
		if !x.write(ev.bytes(), false) {
			return
		}
	}
	faultAt := -1
	switch st.Fault {
	case FaultStall, FaultCut, FaultMalformed, FaultErrorEvent:
		faultAt = min(st.At, len(plan.content))
	}
	gap := st.EventGap
	if gap == 0 {
		gap = x.s.eventGap
	}
	for i := 0; i <= len(plan.content); i++ {
		if i == faultAt {
			x.streamFault(plan, i)
			return
		}
		if i == len(plan.content) {
			break
		}
		if i > 0 && !x.wait(gap) {
			return
		}
		if !x.write(plan.content[i].bytes(), true) {
			return
		}
	}
	x.usageSent = x.route == routeMessages || x.req.includeUsage
	for _, ev := range plan.trailer {
		if !x.write(ev.bytes(), false) {
			x.usageSent = false
			return
		}
	}
	x.end = EndCompleted
}

// streamFault ends a stream the way the step's fault says; i content events have been sent.
func (x *exchange) streamFault(plan streamPlan, i int) {
	st := x.step
	switch st.Fault {
	case FaultStall:
		d := st.StallFor
		if d == 0 {
			d = -1 // until the client leaves or the server closes
		}
		if x.wait(d) {
			x.end = EndStallReleased
		}
	case FaultCut:
		x.end = EndCut
		switch st.CutMode {
		case CutFIN:
			x.hijackClose(false)
		case CutRST:
			x.hijackClose(true)
		}
	case FaultMalformed:
		bad := plan.errorEvent
		if i < len(plan.content) {
			bad = plan.content[i]
		} else if len(plan.trailer) > 0 {
			bad = plan.trailer[0]
		}
		if x.write(bad.truncated().bytes(), false) {
			x.end = EndMalformedSent
		}
	case FaultErrorEvent:
		if x.write(plan.errorEvent.bytes(), false) {
			x.end = EndErrorEventSent
		}
	}
}

// writeBody writes a whole (non-SSE) body. Stream-shaped faults still apply when faultable:
// a cut sends half the body, a malformed body is truncated JSON with a matching Content-Length,
// a stall withholds the body, an error event replaces it with an error object under 200.
func (x *exchange) writeBody(status int, body []byte, faultable bool) bool {
	st := x.step
	fault := FaultNone
	if faultable {
		fault = st.Fault
	}
	switch fault {
	case FaultErrorEvent:
		e := errorSpec{status: status, format: x.format, typ: cmpStr(st.ErrorType, "server_error"),
			anthropicType: cmpStr(st.ErrorType, "overloaded_error"), message: cmpStr(st.ErrorMessage, "Overloaded")}
		body = e.body()
	case FaultMalformed:
		body = body[:len(body)/2]
	case FaultCut:
		if !x.commit(status) {
			return false
		}
		if !x.write(body[:len(body)/2], false) {
			return false
		}
		x.end = EndCut
		switch st.CutMode {
		case CutFIN:
			x.hijackClose(false)
		case CutRST:
			x.hijackClose(true)
		}
		return false
	case FaultStall:
		if !x.commit(status) {
			return false
		}
		d := st.StallFor
		if d == 0 {
			d = -1
		}
		if x.wait(d) {
			x.end = EndStallReleased
		}
		return false
	}
	x.w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	if !x.commit(status) || !x.write(body, false) {
		return false
	}
	switch fault {
	case FaultErrorEvent:
		x.end = EndErrorEventSent
		return false
	case FaultMalformed:
		x.end = EndMalformedSent
		return false
	}
	x.end = EndCompleted
	return true
}

func (x *exchange) modelsBody() []byte {
	created := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	if x.format == FormatAnthropic {
		list := anthropicModelList{Data: []anthropicModel{}}
		for _, m := range x.models {
			list.Data = append(list.Data, anthropicModel{Type: "model", ID: m, DisplayName: m, CreatedAt: created.Format(time.RFC3339)})
		}
		if n := len(list.Data); n > 0 {
			list.FirstID, list.LastID = &list.Data[0].ID, &list.Data[n-1].ID
		}
		return mustJSON(list)
	}
	list := openAIModelList{Object: "list", Data: []openAIModel{}}
	for _, m := range x.models {
		list.Data = append(list.Data, openAIModel{ID: m, Object: "model", Created: created.Unix(), OwnedBy: "fakeupstream"})
	}
	return mustJSON(list)
}

func (x *exchange) embeddingsBody() []byte {
	out := openAIEmbeddings{Object: "list", Data: []openAIEmbedding{}, Model: x.req.model}
	tokens := 0
	for i, in := range x.req.inputs {
		v := Embedding(in, x.req.dims)
		var emb any = v
		if x.req.base64 {
			emb = embeddingBase64(v)
		}
		out.Data = append(out.Data, openAIEmbedding{Object: "embedding", Index: i, Embedding: emb})
		tokens += Tokens(in)
	}
	out.Usage = openAIUsage{PromptTokens: tokens, TotalTokens: tokens}
	x.s.update(x.rec, func(h *Hit) { h.Usage.InputTokens = tokens })
	return mustJSON(out)
}

// usageOf is the input side of a hit's usage; only chat routes have a prompt to count
// (embeddings count their inputs when answering).
func usageOf(rt route, req request) Usage {
	if rt == routeChat || rt == routeMessages {
		return Usage{InputTokens: Tokens(req.text)}
	}
	return Usage{}
}
