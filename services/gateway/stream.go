package gateway

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"time"

	"switchyard/services"
	"switchyard/services/resilience"
	"switchyard/services/translate"
)

// maxPrelude bounds the non-useful events held before the commit.
const maxPrelude = 64 << 10

// sseEvent is one upstream event (its data payload) or the end of the stream.
type sseEvent struct {
	event string
	data  []byte
	err   error // io.EOF on a clean end of the body
	// resp carries the response headers phase.
	status int
	body   []byte
	hdr    map[string][]string
}

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

// relayStream performs a streaming dispatch: hold everything until the first
// useful event (failover stays possible), then relay event by event through
// the format adapter. Keepalives go out whenever the client has heard
// nothing for the idle interval.
func (g *Gateway) relayStream(ctx context.Context, cancel context.CancelCauseFunc, out *clientWriter, t target, c *services.Connection, path string, body []byte, ad streamAdapter, set *Settings, st *attemptState, onHeaders func(int, http.Header)) result {
	events := make(chan sseEvent, 16)
	go g.readUpstream(ctx, t, c, path, body, events)

	firstByteDeadline := time.Now().Add(set.TargetTimeout)
	lastUpstream := time.Now()
	tick := set.KeepaliveIdle
	if tick <= 0 || tick > time.Second {
		tick = time.Second
	}
	ticker := time.NewTicker(tick / 2)
	defer ticker.Stop()
	defer cancel(nil)
	// Drain the reader so its goroutine never blocks on send after we return.
	defer func() {
		go func() {
			for range events {
			}
		}()
	}()

	var prelude [][]byte
	preludeBytes := 0
	headersSeen := false
	var wd *Watchdog
	if g.watchdogCfg != nil {
		if cfg, _ := g.watchdogCfg(); cfg.Enabled {
			wd = NewWatchdog(cfg, time.Now())
		}
	}
	watchdogAbort := func() result {
		cancel(errWatchdog)
		return result{watchdog: true, transport: resilience.TransportIdleTimeout, message: "stream throughput too low"}
	}
	finish := func(frames [][]byte) result {
		st.log.addCounts(ad.Usage())
		if !out.committedUseful() {
			if !out.commitUseful(append(prelude, frames...)) {
				return resGone()
			}
		} else {
			for _, f := range frames {
				if !out.frame(f) {
					return resGone()
				}
			}
		}
		if !out.done(ad.Terminal()) {
			return resGone()
		}
		return resOK()
	}
	failed := func(err error) result {
		var ue *translate.UpstreamError
		switch {
		case errors.As(err, &ue):
			b, _ := json.Marshal(map[string]any{"error": map[string]string{"code": ue.Code, "type": ue.Type, "message": ue.Message}})
			return resStatus(502, nil, b)
		case errors.Is(err, errEmpty):
			return resBad(resilience.DetailEmptyResponse, "empty stream")
		case errors.Is(err, errIncomplete):
			return resTransport(resilience.TransportReset, errIncomplete.Error())
		}
		return resBad(resilience.DetailMalformed, "malformed stream event")
	}
	for {
		select {
		case <-ctx.Done():
			if out.gone() || ctx.Err() != nil && context.Cause(ctx) == context.Canceled {
				return resGone()
			}
			return transportResult(ctx, ctx.Err())
		case now := <-ticker.C:
			out.keepalive(now, ad.Keepalive())
			if out.gone() {
				cancel(errClientGone)
				return resGone()
			}
			if !out.committedUseful() && now.After(firstByteDeadline) {
				cancel(errTargetTimeout)
				return resTransport(resilience.TransportHeadersTimeout, "no useful byte within the target timeout")
			}
			if wd.Abort(now) {
				return watchdogAbort()
			}
			if set.StreamIdleTimeout > 0 && now.Sub(lastUpstream) > set.StreamIdleTimeout {
				cancel(errStreamIdle)
				return resTransport(resilience.TransportIdleTimeout, "the upstream stream went silent")
			}
		case ev, ok := <-events:
			if !ok {
				if ctx.Err() != nil {
					return transportResult(ctx, ctx.Err())
				}
				return resTransport(resilience.TransportReset, "upstream stream ended")
			}
			lastUpstream = time.Now()
			if !headersSeen {
				headersSeen = true
				if ev.err != nil {
					return transportResult(ctx, ev.err)
				}
				onHeaders(ev.status, ev.hdr)
				if ev.status < 200 || ev.status > 299 {
					return resStatus(ev.status, ev.hdr, ev.body)
				}
				continue
			}
			if ev.err != nil {
				if !errors.Is(ev.err, io.EOF) {
					return transportResult(ctx, ev.err)
				}
				frames, done, err := ad.End()
				if err != nil {
					return failed(err)
				}
				if done {
					return finish(frames)
				}
				return failed(errIncomplete)
			}
			if wd != nil {
				n, prot := nativeUseful(t.provider.Format, ev.data)
				wd.Observe(lastUpstream, n, prot)
				if wd.Abort(lastUpstream) {
					return watchdogAbort()
				}
			}
			frames, useful, done, err := ad.Feed(ev.event, ev.data)
			if err != nil {
				return failed(err)
			}
			if done {
				return finish(frames)
			}
			if out.committedUseful() {
				for _, f := range frames {
					if !out.frame(f) {
						cancel(errClientGone)
						return resGone()
					}
				}
				continue
			}
			prelude = append(prelude, frames...)
			for _, f := range frames {
				preludeBytes += len(f)
			}
			if useful || preludeBytes > maxPrelude {
				if !out.commitUseful(prelude) {
					cancel(errClientGone)
					return resGone()
				}
				prelude = nil
			}
		}
	}
}

