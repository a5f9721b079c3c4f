package gateway

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"sync"
	"time"

	"switchyard/services"
	"switchyard/services/resilience"
	"switchyard/services/translate"
)

// maxPrelude bounds the non-useful events held before the commit.
const maxPrelude = 64 << 10

// upstreamReadSize is the line buffer of one upstream stream. An open stream
// holds it for its whole life, idle or not, so it is small: the body it
// reads from is already buffered by the transport, and a longer line is
// collected whole.
const upstreamReadSize = 1 << 10

// tailWait and maxTail bound the read of what follows the terminal event of
// a completed stream (normally just the end of the body), done so that the
// upstream connection goes back to the pool instead of being closed.
const (
	tailWait = 20 * time.Millisecond
	maxTail  = 64 << 10
)

// chunkProbe reads what the relay needs from a chat.completion.chunk.
type chunkProbe struct {
	Choices []struct {
		Delta struct {
			Content          *string         `json:"content"`
			ToolCalls        json.RawMessage `json:"tool_calls"`
			ReasoningContent *string         `json:"reasoning_content"`
			Reasoning        *string         `json:"reasoning"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *usage          `json:"usage"`
	Error json.RawMessage `json:"error"`
}

type usage struct {
	PromptTokens        int64 `json:"prompt_tokens"`
	CompletionTokens    int64 `json:"completion_tokens"`
	PromptTokensDetails *struct {
		CachedTokens int64 `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
	CompletionTokensDetails *struct {
		ReasoningTokens int64 `json:"reasoning_tokens"`
	} `json:"completion_tokens_details"`
}

func (p *chunkProbe) useful() bool {
	for _, c := range p.Choices {
		d := c.Delta
		if (d.Content != nil && *d.Content != "") || (len(d.ToolCalls) > 0 && string(d.ToolCalls) != "null") ||
			(d.ReasoningContent != nil && *d.ReasoningContent != "") || (d.Reasoning != nil && *d.Reasoning != "") || c.FinishReason != nil {
			return true
		}
	}
	return false
}

func (p *chunkProbe) finished() bool {
	for _, c := range p.Choices {
		if c.FinishReason != nil {
			return true
		}
	}
	return false
}

// streamRelay is one streaming dispatch. The dispatch goroutine sends the
// request and reads the upstream body itself; a guard on a timer does what
// the ticker of a select loop would: keepalives, and ending the attempt on
// a departed client, the first-byte deadline, the watchdog and upstream
// silence by cancelling it. mu orders the guard's checks and the handling
// of each event as a single loop would; once either side has ended the
// attempt (ended, verdict) the other does nothing more.
//
// The methods on the event path keep their stack frames small and leave
// building a verdict to separate methods: an open stream waits at the
// bottom of a deep call stack (about 12 KiB from net/http down), and that
// depth decides how much goroutine stack every idle stream holds.
type streamRelay struct {
	ctx       context.Context
	cancel    context.CancelCauseFunc
	out       *clientWriter
	ad        streamAdapter
	set       *Settings
	st        *attemptState
	format    services.WireFormat
	onHeaders func(int, http.Header)

	mu                sync.Mutex
	timer             *time.Timer
	period            time.Duration
	ended             bool
	verdict           result
	firstByteDeadline time.Time
	lastUpstream      time.Time
	wd                *Watchdog
	prelude           [][]byte
	preludeBytes      int
}

// relayStream performs a streaming dispatch: hold everything until the first
// useful event (failover stays possible), then relay event by event through
// the format adapter. Keepalives go out whenever the client has heard
// nothing for the idle interval.
func (g *Gateway) relayStream(ctx context.Context, cancel context.CancelCauseFunc, out *clientWriter, t target, c *services.Connection, path string, body []byte, ad streamAdapter, set *Settings, st *attemptState, onHeaders func(int, http.Header)) result {
	r := &streamRelay{ctx: ctx, cancel: cancel, out: out, ad: ad, set: set, st: st, format: t.provider.Format, onHeaders: onHeaders}
	r.start(g.watchdogCfg)
	defer cancel(nil)
	if resp := r.send(g, &t, c, path, body); resp != nil {
		r.run(resp, g.up)
	}
	r.mu.Lock()
	r.ended = true
	r.mu.Unlock()
	r.timer.Stop()
	return r.verdict
}

// start arms the guard.
func (r *streamRelay) start(watchdogCfg func() (WatchdogConfig, int)) {
	now := time.Now()
	r.firstByteDeadline, r.lastUpstream = now.Add(r.set.TargetTimeout), now
	if watchdogCfg != nil {
		if cfg, _ := watchdogCfg(); cfg.Enabled {
			r.wd = NewWatchdog(cfg, now)
		}
	}
	tick := r.set.KeepaliveIdle
	if tick <= 0 || tick > time.Second {
		tick = time.Second
	}
	r.period = tick / 2
	r.mu.Lock()
	r.timer = time.AfterFunc(r.period, r.guard)
	r.mu.Unlock()
}

// send performs the exchange up to the response headers and returns the
// response of a stream that starts; nil when the attempt has ended (a
// transport error, an error status, or the guard).
func (r *streamRelay) send(g *Gateway, t *target, c *services.Connection, path string, body []byte) *http.Response {
	resp, err := g.send(r.ctx, *t, c, path, body, true, r.out.req.AnthropicBeta)
	if err != nil {
		r.headers(nil, err, nil)
		return nil
	}
	var errBody []byte
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		errBody, _ = io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	}
	if r.headers(resp, nil, errBody) {
		resp.Body.Close()
		return nil
	}
	return resp
}

// guard runs every period until the attempt ends.
func (r *streamRelay) guard() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ended {
		return
	}
	now := time.Now()
	r.out.keepalive(now, r.ad.Keepalive())
	switch {
	case r.out.gone():
		r.cancel(errClientGone)
		r.end(resGone())
	case !r.out.committedUseful() && now.After(r.firstByteDeadline):
		r.cancel(errTargetTimeout)
		r.end(resTransport(resilience.TransportHeadersTimeout, "no useful byte within the target timeout"))
	case r.wd.Abort(now):
		r.end(r.watchdogAbort())
	case r.set.StreamIdleTimeout > 0 && now.Sub(r.lastUpstream) > r.set.StreamIdleTimeout:
		r.cancel(errStreamIdle)
		r.end(resTransport(resilience.TransportIdleTimeout, "the upstream stream went silent"))
	default:
		r.timer.Reset(r.period)
	}
}

