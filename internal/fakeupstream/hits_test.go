package fakeupstream_test

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sync"
	"testing"
	"time"

	"switchyard/internal/fakeupstream"
)

func TestHitLogConcurrent(t *testing.T) {
	fu := fakeupstream.Start(t)
	fu.Script("fk-bad", fakeupstream.Step{Status: 500})
	c := newClient(t, fu)
	const n = 40
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			key, path, body := "fk-good", "/v1/chat/completions", openAIReq(fmt.Sprintf("m%d", i%4), i%2 == 0, true, "x")
			if i%5 == 0 {
				key = "fk-bad"
			}
			if i%3 == 0 {
				path, body = "/v1/messages", anthropicReq("claude", i%2 == 0, "x")
			}
			resp, err := c.send(context.Background(), "POST", path, key, body)
			if err != nil {
				t.Error(err)
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		})
	}
	wg.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	// Every handler ends shortly after its client has read the body; wait for all of them.
	if err := fu.WaitUntil(ctx, func(hits []fakeupstream.Hit) bool {
		return len(hits) == n && !slices.ContainsFunc(hits, func(h fakeupstream.Hit) bool { return !h.Ended() })
	}); err != nil {
		t.Fatal(err)
	}
	hits := fu.Hits()
	for i, h := range hits {
		if h.Seq != int64(i+1) {
			t.Errorf("hit %d has seq %d", i, h.Seq)
		}
		if h.End != fakeupstream.EndCompleted {
			t.Errorf("hit %+v", h)
		}
	}
	if fu.Count() != n || fu.CountFor("fk-bad") != 8 || len(fu.HitsFor("fk-good")) != n-8 ||
		fu.CountWhere(func(h fakeupstream.Hit) bool { return h.Status == 500 }) != 8 ||
		fu.CountWhere(func(h fakeupstream.Hit) bool { return h.Format == "anthropic" }) != 14 {
		t.Errorf("counts: total %d bad %d", fu.Count(), fu.CountFor("fk-bad"))
	}
	fu.Reset()
	if fu.Count() != 0 || len(fu.Hits()) != 0 {
		t.Errorf("Reset left %d hits", fu.Count())
	}
	c.chat("fk-good", "m")
	if h := fu.Hits(); len(h) != 1 || h[0].Seq != n+1 {
		t.Errorf("after Reset, seq continues: %+v", h)
	}
}

func TestNonceAttempts(t *testing.T) {
	fu := fakeupstream.Start(t)
	c := newClient(t, fu)
	for range 3 {
		resp := c.must("POST", "/v1/messages", "fk", anthropicReq("m", false, "please sy-nonce:DEADbeef01 thanks"))
		resp.Body.Close()
	}
	c.chat("fk", "m")
	hits := fu.HitsForNonce("deadbeef01")
	if len(hits) != 3 {
		t.Fatalf("%d hits for nonce", len(hits))
	}
	for i, h := range hits {
		if h.Attempt != i+1 || !h.Reproducible {
			t.Errorf("hit %+v", h)
		}
	}
	if last := fu.Hits()[3]; last.Nonce != "" || last.Attempt != 0 || last.Reproducible {
		t.Errorf("hit without nonce %+v", last)
	}
	fu.Reset()
	c.must("POST", "/v1/messages", "fk", anthropicReq("m", false, "sy-nonce:deadbeef01")).Body.Close()
	if h := fu.Hits(); h[0].Attempt != 1 {
		t.Errorf("Reset should forget attempt counts: %+v", h[0])
	}
}

func TestHitLogModes(t *testing.T) {
	ring := fakeupstream.Start(t, fakeupstream.WithHitLog(fakeupstream.HitLogRing(3)))
	c := newClient(t, ring)
	for range 5 {
		c.chat("fk", "m")
	}
	var seqs []int64
	for _, h := range ring.Hits() {
		seqs = append(seqs, h.Seq)
	}
	if !slices.Equal(seqs, []int64{3, 4, 5}) {
		t.Errorf("ring kept %v", seqs)
	}
	if _, err := ring.WaitEnded(t.Context(), 1); err == nil {
		t.Error("WaitEnded on an evicted hit should fail")
	}

	off := fakeupstream.Start(t, fakeupstream.WithHitLog(fakeupstream.HitLogOff))
	c = newClient(t, off)
	if s, _ := c.chat("fk", "m"); s != 200 || off.Count() != 0 {
		t.Errorf("off: status %d, %d hits", s, off.Count())
	}

	for in, want := range map[string]fakeupstream.HitLog{"full": fakeupstream.HitLogFull, "off": fakeupstream.HitLogOff, "ring:7": 7} {
		if got, err := fakeupstream.ParseHitLog(in); err != nil || got != want {
			t.Errorf("ParseHitLog(%q) = %v, %v", in, got, err)
		}
	}
	for _, bad := range []string{"ring:0", "ring:x", "sometimes"} {
		if _, err := fakeupstream.ParseHitLog(bad); err == nil {
			t.Errorf("ParseHitLog(%q) accepted", bad)
		}
	}
}

func TestWaitUntilSeesProgress(t *testing.T) {
	fu := fakeupstream.Start(t)
	fu.Script("fk", fakeupstream.Step{Events: 5, Fault: fakeupstream.FaultStall, At: 3})
	c := newClient(t, fu)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	resp, err := c.send(ctx, "POST", "/v1/chat/completions", "fk", openAIReq("m", true, false, "x"))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	wctx, wcancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer wcancel()
	// No client read needed: the fake's own progress is observable.
	if err := fu.WaitUntil(wctx, func(h []fakeupstream.Hit) bool { return len(h) == 1 && h[0].EventsSent == 3 }); err != nil {
		t.Fatal(err)
	}
	done, ok := fu.Ended(1)
	if !ok {
		t.Fatal("hit 1 unknown")
	}
	select {
	case <-done:
		t.Fatal("stalled handler already ended")
	default:
	}
	cancel()
	select {
	case <-done:
	case <-time.After(time.Second):
		t.Fatal("handler still running 1 s after the client left")
	}
	if h, _ := fu.Hit(1); h.End != fakeupstream.EndClientCancelled || h.Duration() <= 0 {
		t.Errorf("hit %+v", h)
	}
}
