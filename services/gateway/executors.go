package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"switchyard/services"
)

// The own executors of 30-routing §10.18 (fusion) and §10.19 (pipeline).
// Each member or step is routed as a request of its own (its entry's
// connection loop, failover and gates, no retry passes), into memory or,
// for the part the client sees, into the client's writer; the client
// request still has one log row, which sums the tokens of every part.
//
// Both speak the client's format for /v1/chat/completions and /v1/messages.
// The Responses API has no place for the inserted system context, so a
// fusion or pipeline combo answers it with 400 unsupported_parameter.

const judgeInstruction = "Candidate answers to the user's last message follow. Write the best final answer, " +
	"keeping what is correct and fixing what is wrong. Do not mention the candidates."

// serveOwnExecutor runs a fusion or pipeline combo.
func (g *Gateway) serveOwnExecutor(w http.ResponseWriter, r *http.Request, req *Request) *LogRecord {
	c := req.Route.Combo
	if req.Inbound != InboundChat && req.Inbound != InboundMessages {
		rec := newLogRecord(req)
		rec.ComboName, rec.Strategy = c.Name, c.Strategy
		out := newClientWriter(w, r, req, g.current())
		g.fail(out, &attemptState{log: rec}, services.NewGatewayError(services.CodeUnsupportedParameter, "The "+c.Strategy+" combo '"+c.Name+"' serves /v1/chat/completions and /v1/messages only.").WithParam("model"))
		rec.finish(g.clock.Now(), out)
		return rec
	}
	w.Header().Set("X-Switchyard-Combo", c.Name)
	if c.Strategy == "pipeline" {
		return g.servePipeline(w, r, req)
	}
	return g.serveFusion(w, r, req)
}

// part is one member or step routed as its own request.
type part struct {
	name   string // "provider/model" or "combo:<name>"
	route  Route
	prompt string
}

// comboParts lists a combo's enabled entries in configured order as
// routable parts; available reports whether each could run now.
func (g *Gateway) comboParts(s *Snapshot, c *services.Combo, req *Request, onlyAvailable bool) []part {
	var out []part
	for _, t := range c.Targets {
		if !t.IsEnabled() {
			continue
		}
		if t.Kind == services.KindCombo {
			inner, ok := s.ComboByID(t.ComboID)
			if !ok || !inner.Enabled || inner.ID == c.ID {
				continue
			}
			out = append(out, part{name: "combo:" + inner.Name, route: Route{Combo: inner, Requested: inner.Name}})
			continue
		}
		p, ok := s.Catalogue.Get(t.Provider)
		if !ok {
			continue
		}
		connID := ""
		if t.ConnectionID != nil {
			connID = *t.ConnectionID
		}
		if onlyAvailable && !g.entryAvailable(s, t.Provider, connID, t.Model, req) {
			continue
		}
		out = append(out, part{name: t.Provider + "/" + t.Model, route: Route{Provider: p, Model: t.Model, Requested: t.Provider + "/" + t.Model},
			prompt: t.Prompt})
	}
	return out
}

// subRequest is req re-routed to one part with another body.
func subRequest(req *Request, p part, body map[string]json.RawMessage, stream bool) *Request {
	sr := *req
	sr.Route = p.route
	sr.Body = body
	sr.Stream = stream
	sr.Warnings = nil
	return &sr
}

// runInMemory routes sr into memory and returns the captured response.
func (g *Gateway) runInMemory(ctx context.Context, r *http.Request, sr *Request) (*memWriter, *LogRecord) {
	mw := newMemWriter()
	rec := g.serve(mw, r.WithContext(ctx), sr)
	return mw, rec
}

// addTokens sums a part's usage into the request's log record.
func addTokens(into, from *LogRecord) {
	if from == nil || into == from {
		return
	}
	into.PromptTokens += from.PromptTokens
	into.CompletionTok += from.CompletionTok
	into.CachedTokens += from.CachedTokens
	into.ReasoningTokens += from.ReasoningTokens
	into.CacheWriteTokens += from.CacheWriteTokens
	into.Attempts += from.Attempts
}

