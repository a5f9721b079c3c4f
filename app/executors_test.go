package app_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"switchyard/internal/fakeupstream"
	"switchyard/services"
)

// hitMessages decodes the chat messages an upstream request carried.
func hitMessages(t *testing.T, h fakeupstream.Hit) (msgs []struct{ Role, Content string }, stream bool) {
	t.Helper()
	var b struct {
		Messages []struct{ Role, Content string }
		Stream   bool
	}
	if err := json.Unmarshal(h.Body, &b); err != nil {
		t.Fatalf("hit body %s: %v", h.Body, err)
	}
	return b.Messages, b.Stream
}

func hitsForModel(f *gwFixture, model string) []fakeupstream.Hit {
	var out []fakeupstream.Hit
	for _, h := range f.fu.Hits() {
		if h.Model == model {
			out = append(out, h)
		}
	}
	return out
}

// Fusion (30-routing §10.18): three panel members, one stalls past the
// straggler grace; the judge (the first panel entry) gets the two answers
// as system context and its answer is the response.
func TestFusionJudgeMergesQuorumAndCancelsStraggler(t *testing.T) {
	f := newGW(t, "fk-a")
	f.fu.ScriptModel("fk-a", "m1", fakeupstream.Step{Content: "alpha"}, fakeupstream.Step{Content: "merged"})
	f.fu.ScriptModel("fk-a", "m2", fakeupstream.Step{Content: "beta"})
	f.fu.ScriptModel("fk-a", "m3", fakeupstream.Step{Content: "late", Delay: 10 * time.Second})
	mkCombo(t, f, services.ComboInput{Name: "panel", Strategy: "fusion",
		Targets: []services.Target{{Provider: "fake", Model: "m1"}, {Provider: "fake", Model: "m2"}, {Provider: "fake", Model: "m3"}},
		Config:  map[string]any{"fusion": map[string]any{"stragglerGraceMs": float64(50)}}})
	start := time.Now()
	resp, b := postKey(t, f.url+"/v1/chat/completions", f.key, comboBody("panel"))
	if resp.StatusCode != 200 || !strings.Contains(string(b), "merged") {
		t.Fatalf("fusion: %d %s", resp.StatusCode, b)
	}
	if time.Since(start) > 5*time.Second {
		t.Fatal("the straggler was not cancelled")
	}
	m1 := hitsForModel(f, "m1")
	if len(m1) != 2 {
		t.Fatalf("m1 hits %d, want panel + judge", len(m1))
	}
	msgs, _ := hitMessages(t, m1[1])
	if len(msgs) != 2 || msgs[0].Role != "system" || !strings.Contains(msgs[0].Content, "Candidate answers") ||
		!strings.Contains(msgs[0].Content, "alpha") || !strings.Contains(msgs[0].Content, "beta") ||
		!strings.Contains(msgs[0].Content, "Answer 2:") || strings.Contains(msgs[0].Content, "late") {
		t.Fatalf("judge messages %+v", msgs)
	}
}

// Fusion with no answer at all ends with the routing error of the last
// failed member; with one answer that answer is returned with a warning.
func TestFusionZeroAndSingleAnswers(t *testing.T) {
	f := newGW(t, "fk-a")
	mkCombo(t, f, services.ComboInput{Name: "panel", Strategy: "fusion",
		Targets: []services.Target{{Provider: "fake", Model: "m1"}, {Provider: "fake", Model: "m2"}}})
	f.fu.Script("fk-a", fakeupstream.Step{Status: 503, Times: 10})
	resp, b := postKey(t, f.url+"/v1/chat/completions", f.key, comboBody("panel"))
	if resp.StatusCode != 503 {
		t.Fatalf("0 answers: %d %s", resp.StatusCode, b)
	}
	f = newGW(t, "fk-a")
	mkCombo(t, f, services.ComboInput{Name: "panel", Strategy: "fusion",
		Targets: []services.Target{{Provider: "fake", Model: "m1"}, {Provider: "fake", Model: "m2"}}})
	f.fu.ScriptModel("fk-a", "m1", fakeupstream.Step{Status: 400, ErrorMessage: "nope"})
	f.fu.ScriptModel("fk-a", "m2", fakeupstream.Step{Content: "only"})
	resp, b = postKey(t, f.url+"/v1/chat/completions", f.key, comboBody("panel"))
	if resp.StatusCode != 200 || !strings.Contains(string(b), "only") || resp.Header.Get("X-Switchyard-Warning") != "fusion_single_answer" {
		t.Fatalf("1 answer: %d %q %s", resp.StatusCode, resp.Header.Get("X-Switchyard-Warning"), b)
	}
}

