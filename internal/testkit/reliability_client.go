package testkit

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Outcome classes of one client request (60-quality §2.2).
const (
	ClassOK          = "ok"
	ClassTypedError  = "typed_error"
	ClassStreamError = "stream_error"
	ClassCancelled   = "cancelled"
	ClassLost        = "lost"
)

// ChatCall is one OpenAI chat completion request of a reliability test.
type ChatCall struct {
	BaseURL string // http://host:port of the gateway
	Key     string // client key
	Model   string
	Stream  bool
	// Nonce is written into the last user message as "sy-nonce:<hex>", so the
	// fake upstream can group the attempts of this request.
	Nonce string
	// Want is the complete assistant text the upstream sends on success.
	Want string
}

// ChatOutcome is how one request ended, in exactly one class.
type ChatOutcome struct {
	Class string
	// Sub refines lost (reset, truncated_silent, done_after_truncation,
	// bad_json, bad_grammar, missing_retry_after, bad_content) and
	// stream_error (precommit when no content event came before the error).
	Sub        string
	Status     int
	Code       string // error.code of a typed or in-band error
	RetryAfter string
	RequestID  string // X-Switchyard-Request-Id
	Events     int    // content events received
	Content    string // concatenated content
	Err        error
	Elapsed    time.Duration
}

func (o ChatOutcome) String() string {
	s := fmt.Sprintf("%s/%s status=%d code=%q events=%d id=%s", o.Class, o.Sub, o.Status, o.Code, o.Events, o.RequestID)
	if o.Err != nil {
		s += " err=" + o.Err.Error()
	}
	return s
}

// ChatBody is the request body of call.
func (call ChatCall) ChatBody() string {
	text := "chaos request"
	if call.Nonce != "" {
		text += " sy-nonce:" + call.Nonce
	}
	b, _ := json.Marshal(map[string]any{"model": call.Model, "stream": call.Stream,
		"messages": []map[string]string{{"role": "user", "content": text}}})
	return string(b)
}

// DoChat sends call and classifies the answer strictly: a stream counts as
// ok only when every event parses, the content is complete, exactly one
// finish_reason came and [DONE] is last; a stream_error is exactly one
// in-band error event, last, with no [DONE]; a typed error is a non-2xx
// JSON envelope with error.code (and Retry-After ≥ 1 on 429 and 503).
// Anything else is lost, with a subtype.
func DoChat(ctx context.Context, client *http.Client, call ChatCall) (out ChatOutcome) {
	start := time.Now()
	defer func() { out.Elapsed = time.Since(start) }()
	req, err := http.NewRequestWithContext(ctx, "POST", call.BaseURL+"/v1/chat/completions", strings.NewReader(call.ChatBody()))
	if err != nil {
		return ChatOutcome{Class: ClassLost, Sub: "request", Err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+call.Key)
	resp, err := client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return ChatOutcome{Class: ClassCancelled, Err: err}
		}
		return ChatOutcome{Class: ClassLost, Sub: "reset", Err: err}
	}
	defer resp.Body.Close()
	out.Status = resp.StatusCode
	out.RequestID = resp.Header.Get("X-Switchyard-Request-Id")
	out.RetryAfter = resp.Header.Get("Retry-After")
	if resp.StatusCode != http.StatusOK {
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			return lostOrCancelled(ctx, out, "reset", err)
		}
		var env struct {
			Error *struct {
				Code string `json:"code"`
				Type string `json:"type"`
			} `json:"error"`
		}
		if json.Unmarshal(body, &env) != nil || env.Error == nil || env.Error.Code == "" {
			out.Class, out.Sub, out.Err = ClassLost, "bad_json", fmt.Errorf("non-2xx body %q", truncate(body, 300))
			return out
		}
		out.Code = env.Error.Code
		if resp.StatusCode == 429 || resp.StatusCode == 503 {
			if n, err := strconv.Atoi(out.RetryAfter); err != nil || n < 1 {
				out.Class, out.Sub = ClassLost, "missing_retry_after"
				return out
			}
		}
		out.Class = ClassTypedError
		return out
	}
	if !call.Stream {
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			return lostOrCancelled(ctx, out, "reset", err)
		}
		var cc struct {
			Object  string `json:"object"`
			Choices []struct {
				Message struct {
					Content string `json:"content"`
				} `json:"message"`
			} `json:"choices"`
		}
		if err := json.Unmarshal(body, &cc); err != nil || cc.Object != "chat.completion" || len(cc.Choices) != 1 {
			out.Class, out.Sub, out.Err = ClassLost, "bad_json", fmt.Errorf("body %q", truncate(body, 300))
			return out
		}
		out.Content = cc.Choices[0].Message.Content
		if call.Want != "" && out.Content != call.Want {
			out.Class, out.Sub, out.Err = ClassLost, "bad_content", fmt.Errorf("content %q, want %q", out.Content, call.Want)
			return out
		}
		out.Class = ClassOK
		return out
	}
	return readChatStream(ctx, resp.Body, call, out)
}

