package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"switchyard/internal/fakeupstream"
)

// adminGet GETs a management route of the gateway with the bench's manage key.
func (t *topology) adminGet(ctx context.Context, route string) ([]byte, error) {
	return call(ctx, http.MethodGet, t.gatewayURL+route, t.adminKey, nil, http.StatusOK)
}

// call sends body (nil: none) with method to url, with a bearer token when
// auth is set, and returns the answer's body (at most 8 MiB) unless the
// status is not want.
func call(ctx context.Context, method, url, auth string, body []byte, want int) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return nil, err
	}
	if auth != "" {
		req.Header.Set("Authorization", "Bearer "+auth)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err == nil && resp.StatusCode != want {
		err = fmt.Errorf("%s %s: %d %s", method, req.URL.Path, resp.StatusCode, bytes.TrimSpace(b[:min(len(b), 300)]))
	}
	return b, err
}

// gatewayMetrics scrapes the gateway's /metrics: each metric name with the
// sum of its samples over all label sets.
func (t *topology) gatewayMetrics(ctx context.Context) (map[string]float64, error) {
	b, err := t.adminGet(ctx, "/metrics")
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		sp := strings.LastIndexByte(line, ' ')
		if sp < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[sp+1:], 64)
		if err != nil {
			continue
		}
		name := line[:sp]
		if i := strings.IndexByte(name, '{'); i >= 0 {
			name = name[:i]
		}
		out[name] += v
	}
	return out, sc.Err()
}

// reportRequestLog puts the gateway's request-log counters into the report
// and warns when entries were dropped or batches failed.
func (t *topology) reportRequestLog(ctx context.Context, rep *report) {
	if !t.procs {
		st := t.srv.RequestLogStats()
		rep.detail("request_log", st)
		if st.Dropped > 0 || st.FailedBatches > 0 {
			rep.warn("request log dropped %d entries, %d failed batches", st.Dropped, st.FailedBatches)
		}
		return
	}
	m, err := t.gatewayMetrics(ctx)
	if err != nil {
		rep.warn("request log counters: %v", err)
		return
	}
	st := map[string]float64{}
	for k, v := range m {
		if strings.HasPrefix(k, "switchyard_request_log_") {
			st[k] = v
		}
	}
	rep.detail("request_log", st)
	if d := st["switchyard_request_log_dropped_total"]; d > 0 {
		rep.warn("request log dropped %.0f entries (since the last gateway start)", d)
	}
}

// scriptFail makes connection keyFailA answer 503 (fail) or healthy again.
func (t *topology) scriptFail(ctx context.Context, fail bool) error {
	step := fakeupstream.Step{}
	if fail {
		step = fakeupstream.Step{Status: http.StatusServiceUnavailable, ErrorMessage: "bench: injected 503"}
	}
	if !t.procs {
		t.fu.Script(keyFailA, step)
		return nil
	}
	sf := fakeupstream.ScriptFile{Scripts: []fakeupstream.ScriptEntry{{Key: keyFailA, Model: "*", Script: fakeupstream.Script{Steps: []fakeupstream.Step{step}}}}}
	body, err := json.Marshal(sf)
	if err != nil {
		return err
	}
	_, err = call(ctx, http.MethodPost, t.directURL+"/_fake/script", "", body, http.StatusNoContent)
	return err
}
