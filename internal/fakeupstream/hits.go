package fakeupstream

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"
)

// End says how the fake's side of an exchange finished.
type End string

const (
	// EndCompleted: the whole scripted answer was written, success marker included for streams.
	EndCompleted End = "completed"
	// EndClientCancelled: the client went away (request context ended or a write failed) first.
	EndClientCancelled End = "client_cancelled"
	// EndReset: the connection was reset before headers.
	EndReset End = "reset"
	// EndCut: the body was cut without its success marker (FaultCut).
	EndCut End = "cut"
	// EndStallReleased: a FaultStall ran out its StallFor and the body ended without a marker.
	EndStallReleased End = "stall_released"
	// EndMalformedSent: a truncated-JSON event (or body) was sent and the body ended.
	EndMalformedSent End = "malformed_sent"
	// EndErrorEventSent: an in-band error event was sent and the body ended.
	EndErrorEventSent End = "error_event_sent"
	// EndServerClosed: the fake was closed while the handler was still running.
	EndServerClosed End = "server_closed"
)

// Usage is the token usage of an exchange: InputTokens from the prompt text (see Tokens),
// OutputTokens = content events sent. Sent says whether the figures reached the client (usage
// chunk, message_delta or JSON body), which is what accounting must reconcile against.
type Usage struct {
	InputTokens  int  `json:"input_tokens"`
	OutputTokens int  `json:"output_tokens"`
	Sent         bool `json:"sent"`
}

// Hit is one request the fake accepted, including ones reset before headers. It is a snapshot:
// fields after TStart fill in while the handler runs, so take a new one (Hits, WaitEnded) to see
// the outcome.
type Hit struct {
	// Seq numbers hits from 1 in arrival order.
	Seq int64 `json:"seq"`
	// Nonce is the sy-nonce found in the last user message; Attempt counts requests with it,
	// from 1. Reproducible is false when there was no nonce, so a Random draw depended on
	// arrival order.
	Nonce        string `json:"nonce,omitempty"`
	Attempt      int    `json:"attempt,omitempty"`
	Reproducible bool   `json:"reproducible"`
	// Credential is the key received (Bearer or x-api-key). It is never written to the JSON hit
	// log, which may be swept for secrets; KeyLabel is, and names the key by its label (Label) or
	// by "key-" and 8 hex digits of its SHA-256.
	Credential string `json:"-"`
	KeyLabel   string `json:"key_label"`
	Method     string `json:"method"`
	Path       string `json:"path"`
	// Format is the wire format of the route: "openai" or "anthropic".
	Format string `json:"format"`
	Model  string `json:"model"`
	Stream bool   `json:"stream"`
	// Body is the request body as received. Like Credential it stays out of
	// the JSON hit log (prompts may carry canaries).
	Body []byte `json:"-"`
	// TStart is when the request arrived, THeaders when the status line was flushed (zero if
	// never), TEnd when the handler returned (zero while it runs). Times come from the fake's
	// clock (WithClock; the wall clock by default).
	TStart   time.Time `json:"t_start"`
	THeaders time.Time `json:"t_headers,omitzero"`
	TEnd     time.Time `json:"t_end,omitzero"`
	// Status is the HTTP status sent; 0 when the connection was reset or the client left before
	// headers.
	Status int `json:"status"`
	// EventsSent counts content events (deltas) written; preamble and trailer events do not count.
	EventsSent int   `json:"events_sent"`
	BytesSent  int64 `json:"bytes_sent"`
	// Action names what answered: the step's Name, a preset, a fault, "ok", or "random:<fault>"
	// for a drawn fault.
	Action string `json:"action"`
	// End is empty while the handler runs.
	End   End   `json:"end,omitempty"`
	Usage Usage `json:"usage"`
	// Headers lists the canonical names (not values) of the request headers, sorted.
	Headers []string `json:"headers"`
	// Violations lists protocol problems of the request, e.g. "anthropic_missing_version".
	Violations []string `json:"violations,omitempty"`
	// Tools names the tools the request offered. HasToolResult says it
	// carried a tool result (a chat "tool" message or an Anthropic
	// tool_result block), ToolResult is the last one's text: what a client
	// sent back after a scripted ToolCall.
	Tools         []string `json:"tools,omitempty"`
	HasToolResult bool     `json:"has_tool_result,omitempty"`
	ToolResult    string   `json:"tool_result,omitempty"`
}

// Ended reports whether the handler has returned.
func (h Hit) Ended() bool { return !h.TEnd.IsZero() }

// Duration is TEnd − TStart, or 0 while the handler runs.
func (h Hit) Duration() time.Duration {
	if !h.Ended() {
		return 0
	}
	return h.TEnd.Sub(h.TStart)
}

// HitLog selects how many hits are kept: HitLogFull (tests), HitLogOff (benchmarks) or a ring of
// the last n (HitLogRing(n)).
type HitLog int

const (
	// HitLogFull keeps every hit. The default.
	HitLogFull HitLog = 0
	// HitLogOff keeps none, and skips the bookkeeping that would slow a benchmark.
	HitLogOff HitLog = -1
)

// HitLogRing keeps the last n hits.
func HitLogRing(n int) HitLog {
	if n <= 0 {
		return HitLogOff
	}
	return HitLog(n)
}

// ParseHitLog reads "full", "off" or "ring:N".
func ParseHitLog(s string) (HitLog, error) {
	switch s {
	case "", "full":
		return HitLogFull, nil
	case "off":
		return HitLogOff, nil
	}
	if rest, ok := strings.CutPrefix(s, "ring:"); ok {
		n, err := strconv.Atoi(rest)
		if err == nil && n > 0 {
			return HitLog(n), nil
		}
	}
	return 0, fmt.Errorf("fakeupstream: hit log %q: want full, off or ring:N", s)
}