func readChatStream(ctx context.Context, body io.Reader, call ChatCall, out ChatOutcome) ChatOutcome {
	var (
		text               strings.Builder
		done, errLast      bool
		errEvents, finish  int
		afterDone, badJSON bool
	)
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		data, ok := strings.CutPrefix(line, "data:")
		if !ok {
			continue // comments (keepalives), event: lines, blank separators
		}
		data = strings.TrimPrefix(data, " ")
		if done {
			afterDone = true
		}
		if data == "[DONE]" {
			done = true
			errLast = false
			continue
		}
		var ev struct {
			Error *struct {
				Code    string `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
			Choices []struct {
				Delta struct {
					Content string `json:"content"`
				} `json:"delta"`
				FinishReason *string `json:"finish_reason"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			badJSON = true
			continue
		}
		errLast = ev.Error != nil
		if ev.Error != nil {
			errEvents++
			out.Code = ev.Error.Code
			continue
		}
		for _, c := range ev.Choices {
			if c.Delta.Content != "" {
				out.Events++
				text.WriteString(c.Delta.Content)
			}
			if c.FinishReason != nil && *c.FinishReason != "" {
				finish++
			}
		}
	}
	out.Content = text.String()
	if err := sc.Err(); err != nil {
		return lostOrCancelled(ctx, out, "reset", err)
	}
	switch {
	case badJSON:
		out.Class, out.Sub = ClassLost, "bad_json"
	case afterDone:
		out.Class, out.Sub = ClassLost, "bad_grammar"
	case done && errEvents == 0:
		switch {
		case call.Want != "" && out.Content != call.Want:
			out.Class, out.Sub, out.Err = ClassLost, "done_after_truncation", fmt.Errorf("content %q, want %q", out.Content, call.Want)
		case finish != 1:
			out.Class, out.Sub, out.Err = ClassLost, "bad_grammar", fmt.Errorf("%d finish_reason events", finish)
		default:
			out.Class = ClassOK
		}
	case !done && errEvents == 1 && errLast:
		out.Class = ClassStreamError
		if out.Events == 0 {
			out.Sub = "precommit"
		}
		if call.Want != "" && !strings.HasPrefix(call.Want, out.Content) {
			out.Class, out.Sub, out.Err = ClassLost, "bad_content", fmt.Errorf("partial content %q is not a prefix of %q", out.Content, call.Want)
		}
	case !done && errEvents == 0:
		out.Class, out.Sub = ClassLost, "truncated_silent"
	default:
		out.Class, out.Sub, out.Err = ClassLost, "bad_grammar", fmt.Errorf("done=%v error events=%d error last=%v", done, errEvents, errLast)
	}
	return out
}

func lostOrCancelled(ctx context.Context, out ChatOutcome, sub string, err error) ChatOutcome {
	out.Err = err
	if ctx.Err() != nil || errors.Is(err, context.Canceled) {
		out.Class = ClassCancelled
		return out
	}
	out.Class, out.Sub = ClassLost, sub
	return out
}

func truncate(b []byte, n int) []byte {
	if len(b) <= n {
		return b
	}
	return append(bytes.Clone(b[:n]), "…"...)
}