// end records how the attempt ended; mu is held.
func (r *streamRelay) end(res result) {
	r.ended, r.verdict = true, res
}

func (r *streamRelay) watchdogAbort() result {
	r.cancel(errWatchdog)
	return result{watchdog: true, transport: resilience.TransportIdleTimeout, message: "stream throughput too low"}
}

// endGone ends the attempt because a write to the client failed; mu is held.
func (r *streamRelay) endGone() {
	r.cancel(errClientGone)
	r.end(resGone())
}

// endCtx ends the attempt once its context has ended; mu is held.
func (r *streamRelay) endCtx() {
	if r.out.gone() || context.Cause(r.ctx) == context.Canceled {
		r.end(resGone())
		return
	}
	r.end(transportResult(r.ctx, r.ctx.Err()))
}

// endRead ends the attempt because sending the request or reading the
// body failed with err; mu is held.
func (r *streamRelay) endRead(err error) {
	if r.ctx.Err() != nil {
		r.endCtx()
		return
	}
	r.end(transportResult(r.ctx, err))
}

// run reads the upstream body event by event until the attempt ends. A
// line or an event over the upstream's MaxEventBytes ends the attempt
// (limitResult) without reading the rest; so does an oversized event that
// finds the process-wide budget spent.
func (r *streamRelay) run(resp *http.Response, up *Upstream) {
	defer resp.Body.Close()
	br := bufio.NewReaderSize(resp.Body, upstreamReadSize)
	lim := up.limits()
	long := growBuf{max: lim.MaxEventBytes, free: eventFree, budget: up.budget, tooBig: errEventTooLarge}
	data := long
	defer long.release()
	defer data.release()
	hasData := false
	event := ""
	for {
		line, err := br.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			// A line longer than the buffer: collect it whole, within the cap.
			long.reset()
			for {
				if aerr := long.add(line...); aerr != nil {
					r.overLimit(aerr, lim)
					return
				}
				if err != bufio.ErrBufferFull {
					break
				}
				line, err = br.ReadSlice('\n')
			}
			line = long.bytes()
		}
		if len(line) > 0 {
			trimmed := bytes.TrimRight(line, "\r\n")
			switch {
			case len(trimmed) == 0:
				if hasData {
					if r.event(event, data.bytes()) {
						if r.verdict.ok {
							r.drainTail(br)
						}
						return
					}
					data.reset()
					hasData = false
				}
				event = ""
			case trimmed[0] == ':':
				// comment: ignored
			case bytes.HasPrefix(trimmed, []byte("event:")):
				event = eventName(bytes.TrimSpace(trimmed[6:]))
			case bytes.HasPrefix(trimmed, []byte("data:")):
				payload := bytes.TrimPrefix(trimmed[5:], []byte(" "))
				var aerr error
				switch {
				case hasData:
					if aerr = data.add('\n'); aerr == nil {
						aerr = data.add(payload...)
					}
				case len(payload) > 0:
					data.reset()
					aerr, hasData = data.add(payload...), true
				}
				if aerr != nil {
					r.overLimit(aerr, lim)
					return
				}
			}
		}
		if err != nil {
			if hasData && errors.Is(err, io.EOF) && r.event(event, data.bytes()) {
				return
			}
			r.bodyEnd(err)
			return
		}
	}
}

// overLimit ends the attempt on an event over its cap or the budget.
func (r *streamRelay) overLimit(err error, lim BodyLimits) {
	res, _ := limitResult(err, lim)
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.ended {
		r.end(res)
	}
}