// serveFusion implements 30-routing §10.18.
func (g *Gateway) serveFusion(w http.ResponseWriter, r *http.Request, req *Request) *LogRecord {
	c := req.Route.Combo
	snap := g.reg.Snapshot()
	if usesTools(req) {
		// Tools with a live tool_choice bypass the panel: priority over the same entries.
		pc := *c
		pc.Strategy = "priority"
		pr := *req
		pr.Route.Combo = &pc
		rec := g.serve(w, r, &pr)
		rec.Strategy = c.Strategy
		return rec
	}
	cfg := fusionConfigOf(&c.Config)
	panel := g.comboParts(snap, c, req, true)
	if len(panel) == 0 {
		rec := g.serve(w, r, req) // nothing available: the normal walk names the exclusions
		rec.Strategy = c.Strategy
		return rec
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	hard := time.AfterFunc(cfg.hardTimeout, cancel)
	defer hard.Stop()
	answers, lastFail, all := g.runPanel(ctx, cancel, r, req, panel, cfg)
	sum := func(rec *LogRecord) *LogRecord {
		for _, x := range all {
			addTokens(rec, x)
		}
		rec.ComboName, rec.Strategy = c.Name, c.Strategy
		return rec
	}
	if len(answers) < 2 {
		return sum(g.fusionWithoutJudge(w, r, req, answers, lastFail))
	}
	// The judge: the client's own request plus the candidates as system context.
	texts := make([]string, len(answers))
	for i, a := range answers {
		texts[i] = a.text
	}
	judge := panel[0]
	if j, ok := g.judgePart(snap, c); ok {
		judge = j
	}
	jb := withSystemAfter(req, judgeContext(texts))
	hw := &holdWriter{w: w}
	rec := g.serve(hw, r, subRequest(req, judge, jb, req.Stream))
	if hw.held {
		// The judge failed before anything reached the client: Answer 1.
		hw.discard()
		w.Header().Set("X-Switchyard-Warning", "fusion_judge_failed")
		writeAnswer(w, req, answers[0].mw, answers[0].text)
		rec.Status, rec.Outcome, rec.ErrorCode = http.StatusOK, OutcomeSuccess, ""
		rec.Warnings = append(rec.Warnings, "fusion_judge_failed")
	}
	return sum(rec)
}

// panelAnswer is one fusion panel member's result: its answer text ("" when
// it failed), what it wrote and its log record.
type panelAnswer struct {
	idx  int
	text string
	mw   *memWriter
	rec  *LogRecord
}

// runPanel asks every panel member in parallel, in memory, and collects
// the answers; once the quorum has answered, stragglers get
// fusion.stragglerGraceMs before they are cancelled. all holds every
// member's log record, lastFail the last member that failed.
func (g *Gateway) runPanel(ctx context.Context, cancel context.CancelFunc, r *http.Request, req *Request, panel []part, cfg fusionConfig) (answers []panelAnswer, lastFail panelAnswer, all []*LogRecord) {
	quorum := min(cfg.minPanel, len(panel))
	memberBody := panelBody(req)
	results := make(chan panelAnswer, len(panel))
	for i, p := range panel {
		go func() {
			mw, rec := g.runInMemory(ctx, r, subRequest(req, p, memberBody, false))
			text := ""
			if mw.status == http.StatusOK {
				text = answerText(req.Inbound, mw.buf.Bytes())
			}
			results <- panelAnswer{idx: i, text: text, mw: mw, rec: rec}
		}()
	}
	var grace <-chan time.Time
	for done := 0; done < len(panel); done++ {
		var a panelAnswer
		select {
		case a = <-results:
		case <-grace:
			cancel() // stragglers past the grace are cancelled; their results still arrive
			a = <-results
		}
		all = append(all, a.rec)
		if a.text != "" {
			answers = append(answers, a)
			if len(answers) == quorum && grace == nil {
				t := time.NewTimer(cfg.stragglerGrace)
				defer t.Stop()
				grace = t.C
			}
		} else {
			lastFail = a
		}
	}
	return answers, lastFail, all
}

// fusionWithoutJudge answers a fusion request whose panel gave fewer than
// two answers: the one answer (with a warning), or the last failure.
func (g *Gateway) fusionWithoutJudge(w http.ResponseWriter, r *http.Request, req *Request, answers []panelAnswer, lastFail panelAnswer) *LogRecord {
	rec := newLogRecord(req)
	if len(answers) == 1 {
		w.Header().Set("X-Switchyard-Warning", "fusion_single_answer")
		writeAnswer(w, req, answers[0].mw, answers[0].text)
		rec.Status, rec.Outcome = http.StatusOK, OutcomeSuccess
		rec.Warnings = append(rec.Warnings, "fusion_single_answer")
		return rec
	}
	if r.Context().Err() != nil {
		rec.Outcome, rec.Status = attemptClientAbort, 499
		return rec
	}
	if lastFail.mw.status == 0 { // cut by panelHardTimeoutMs before any answer
		out := newClientWriter(w, r, req, g.current())
		g.fail(out, &attemptState{log: rec}, services.NewGatewayError(services.CodeUpstreamTimeout, "No fusion panel member answered within fusion.panelHardTimeoutMs."))
		rec.finish(g.clock.Now(), out)
		return rec
	}
	relayCaptured(w, lastFail.mw)
	rec.Status, rec.Outcome = lastFail.mw.status, OutcomeUpstreamError
	if lastFail.rec != nil {
		rec.ErrorCode = lastFail.rec.ErrorCode
	}
	return rec
}

// judgePart resolves fusion.judge ({provider, model} or {comboId}).
func (g *Gateway) judgePart(s *Snapshot, c *services.Combo) (part, bool) {
	f := c.Config.Fusion
	if f == nil || f.Judge == nil {
		return part{}, false
	}
	j := f.Judge
	if j.ComboID != nil && *j.ComboID != "" {
		if inner, ok := s.ComboByID(*j.ComboID); ok && inner.Enabled {
			return part{name: "combo:" + inner.Name, route: Route{Combo: inner, Requested: inner.Name}}, true
		}
		return part{}, false
	}
	if j.Provider == nil || j.Model == nil {
		return part{}, false
	}
	prov, model := *j.Provider, *j.Model
	p, ok := s.Catalogue.Get(prov)
	if !ok || model == "" {
		return part{}, false
	}
	return part{name: prov + "/" + model, route: Route{Provider: p, Model: model, Requested: prov + "/" + model}}, true
}

type fusionConfig struct {
	minPanel       int
	stragglerGrace time.Duration
	hardTimeout    time.Duration
}

func fusionConfigOf(cfg *services.ComboConfig) fusionConfig {
	fc := fusionConfig{minPanel: 2, stragglerGrace: 8 * time.Second, hardTimeout: 90 * time.Second}
	f := cfg.Fusion
	if f == nil {
		return fc
	}
	if v := f.MinPanel; v != nil && *v >= 1 {
		fc.minPanel = *v
	}
	if v := f.StragglerGraceMs; v != nil && *v >= 0 {
		fc.stragglerGrace = time.Duration(*v) * time.Millisecond
	}
	if v := f.PanelHardTimeoutMs; v != nil && *v >= 1 {
		fc.hardTimeout = time.Duration(*v) * time.Millisecond
	}
	return fc
}

// usesTools reports tools with a tool_choice other than "none".
func usesTools(req *Request) bool {
	raw, ok := req.Body["tools"]
	if !ok || len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "[]" || string(raw) == "null" {
		return false
	}
	var choice string
	if tc, ok := req.Body["tool_choice"]; ok && json.Unmarshal(tc, &choice) == nil && choice == "none" {
		return false
	}
	if tc, ok := req.Body["tool_choice"]; ok {
		var obj struct{ Type string }
		if json.Unmarshal(tc, &obj) == nil && obj.Type == "none" {
			return false
		}
	}
	return true
}

// panelBody is a member's copy of the request: no streaming, n = 1, no tools.
func panelBody(req *Request) map[string]json.RawMessage {
	b := make(map[string]json.RawMessage, len(req.Body))
	for k, v := range req.Body {
		switch k {
		case "tools", "tool_choice", "parallel_tool_calls", "stream", "stream_options":
			continue
		}
		b[k] = v
	}
	if _, ok := b["n"]; ok {
		b["n"] = json.RawMessage("1")
	}
	return b
}

func judgeContext(texts []string) string {
	var sb strings.Builder
	sb.WriteString(judgeInstruction)
	for i, t := range texts {
		sb.WriteString("\n\nAnswer ")
		sb.WriteString(strconv.Itoa(i + 1))
		sb.WriteString(":\n")
		sb.WriteString(t)
	}
	return sb.String()
}

// withSystemAfter returns the request body with a system message inserted
// after the leading system messages (chat), or appended to the system
// prompt (messages).
func withSystemAfter(req *Request, text string) map[string]json.RawMessage {
	b := copyBody(req.Body)
	if req.Inbound == InboundMessages {
		b["system"] = joinSystem(req.Body["system"], text, false)
		return b
	}
	b["messages"] = insertSystem(req.Body["messages"], text, true)
	return b
}

// insertSystem inserts a system message into a chat messages array: after
// the leading system (and developer) messages, or at the very start.
func insertSystem(messages json.RawMessage, text string, afterSystems bool) json.RawMessage {
	var msgs []json.RawMessage
	_ = json.Unmarshal(messages, &msgs)
	at := 0
	for afterSystems && at < len(msgs) {
		var r struct{ Role string }
		_ = json.Unmarshal(msgs[at], &r)
		if r.Role != "system" && r.Role != "developer" {
			break
		}
		at++
	}
	sys, _ := json.Marshal(map[string]string{"role": "system", "content": text})
	out := make([]json.RawMessage, 0, len(msgs)+1)
	out = append(append(append(out, msgs[:at]...), sys), msgs[at:]...)
	b, _ := json.Marshal(out)
	return b
}

// joinSystem combines an Anthropic system field with text, before or after.
func joinSystem(existing json.RawMessage, text string, before bool) json.RawMessage {
	var s string
	if len(existing) == 0 || json.Unmarshal(existing, &s) == nil {
		switch {
		case s == "":
		case before:
			text = text + "\n\n" + s
		default:
			text = s + "\n\n" + text
		}
		out, _ := json.Marshal(text)
		return out
	}
	var blocks []json.RawMessage
	_ = json.Unmarshal(existing, &blocks)
	blk, _ := json.Marshal(map[string]string{"type": "text", "text": text})
	if before {
		blocks = append([]json.RawMessage{blk}, blocks...)
	} else {
		blocks = append(blocks, blk)
	}
	out, _ := json.Marshal(blocks)
	return out
}

func copyBody(body map[string]json.RawMessage) map[string]json.RawMessage {
	b := make(map[string]json.RawMessage, len(body)+1)
	for k, v := range body {
		b[k] = v
	}
	return b
}

// answerText extracts the assistant text of a complete response in the
// client's format.
func answerText(inbound string, body []byte) string {
	if inbound == InboundMessages {
		var m struct {
			Content []struct{ Type, Text string }
		}
		if json.Unmarshal(body, &m) != nil {
			return ""
		}
		var sb strings.Builder
		for _, c := range m.Content {
			if c.Type == "text" {
				sb.WriteString(c.Text)
			}
		}
		return sb.String()
	}
	var c struct {
		Choices []struct {
			Message struct {
				Content json.RawMessage
			}
		}
	}
	if json.Unmarshal(body, &c) != nil || len(c.Choices) == 0 {
		return ""
	}
	raw := c.Choices[0].Message.Content
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct{ Type, Text string }
	_ = json.Unmarshal(raw, &parts)
	var sb strings.Builder
	for _, p := range parts {
		sb.WriteString(p.Text)
	}
	return sb.String()
}

// writeAnswer sends one captured answer to the client: the captured body
// as is, or a synthetic stream (one content delta, then the finish) when the
// client streams.
func writeAnswer(w http.ResponseWriter, req *Request, mw *memWriter, text string) {
	if !req.Stream {
		relayCaptured(w, mw)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	created := time.Now().Unix()
	if req.Inbound == InboundMessages {
		ev := func(name string, v any) {
			b, _ := json.Marshal(v)
			fmt.Fprintf(w, "event: %s\ndata: %s\n\n", name, b)
		}
		ev("message_start", map[string]any{"type": "message_start", "message": map[string]any{"id": req.ID, "type": "message",
			"role": "assistant", "model": req.Model, "content": []any{}, "stop_reason": nil,
			"usage": map[string]int{"input_tokens": 0, "output_tokens": 0}}})
		ev("content_block_start", map[string]any{"type": "content_block_start", "index": 0, "content_block": map[string]string{"type": "text", "text": ""}})
		ev("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]string{"type": "text_delta", "text": text}})
		ev("content_block_stop", map[string]any{"type": "content_block_stop", "index": 0})
		ev("message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": "end_turn"}, "usage": map[string]int{"output_tokens": 0}})
		ev("message_stop", map[string]any{"type": "message_stop"})
	} else {
		chunk := func(delta map[string]any, finish any) {
			b, _ := json.Marshal(map[string]any{"id": req.ID, "object": "chat.completion.chunk", "created": created, "model": req.Model,
				"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}})
			fmt.Fprintf(w, "data: %s\n\n", b)
		}
		chunk(map[string]any{"role": "assistant", "content": text}, nil)
		chunk(map[string]any{}, "stop")
		fmt.Fprint(w, "data: [DONE]\n\n")
	}
	_ = http.NewResponseController(w).Flush()
}

// relayCaptured writes a captured response to the client unchanged.
func relayCaptured(w http.ResponseWriter, mw *memWriter) {
	for k, v := range mw.header {
		if strings.HasPrefix(k, "X-Switchyard-") || k == "Content-Type" || k == "Retry-After" {
			w.Header()[k] = v
		}
	}
	w.Header().Set("Content-Length", strconv.Itoa(mw.buf.Len()))
	w.WriteHeader(mw.status)
	_, _ = w.Write(mw.buf.Bytes())
}

// servePipeline implements 30-routing §10.19.
func (g *Gateway) servePipeline(w http.ResponseWriter, r *http.Request, req *Request) *LogRecord {
	c := req.Route.Combo
	steps := g.comboParts(g.reg.Snapshot(), c, req, false)
	n := len(steps)
	var parts []*LogRecord
	finish := func(rec *LogRecord) *LogRecord {
		for _, x := range parts {
			addTokens(rec, x)
		}
		rec.ComboName, rec.Strategy = c.Name, c.Strategy
		return rec
	}
	failStep := func(k int, status int, body []byte, rec *LogRecord) *LogRecord {
		msg := fmt.Sprintf("pipeline step %d of %d (%s) failed: %s", k+1, n, steps[k].name, errorMessage(body))
		out := newClientWriter(w, r, req, g.current())
		e := &services.GatewayError{Status: status, Code: errorCode(body), Message: msg}
		if e.Code == "" {
			e.Code = services.CodeUpstreamError
		}
		if status < 400 || status == 500 {
			e.Status, e.Code = http.StatusBadGateway, services.CodeUpstreamError // a failed step is a bad gateway answer (§10.19 case 2)
		}
		final := newLogRecord(req)
		g.fail(out, &attemptState{log: final}, e)
		final.finish(g.clock.Now(), out)
		if rec != nil {
			final.Attempts += rec.Attempts
		}
		return finish(final)
	}
	text := ""
	for k, step := range steps {
		var body map[string]json.RawMessage
		if k == 0 {
			body = copyBody(req.Body)
			if step.prompt != "" {
				body = withSystemBefore(req, step.prompt)
			}
		} else {
			body = stepBody(req, step.prompt, text)
		}
		if k < n-1 {
			sb := panelBody(&Request{Body: body}) // intermediate steps: non-stream, no tools
			mw, rec := g.runInMemory(r.Context(), r, subRequest(req, step, sb, false))
			parts = append(parts, rec)
			if r.Context().Err() != nil {
				rec := newLogRecord(req)
				rec.Outcome, rec.Status = attemptClientAbort, 499
				return finish(rec)
			}
			if mw.status != http.StatusOK {
				return failStep(k, mw.status, mw.buf.Bytes(), nil)
			}
			if text = answerText(req.Inbound, mw.buf.Bytes()); text == "" {
				return failStep(k, 502, []byte(`{"error":{"message":"the step returned no text"}}`), nil)
			}
			continue
		}
		hw := &holdWriter{w: w}
		rec := g.serve(hw, r, subRequest(req, step, body, req.Stream))
		if hw.held {
			held := hw.discard()
			return failStep(k, hw.status, held, rec)
		}
		return finish(rec)
	}
	out := newClientWriter(w, r, req, g.current())
	rec := newLogRecord(req)
	g.fail(out, &attemptState{log: rec}, services.NewGatewayError(services.CodeNoExecutableTargets, "The pipeline has no steps."))
	rec.finish(g.clock.Now(), out)
	return finish(rec)
}

// withSystemBefore puts prompt before the client's system messages.
func withSystemBefore(req *Request, prompt string) map[string]json.RawMessage {
	b := copyBody(req.Body)
	if req.Inbound == InboundMessages {
		b["system"] = joinSystem(req.Body["system"], prompt, true)
		return b
	}
	b["messages"] = insertSystem(req.Body["messages"], prompt, false)
	return b
}

// stepBody is step k > 1: [system: prompt (if any), user: previous output],
// with the client's generation parameters.
func stepBody(req *Request, prompt, input string) map[string]json.RawMessage {
	b := copyBody(req.Body)
	delete(b, "system")
	user, _ := json.Marshal(map[string]string{"role": "user", "content": input})
	msgs := []json.RawMessage{}
	if prompt != "" {
		if req.Inbound == InboundMessages {
			b["system"], _ = json.Marshal(prompt)
		} else {
			sys, _ := json.Marshal(map[string]string{"role": "system", "content": prompt})
			msgs = append(msgs, sys)
		}
	}
	b["messages"], _ = json.Marshal(append(msgs, user))
	return b
}

// errorMessage and errorCode read a captured error body of either format.
func errorMessage(body []byte) string {
	var e struct {
		Error struct{ Message string }
	}
	if json.Unmarshal(body, &e) == nil && e.Error.Message != "" {
		return e.Error.Message
	}
	return "status without a message"
}

func errorCode(body []byte) string {
	var e struct {
		Error struct{ Code string }
	}
	_ = json.Unmarshal(body, &e)
	return e.Error.Code
}

// memWriter captures a response in memory (a panel member or an
// intermediate step).
type memWriter struct {
	mu     sync.Mutex
	header http.Header
	status int
	buf    bytes.Buffer
}

func newMemWriter() *memWriter { return &memWriter{header: http.Header{}} }

func (m *memWriter) Header() http.Header { return m.header }

func (m *memWriter) WriteHeader(status int) {
	m.mu.Lock()
	if m.status == 0 {
		m.status = status
	}
	m.mu.Unlock()
}

func (m *memWriter) Write(p []byte) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.status == 0 {
		m.status = http.StatusOK
	}
	return m.buf.Write(p)
}

// FlushError makes http.ResponseController flushes succeed.
func (m *memWriter) FlushError() error { return nil }

// holdWriter passes a success through to the client but holds back an
// error status and its body, so the executor can answer otherwise (the
// fusion fallback, the pipeline's step-naming error).
type holdWriter struct {
	w      http.ResponseWriter
	held   bool
	status int
	buf    bytes.Buffer
}

func (h *holdWriter) Header() http.Header { return h.w.Header() }

func (h *holdWriter) WriteHeader(status int) {
	if status >= 400 {
		h.held, h.status = true, status
		return
	}
	h.w.WriteHeader(status)
}

func (h *holdWriter) Write(p []byte) (int, error) {
	if h.held {
		return h.buf.Write(p)
	}
	return h.w.Write(p)
}

func (h *holdWriter) FlushError() error {
	if h.held {
		return nil
	}
	return http.NewResponseController(h.w).Flush()
}

func (h *holdWriter) SetWriteDeadline(t time.Time) error {
	return http.NewResponseController(h.w).SetWriteDeadline(t)
}

// discard drops the held error's headers and returns its body.
func (h *holdWriter) discard() []byte {
	for _, k := range []string{"X-Switchyard-Error-Code", "Retry-After", "Content-Type", "Content-Length"} {
		h.w.Header().Del(k)
	}
	return h.buf.Bytes()
}
