package fakeupstream_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"switchyard/internal/fakeupstream"
)

func TestJSONModeFaults(t *testing.T) {
	tests := []struct {
		name     string
		step     fakeupstream.Step
		wantEnd  fakeupstream.End
		checkErr func(error) bool // body read error
		check    func(status int, body []byte) bool
	}{
		{"cut eof", fakeupstream.Step{Fault: fakeupstream.FaultCut, At: 3}, fakeupstream.EndCut,
			func(err error) bool { return err == nil }, func(s int, b []byte) bool { return s == 200 && len(b) > 0 && !json.Valid(b) }},
		{"cut fin", fakeupstream.Step{Fault: fakeupstream.FaultCut, CutMode: fakeupstream.CutFIN}, fakeupstream.EndCut,
			func(err error) bool { return errors.Is(err, io.ErrUnexpectedEOF) }, func(s int, b []byte) bool { return s == 200 }},
		{"error event", fakeupstream.Step{Fault: fakeupstream.FaultErrorEvent, ErrorMessage: "boom"}, fakeupstream.EndErrorEventSent,
			func(err error) bool { return err == nil }, func(s int, b []byte) bool { return s == 200 && strings.Contains(string(b), `"boom"`) }},
		{"stall released", fakeupstream.Step{Fault: fakeupstream.FaultStall, StallFor: 10 * time.Millisecond}, fakeupstream.EndStallReleased,
			func(err error) bool { return err == nil }, func(s int, b []byte) bool { return s == 200 && len(b) == 0 }},
		{"forced sse", fakeupstream.Step{Stream: fakeupstream.StreamSSE, Events: 2}, fakeupstream.EndCompleted,
			func(err error) bool { return err == nil }, func(s int, b []byte) bool { return strings.HasSuffix(string(b), "data: [DONE]\n\n") }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fu := fakeupstream.Start(t)
			fu.Script("fk", tc.step)
			resp := newClient(t, fu).must("POST", "/v1/chat/completions", "fk", openAIReq("m", false, false, "x"))
			b, err := io.ReadAll(resp.Body)
			if !tc.checkErr(err) || !tc.check(resp.StatusCode, b) {
				t.Errorf("status %d err %v body %q", resp.StatusCode, err, b)
			}
			if h := onlyHit(t, fu); h.End != tc.wantEnd {
				t.Errorf("hit %+v", h)
			}
		})
	}
}