// headers handles the outcome of sending the request: a transport error, an
// error status (errBody holds up to 64 KiB of its body) or the start of the
// stream. It reports whether the attempt has ended.
func (r *streamRelay) headers(resp *http.Response, err error, errBody []byte) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case r.ended:
	case err != nil:
		r.endRead(err)
	case r.ctx.Err() != nil:
		r.endCtx()
	default:
		r.lastUpstream = time.Now()
		r.onHeaders(resp.StatusCode, resp.Header)
		if resp.StatusCode >= 200 && resp.StatusCode <= 299 {
			return false
		}
		r.end(resStatus(resp.StatusCode, resp.Header, errBody))
	}
	return true
}

// event handles one upstream event and reports whether the attempt has
// ended. The adapter and the client writer do not keep data.
func (r *streamRelay) event(name string, data []byte) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ended {
		return true
	}
	if r.ctx.Err() != nil {
		r.endCtx()
		return true
	}
	now := time.Now()
	r.lastUpstream = now
	if r.wd != nil && r.watch(now, data) {
		return true
	}
	frames, useful, done, err := r.ad.Feed(name, data)
	switch {
	case err != nil:
		r.fail(err)
		return true
	case done:
		r.finish(frames)
		return true
	case r.out.committedUseful():
		for _, f := range frames {
			if !r.out.frame(f) {
				r.endGone()
				return true
			}
		}
		return false
	}
	return r.hold(frames, useful)
}

// watch feeds the watchdog one event; true when it ended the attempt.
func (r *streamRelay) watch(now time.Time, data []byte) bool {
	n, prot := nativeUseful(r.format, data)
	r.wd.Observe(now, n, prot)
	if r.wd.Abort(now) {
		r.end(r.watchdogAbort())
		return true
	}
	return false
}

// hold keeps the frames of a stream not committed yet, and commits it at
// the first useful event or when the prelude is too large.
func (r *streamRelay) hold(frames [][]byte, useful bool) bool {
	for _, f := range frames {
		r.prelude = append(r.prelude, bytes.Clone(f))
		r.preludeBytes += len(f)
	}
	if useful || r.preludeBytes > maxPrelude {
		if !r.out.commitUseful(r.prelude) {
			r.endGone()
			return true
		}
		r.prelude = nil
	}
	return false
}

// bodyEnd handles the end of the upstream body: io.EOF or a read error.
func (r *streamRelay) bodyEnd(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case r.ended:
	case !errors.Is(err, io.EOF) || r.ctx.Err() != nil:
		r.endRead(err)
	default:
		frames, done, err := r.ad.End()
		switch {
		case err != nil:
			r.fail(err)
		case done:
			r.finish(frames)
		default:
			r.fail(errIncomplete)
		}
	}
}

// finish ends a complete stream: the prelude if nothing was committed yet,
// the last frames and the terminal frame; mu is held.
func (r *streamRelay) finish(frames [][]byte) {
	r.st.log.addCounts(r.ad.Usage())
	out := r.out
	ok := true
	if !out.committedUseful() {
		ok = out.commitUseful(append(r.prelude, frames...))
	} else {
		for _, f := range frames {
			if ok = out.frame(f); !ok {
				break
			}
		}
	}
	if ok && out.done(r.ad.Terminal()) {
		r.end(resOK())
		return
	}
	r.end(resGone())
}

// fail ends the attempt on an upstream stream that cannot be relayed; mu
// is held.
func (r *streamRelay) fail(err error) {
	var ue *translate.UpstreamError
	switch {
	case errors.As(err, &ue):
		b, _ := json.Marshal(map[string]any{"error": map[string]string{"code": ue.Code, "type": ue.Type, "message": ue.Message}})
		r.end(resStatus(502, nil, b))
	case errors.Is(err, errEmpty):
		r.end(resBad(resilience.DetailEmptyResponse, "empty stream"))
	case errors.Is(err, errIncomplete):
		r.end(resTransport(resilience.TransportReset, errIncomplete.Error()))
	default:
		r.end(resBad(resilience.DetailMalformed, "malformed stream event"))
	}
}

// drainTail reads what follows the terminal event of a completed stream,
// briefly, so the upstream connection can be reused; the client already has
// the terminal frame.
func (r *streamRelay) drainTail(br *bufio.Reader) {
	t := time.AfterFunc(tailWait, func() { r.cancel(nil) })
	_, _ = io.CopyN(io.Discard, br, maxTail)
	t.Stop()
}

// eventName returns the SSE event name, without allocating for the names
// the known formats use.
func eventName(b []byte) string {
	switch string(b) {
	case "":
		return ""
	case "message_start":
		return "message_start"
	case "message_delta":
		return "message_delta"
	case "message_stop":
		return "message_stop"
	case "content_block_start":
		return "content_block_start"
	case "content_block_delta":
		return "content_block_delta"
	case "content_block_stop":
		return "content_block_stop"
	case "ping":
		return "ping"
	case "error":
		return "error"
	}
	return string(b)
}
