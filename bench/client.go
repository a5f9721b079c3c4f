package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"syscall"
	"time"
)

// newClient is a keep-alive client with room for n idle connections per host.
func newClient(n int) *http.Client {
	return &http.Client{Transport: &http.Transport{
		Proxy:               nil, // loopback only, never through an environment proxy
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        n,
		MaxIdleConnsPerHost: n,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}}
}

// prompt makes the request body about 530 bytes, the payload size of 60-quality §5.2.
const prompt = "You are a benchmark. Answer with a short greeting. This text pads the request to a realistic size " +
	"for a small chat completion: a system prompt, one user turn, and a few parameters. Nothing in it matters " +
	"to the fake upstream, which answers deterministically whatever it is asked."

func chatBody(model string, stream bool, user string) []byte {
	s := ""
	if stream {
		s = `"stream":true,`
	}
	return []byte(`{"model":"` + model + `",` + s + `"temperature":0.2,"max_tokens":64,"messages":[{"role":"system","content":"` +
		prompt + `"},{"role":"user","content":"hello ` + user + `"}]}`)
}

func newRequest(ctx context.Context, p *path, body []byte, session string) *http.Request {
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, p.url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", p.auth)
	if session != "" {
		req.Header.Set("X-Session-Id", session)
	}
	return req
}

// doJSON sends one non-stream request and reads the whole answer.
func doJSON(ctx context.Context, cl *http.Client, p *path, body []byte, session string) (time.Duration, error) {
	start := time.Now()
	resp, err := cl.Do(newRequest(ctx, p, body, session))
	if err != nil {
		return 0, err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	d := time.Since(start)
	if err != nil {
		return d, err
	}
	if resp.StatusCode != http.StatusOK {
		return d, fmt.Errorf("%w %d", errStatus, resp.StatusCode)
	}
	return d, nil
}

type streamResult struct {
	events int           // content events received
	ttfb   time.Duration // to the first content event
	total  time.Duration
	done   bool // [DONE] seen
	err    error
}

var contentKey = []byte(`"content":"`)

// isContent reports a chunk with a non-empty delta content.
func isContent(line []byte) bool {
	i := bytes.Index(line, contentKey)
	return i >= 0 && i+len(contentKey) < len(line) && line[i+len(contentKey)] != '"'
}

// streamOnce sends a stream request and reads it to the end. With
// onFirst set, it is called at the first content event and the stream is
// then held open (reading) until ctx ends.
func streamOnce(ctx context.Context, cl *http.Client, p *path, body []byte, session string, _ int) streamResult {
	return streamRead(ctx, cl, p, body, session, nil)
}

func streamRead(ctx context.Context, cl *http.Client, p *path, body []byte, session string, onFirst func()) streamResult {
	var r streamResult
	start := time.Now()
	resp, err := cl.Do(newRequest(ctx, p, body, session))
	if err != nil {
		r.err = err
		return r
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		io.Copy(io.Discard, resp.Body)
		r.err = fmt.Errorf("%w %d", errStatus, resp.StatusCode)
		return r
	}
	br := bufio.NewReaderSize(resp.Body, 4096)
	for {
		line, err := br.ReadSlice('\n')
		if len(line) > 6 && bytes.HasPrefix(line, []byte("data: ")) {
			if bytes.HasPrefix(line[6:], []byte("[DONE]")) {
				r.done = true
			} else if isContent(line) {
				if r.events == 0 {
					r.ttfb = time.Since(start)
					if onFirst != nil {
						onFirst()
					}
				}
				r.events++
			}
		}
		if err != nil {
			r.total = time.Since(start)
			if err != io.EOF && (onFirst == nil || ctx.Err() == nil) {
				r.err = err
			}
			if err == io.EOF && !r.done {
				r.err = fmt.Errorf("stream ended without [DONE] after %d events", r.events)
			}
			return r
		}
	}
}

// --- statistics ---

func median(v []float64) float64 { return percentile(v, 50) }

// percentile is the nearest-rank percentile of v (v is not modified).
func percentile(v []float64, p float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	rank := int(p/100*float64(len(s))+0.999999) - 1
	rank = max(0, min(rank, len(s)-1))
	return s[rank]
}

// iqr is [p25, p75] of v.
func iqr(v []float64) [2]float64 { return [2]float64{percentile(v, 25), percentile(v, 75)} }

func durMs(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// --- process measurements ---

// cpuTime is this process's user + system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