// hitRec is a hit being written by its handler; the fields are guarded by Server.mu.
type hitRec struct {
	hit  Hit
	done chan struct{}
}

// record adds rec to the log according to the mode. Called with s.mu held.
func (s *Server) recordLocked(rec *hitRec) {
	switch {
	case s.hitLog == HitLogOff:
		return
	case s.hitLog > 0 && len(s.hits) >= int(s.hitLog):
		drop := s.hits[0]
		delete(s.bySeq, drop.hit.Seq)
		s.hits = slices.Delete(s.hits, 0, 1)
	}
	s.hits = append(s.hits, rec)
	s.bySeq[rec.hit.Seq] = rec
	s.broadcastLocked()
}

// update changes a hit and wakes waiters.
func (s *Server) update(rec *hitRec, f func(h *Hit)) {
	s.mu.Lock()
	f(&rec.hit)
	if s.hitLog != HitLogOff {
		s.broadcastLocked()
	}
	s.mu.Unlock()
}

// broadcastLocked wakes every WaitUntil: closing a channel is the one broadcast Go has.
func (s *Server) broadcastLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// Hits returns a snapshot of the hit log in arrival order.
func (s *Server) Hits() []Hit {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.snapshotLocked()
}

func (s *Server) snapshotLocked() []Hit {
	out := make([]Hit, len(s.hits))
	for i, r := range s.hits {
		out[i] = r.hit
		out[i].Headers = slices.Clone(r.hit.Headers)
		out[i].Violations = slices.Clone(r.hit.Violations)
	}
	return out
}

// HitsWhere returns the hits for which keep is true.
func (s *Server) HitsWhere(keep func(Hit) bool) []Hit {
	var out []Hit
	for _, h := range s.Hits() {
		if keep(h) {
			out = append(out, h)
		}
	}
	return out
}

// HitsFor returns the hits whose credential or label is key.
func (s *Server) HitsFor(key string) []Hit {
	return s.HitsWhere(func(h Hit) bool { return h.Credential == key || h.KeyLabel == key })
}

// HitsForNonce returns the attempts of one stream-client request, in order.
func (s *Server) HitsForNonce(nonce string) []Hit {
	return s.HitsWhere(func(h Hit) bool { return h.Nonce == nonce })
}

// Count is the number of hits in the log.
func (s *Server) Count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.hits)
}

// CountFor is len(HitsFor(key)).
func (s *Server) CountFor(key string) int { return len(s.HitsFor(key)) }

// CountWhere is len(HitsWhere(keep)).
func (s *Server) CountWhere(keep func(Hit) bool) int { return len(s.HitsWhere(keep)) }

// Hit returns the hit with sequence number seq, if the log still holds it.
func (s *Server) Hit(seq int64) (Hit, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rec, ok := s.bySeq[seq]
	if !ok {
		return Hit{}, false
	}
	return rec.hit, true
}

// Ended returns a channel closed when the handler of hit seq returns, for a select next to the
// client's own events. ok is false when the log does not hold seq.
func (s *Server) Ended(seq int64) (done <-chan struct{}, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rec, ok := s.bySeq[seq]
	if !ok {
		return nil, false
	}
	return rec.done, true
}

// WaitEnded blocks until the handler of hit seq returns or ctx ends, and returns the final hit.
// Bound ctx with the property's deadline: "a client that cancels makes the upstream request end
// within 1 s" is WaitEnded with a 1 s timeout after the cancel.
func (s *Server) WaitEnded(ctx context.Context, seq int64) (Hit, error) {
	done, ok := s.Ended(seq)
	if !ok {
		return Hit{}, fmt.Errorf("fakeupstream: hit %d is not in the hit log", seq)
	}
	select {
	case <-done:
		h, _ := s.Hit(seq)
		return h, nil
	case <-ctx.Done():
		h, _ := s.Hit(seq)
		return h, fmt.Errorf("fakeupstream: hit %d still running (end %q, %d events sent): %w", seq, h.End, h.EventsSent, ctx.Err())
	}
}

// WaitUntil blocks until cond holds for the hit log or ctx ends. cond runs on a snapshot after
// every change to the log (a new hit, headers sent, an event written, a handler ending), so it
// observes every step without polling or sleeping.
func (s *Server) WaitUntil(ctx context.Context, cond func(hits []Hit) bool) error {
	for {
		s.mu.Lock()
		hits := s.snapshotLocked()
		changed := s.changed
		s.mu.Unlock()
		if cond(hits) {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("fakeupstream: condition not met with %d hits: %w", len(hits), ctx.Err())
		}
	}
}

// WaitHits waits until the log holds at least n hits and returns them.
func (s *Server) WaitHits(ctx context.Context, n int) ([]Hit, error) {
	var got []Hit
	err := s.WaitUntil(ctx, func(hits []Hit) bool {
		got = hits
		return len(hits) >= n
	})
	return got, err
}

// WriteHitLog writes the hit log as JSON lines, the artifact format of failing tests and of
// GET /_fake/hits. Credentials are left out (see Hit.Credential).
func (s *Server) WriteHitLog(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	for _, h := range s.Hits() {
		if err := enc.Encode(h); err != nil {
			return fmt.Errorf("fakeupstream: write hit log: %w", err)
		}
	}
	return nil
}
