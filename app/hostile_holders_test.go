package app_test

import (
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"switchyard/internal/fakeupstream"
	"switchyard/internal/testkit"
)

// TestHostileBodyHoldersUnderLoad (issue 17 item 1, wiring): connections
// that send complete headers and then no body, or a body at a trickle, on
// /v1, /login, /api and /healthz, are all closed once the first-byte
// deadline (and the minimum rate) runs out, while normal traffic is served
// next to them, and the goroutines they held come back. Before, 200 of 200
// such sockets stayed open 30 s and more (goroutines 13 → 214) and the
// trickle variant outlived 90 s.
//
// By default 50 holders and 50 tricklers with a 2 s first-byte deadline;
// SWITCHYARD_LONG=1 runs the review's 200 + 200 for 15 s against the
// production defaults (10 s to the first byte, 1 KiB/s). Latencies are
// reported, not asserted: on a shared 2-core machine they measure the
// neighbours as much as the gateway.
func TestHostileBodyHoldersUnderLoad(t *testing.T) {
	n, window, trickleGap := 50, 6*time.Second, 250*time.Millisecond
	env := map[string]string{"SWITCHYARD_BODY_FIRST_BYTE_TIMEOUT": "2s", "SWITCHYARD_BODY_TIMEOUT": "4s", "SWITCHYARD_CLIENT_BODY_TIMEOUT": "6s"}
	firstByte := 2 * time.Second
	if testkit.IsLong() {
		n, window, trickleGap, firstByte = 200, 15*time.Second, time.Second, 10*time.Second
		env = map[string]string{"SWITCHYARD_BODY_FIRST_BYTE_TIMEOUT": "10s", "SWITCHYARD_BODY_TIMEOUT": "30s", "SWITCHYARD_CLIENT_BODY_TIMEOUT": "120s"}
	}
	env["SWITCHYARD_BODY_MIN_RATE"] = "1024"
	e := startHostileEnv(t, env, true)
	heads := []string{
		"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nAuthorization: Bearer " + e.client + "\r\nContent-Length: 1000\r\n\r\n",
		"POST /login HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 1000\r\n\r\n",
		"POST /api/keys HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nAuthorization: Bearer " + e.manage + "\r\nContent-Length: 1000\r\n\r\n",
		"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 1000\r\n\r\n",
	}
	// Warm up every path once, then take the goroutine baseline.
	e.chat("fake/m1", false)
	e.do("GET", "/healthz", "")
	e.hc.CloseIdleConnections()
	baseline := settledGoroutines()

	start := time.Now()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var closeTimes []time.Duration
	open := 0
	var peakGoroutines atomic.Int64
	for i := range 2 * n {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			c := e.rawConn(heads[i%len(heads)])
			defer c.Close()
			if i >= n { // tricklers: one body byte per gap
				go func() {
					for {
						time.Sleep(trickleGap)
						if _, err := c.Write([]byte("x")); err != nil {
							return
						}
					}
				}()
			}
			d, closed := closedWithin(c, start, firstByte+5*time.Second)
			mu.Lock()
			defer mu.Unlock()
			closeTimes = append(closeTimes, d)
			if !closed {
				open++
			}
		}(i)
	}
	// Normal traffic for the whole window, next to the holders.
	var lat []time.Duration
	var failed atomic.Int64
	var lmu sync.Mutex
	var traffic sync.WaitGroup
	stop := time.Now().Add(window)
	for w := range 4 {
		traffic.Add(1)
		go func(w int) {
			defer traffic.Done()
			for time.Now().Before(stop) {
				t0 := time.Now()
				var st int
				switch w % 3 {
				case 0:
					st, _ = e.chat("fake/m1", w%2 == 0)
				case 1:
					st, _, _ = e.do("GET", "/healthz", "")
				default:
					st, _, _ = e.do("GET", "/api/connections", "", "Authorization", "Bearer "+e.manage)
				}
				d := time.Since(t0)
				if st != 200 {
					failed.Add(1)
				}
				lmu.Lock()
				lat = append(lat, d)
				lmu.Unlock()
				if g := int64(runtime.NumGoroutine()); g > peakGoroutines.Load() {
					peakGoroutines.Store(g)
				}
			}
		}(w)
	}
	traffic.Wait()
	wg.Wait()
	e.hc.CloseIdleConnections()
	// Bounded poll: the goroutines of the closed connections end.
	after := baseline
	testkit.PollUntil(10*time.Second, func() bool { after = runtime.NumGoroutine(); return after <= baseline+10 })

	sort.Slice(closeTimes, func(i, j int) bool { return closeTimes[i] < closeTimes[j] })
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	pct := func(p float64) time.Duration {
		if len(lat) == 0 {
			return 0
		}
		return lat[min(len(lat)-1, int(p*float64(len(lat))))].Round(100 * time.Microsecond)
	}
	t.Logf("%d holders + %d tricklers over %v (first-byte deadline %v): %d still open, closed between %v and %v; "+
		"normal traffic %d requests, %d failed, p50 %v, p99 %v; goroutines %d before, peak %d, %d after",
		n, n, window, firstByte, open, closeTimes[0].Round(10*time.Millisecond), closeTimes[len(closeTimes)-1].Round(10*time.Millisecond),
		len(lat), failed.Load(), pct(0.5), pct(0.99), baseline, peakGoroutines.Load(), after)
	if open > 0 {
		t.Errorf("%d of %d sockets were still open %v after they connected", open, 2*n, firstByte+5*time.Second)
	}
	if failed.Load() > 0 {
		t.Errorf("%d normal requests failed next to the holders", failed.Load())
	}
	if after > baseline+10 {
		t.Errorf("goroutines %d after, baseline %d", after, baseline)
	}
}

// settledGoroutines is the goroutine count once it stops falling.
func settledGoroutines() int {
	n := runtime.NumGoroutine()
	for range 20 {
		time.Sleep(50 * time.Millisecond)
		m := runtime.NumGoroutine()
		if m >= n {
			return m
		}
		n = m
	}
	return n
}

// TestHostileLongStreamOutlivesBodyDeadlines (issue 17 item 1): the body
// deadline bounds the request only; a streamed response lasting longer
// than every body limit runs to its end ([DONE]), because the deadline is
// cleared when the body has been read.
func TestHostileLongStreamOutlivesBodyDeadlines(t *testing.T) {
	e := startHostileEnv(t, map[string]string{"SWITCHYARD_BODY_FIRST_BYTE_TIMEOUT": "1s", "SWITCHYARD_BODY_TIMEOUT": "1s", "SWITCHYARD_CLIENT_BODY_TIMEOUT": "1s"}, true)
	e.connection("slow", "sk-slow-stream-0001", e.fu.URL()+"/v1")
	e.fu.Script("sk-slow-stream-0001", fakeupstream.Step{Events: 12, EventGap: 250 * time.Millisecond})
	start := time.Now()
	st, b := e.chat("slow/m1", true)
	took := time.Since(start)
	if st != 200 || !strings.Contains(string(b), "[DONE]") || strings.Count(string(b), "data:") < 12 {
		t.Fatalf("stream of %v: %d %.300s", took, st, b)
	}
	if took < 2*time.Second {
		t.Fatalf("the stream took %v, not longer than the 1 s body limits", took)
	}
	t.Logf("a %v stream ran to [DONE] under 1 s body deadlines", took.Round(10*time.Millisecond))
}