// readUpstream sends the response headers, then each SSE data payload, then
// the end (io.EOF or an error). It stops when ctx ends.
func (g *Gateway) readUpstream(ctx context.Context, t target, c *services.Connection, path string, body []byte, events chan<- sseEvent) {
	defer close(events)
	send := func(ev sseEvent) bool {
		select {
		case events <- ev:
			return true
		case <-ctx.Done():
			return false
		}
	}
	resp, err := g.send(ctx, t, c, path, body, true)
	if err != nil {
		send(sseEvent{err: err})
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		send(sseEvent{status: resp.StatusCode, body: b, hdr: resp.Header})
		return
	}
	if !send(sseEvent{status: resp.StatusCode, hdr: resp.Header}) {
		return
	}
	br := bufio.NewReaderSize(resp.Body, 32<<10)
	var data []byte
	event := ""
	for {
		line, err := br.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			// A very long line: collect it whole.
			full := append([]byte(nil), line...)
			for err == bufio.ErrBufferFull {
				line, err = br.ReadSlice('\n')
				full = append(full, line...)
			}
			line = full
		}
		if len(line) > 0 {
			trimmed := bytes.TrimRight(line, "\r\n")
			switch {
			case len(trimmed) == 0:
				if data != nil {
					if !send(sseEvent{event: event, data: data}) {
						return
					}
					data = nil
				}
				event = ""
			case trimmed[0] == ':':
				// comment: ignored
			case bytes.HasPrefix(trimmed, []byte("event:")):
				event = string(bytes.TrimSpace(trimmed[6:]))
			case bytes.HasPrefix(trimmed, []byte("data:")):
				payload := bytes.TrimPrefix(trimmed[5:], []byte(" "))
				if data == nil {
					data = append([]byte(nil), payload...)
				} else {
					data = append(append(data, '\n'), payload...)
				}
			}
		}
		if err != nil {
			if data != nil && errors.Is(err, io.EOF) {
				if !send(sseEvent{event: event, data: data}) {
					return
				}
			}
			send(sseEvent{err: err})
			return
		}
	}
}