// Pipeline (30-routing §10.19): each step receives the previous step's
// output with its own prompt; intermediate steps do not stream, the last
// one streams to the client.
func TestPipelineFeedsEachStepThePreviousOutput(t *testing.T) {
	f := newGW(t, "fk-a")
	f.fu.ScriptModel("fk-a", "m1", fakeupstream.Step{Content: "draft-text"})
	f.fu.ScriptModel("fk-a", "m2", fakeupstream.Step{Content: "review-text"})
	mkCombo(t, f, services.ComboInput{Name: "pipe", Strategy: "pipeline",
		Targets: []services.Target{{Provider: "fake", Model: "m1", Prompt: "Draft"}, {Provider: "fake", Model: "m2", Prompt: "Review"},
			{Provider: "fake", Model: "m3"}}})
	resp, b := postKey(t, f.url+"/v1/chat/completions", f.key, `{"model":"pipe","stream":true,"messages":[{"role":"system","content":"be brief"},{"role":"user","content":"write"}]}`)
	if resp.StatusCode != 200 || !strings.Contains(string(b), "[DONE]") {
		t.Fatalf("pipeline: %d %s", resp.StatusCode, b)
	}
	s1, stream1 := hitMessages(t, hitsForModel(f, "m1")[0])
	if stream1 || len(s1) != 3 || s1[0].Content != "Draft" || s1[1].Content != "be brief" || s1[2].Content != "write" {
		t.Fatalf("step 1 got %+v stream %v", s1, stream1)
	}
	s2, stream2 := hitMessages(t, hitsForModel(f, "m2")[0])
	if stream2 || len(s2) != 2 || s2[0].Role != "system" || s2[0].Content != "Review" || s2[1].Role != "user" || s2[1].Content != "draft-text" {
		t.Fatalf("step 2 got %+v stream %v", s2, stream2)
	}
	s3, stream3 := hitMessages(t, hitsForModel(f, "m3")[0])
	if !stream3 || len(s3) != 1 || s3[0].Role != "user" || s3[0].Content != "review-text" {
		t.Fatalf("step 3 got %+v stream %v", s3, stream3)
	}
}

// A failing step ends the pipeline with an error naming it; later steps
// never run.
func TestPipelineStepFailureNamesTheStep(t *testing.T) {
	f := newGW(t, "fk-a")
	f.fu.ScriptModel("fk-a", "m2", fakeupstream.Step{Status: 500, Times: 5})
	mkCombo(t, f, services.ComboInput{Name: "pipe", Strategy: "pipeline",
		Targets: []services.Target{{Provider: "fake", Model: "m1"}, {Provider: "fake", Model: "m2"}, {Provider: "fake", Model: "m3"}},
		Config:  map[string]any{"maxRetries": float64(0)}})
	resp, b := postKey(t, f.url+"/v1/chat/completions", f.key, comboBody("pipe"))
	if resp.StatusCode != 502 || !strings.Contains(string(b), "pipeline step 2 of 3 (fake/m2) failed") || !strings.Contains(string(b), "upstream_error") {
		t.Fatalf("step failure: %d %s", resp.StatusCode, b)
	}
	if n := len(hitsForModel(f, "m3")); n != 0 {
		t.Fatalf("step 3 ran %d times", n)
	}
}