func TestForcedJSONOnStreamRequest(t *testing.T) {
	fu := fakeupstream.Start(t)
	fu.Script("fk", fakeupstream.Step{Stream: fakeupstream.StreamJSON, FinishReason: "length"})
	resp := newClient(t, fu).must("POST", "/v1/messages", "fk", anthropicReq("m", true, "x"))
	var msg struct {
		StopReason string `json:"stop_reason"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&msg); err != nil || msg.StopReason != "length" ||
		!strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		t.Errorf("err %v msg %+v", err, msg)
	}
}

func TestServerOptions(t *testing.T) {
	fu := fakeupstream.Start(t,
		fakeupstream.WithContent("xyz"), fakeupstream.WithEvents(3), fakeupstream.WithEventGap(time.Millisecond),
		fakeupstream.WithLatency(time.Millisecond), fakeupstream.WithModels("only"), fakeupstream.WithSeed(9),
		fakeupstream.WithErrorLog(nil))
	c := newClient(t, fu)
	resp := c.must("POST", "/v1/chat/completions", "fk", openAIReq("m", true, false, "x"))
	evs, err := newSSE(resp.Body).readAll()
	if err != nil {
		t.Fatal(err)
	}
	if d := openAIDeltas(t, evs); !slices.Equal(d, []string{"x", "y", "z"}) {
		t.Errorf("deltas %q", d)
	}
	h := onlyHit(t, fu)
	// Latency before headers, then two gaps: all real waits, so lower bounds only.
	if h.THeaders.Sub(h.TStart) < time.Millisecond || h.TEnd.Sub(h.THeaders) < 2*time.Millisecond {
		t.Errorf("timings %v %v", h.THeaders.Sub(h.TStart), h.TEnd.Sub(h.THeaders))
	}
	models := c.must("GET", "/v1/models", "fk", "")
	var list struct{ Data []struct{ ID string } }
	json.NewDecoder(models.Body).Decode(&list)
	if len(list.Data) != 1 || list.Data[0].ID != "only" {
		t.Errorf("models %+v", list)
	}
}

func TestScenarios(t *testing.T) {
	chaos, err := fakeupstream.Scenario(fakeupstream.ScenarioChaos, 5, 0)
	if err != nil || chaos.Default == nil || chaos.Default.Random.Rate != 0.3 || chaos.Default.Random.Seed != 5 {
		t.Errorf("chaos %+v %v", chaos, err)
	}
	healthy, err := fakeupstream.Scenario(fakeupstream.ScenarioHealthy, 5, 0)
	if err != nil || healthy.Default != nil || len(healthy.Scripts) != 0 {
		t.Errorf("healthy %+v %v", healthy, err)
	}
	if faulty, _ := fakeupstream.Scenario("", 5, 0.1); faulty.Default == nil || faulty.Default.Random.Rate != 0.1 {
		t.Errorf("healthy with a fault rate %+v", faulty)
	}
	if _, err := fakeupstream.Scenario(fakeupstream.ScenarioChaos, 5, 1.5); err == nil {
		t.Error("fault rate 1.5 accepted")
	}
	mix := fakeupstream.DefaultMix()
	for _, name := range fakeupstream.FaultNames() {
		if mix[name] != 1 {
			t.Errorf("DefaultMix[%q] = %v", name, mix[name])
		}
	}
	if len(mix) != len(fakeupstream.FaultNames()) {
		t.Errorf("DefaultMix has %d names, FaultNames %d", len(mix), len(fakeupstream.FaultNames()))
	}
}

func TestLoadScriptFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "script.json")
	if err := os.WriteFile(path, []byte(`{"scripts":[{"key":"fk","steps":[{"status":429,"retry_after":"7"}]}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	sf, err := fakeupstream.LoadScriptFile(path)
	if err != nil {
		t.Fatal(err)
	}
	fu := fakeupstream.Start(t)
	if err := fu.Apply(sf); err != nil {
		t.Fatal(err)
	}
	if s, _ := newClient(t, fu).chat("fk", "m"); s != 429 {
		t.Errorf("status %d", s)
	}
	if _, err := fakeupstream.LoadScriptFile(filepath.Join(t.TempDir(), "missing.json")); err == nil {
		t.Error("missing file loaded")
	}
}

func TestEmbeddingTokenInputs(t *testing.T) {
	fu := fakeupstream.Start(t)
	c := newClient(t, fu)
	for body, n := range map[string]int{
		`{"model":"e","input":[1,2,3]}`:       1,
		`{"model":"e","input":[[1,2],[3,4]]}`: 2,
	} {
		resp := c.must("POST", "/v1/embeddings", "fk", body)
		var got struct{ Data []any }
		if err := json.NewDecoder(resp.Body).Decode(&got); err != nil || len(got.Data) != n {
			t.Errorf("%s: %d vectors, err %v", body, len(got.Data), err)
		}
	}
}

// failingTB is a TB whose test has failed, to exercise Start's artifact cleanup.
type failingTB struct {
	*testing.T
	cleanups []func()
}

func (f *failingTB) Cleanup(fn func()) { f.cleanups = append(f.cleanups, fn) }
func (f *failingTB) Failed() bool      { return true }

func TestArtifactsOnFailure(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("SWITCHYARD_ARTIFACTS", dir)
	ft := &failingTB{T: t}
	fu := fakeupstream.Start(ft)
	c := newClient(t, fu)
	c.chat("sk-secret-in-artifact", "m")
	if _, err := fu.WaitHits(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	for _, fn := range ft.cleanups {
		fn()
	}
	path := filepath.Join(dir, "TestArtifactsOnFailure-fakeupstream-hits.jsonl")
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	lines := 0
	for sc.Scan() {
		lines++
		if !json.Valid(sc.Bytes()) || strings.Contains(sc.Text(), "sk-secret-in-artifact") {
			t.Errorf("artifact line %q", sc.Text())
		}
	}
	if lines != 1 {
		t.Errorf("%d artifact lines, want 1", lines)
	}
}
