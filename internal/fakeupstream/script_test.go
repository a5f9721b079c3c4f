package fakeupstream_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"switchyard/internal/fakeupstream"
)

func TestScriptLookupOrder(t *testing.T) {
	fu := fakeupstream.Start(t)
	fu.Script("k1", fakeupstream.Step{Status: 401})
	fu.ScriptModel("k1", "model-x", fakeupstream.Step{Status: 404})
	fu.ScriptModel("*", "model-x", fakeupstream.Step{Status: 500})
	fu.ScriptModel("*", "model-z", fakeupstream.Step{Status: 503})
	c := newClient(t, fu)
	tests := []struct {
		key, model string
		want       int
	}{
		{"k1", "model-x", 404}, // (key, model)
		{"k1", "model-y", 401}, // (key, *)
		{"k1", "model-z", 401}, // (key, *) beats (*, model)
		{"k2", "model-x", 500}, // (*, model)
		{"k2", "model-y", 200}, // default
	}
	for _, tc := range tests {
		if got, _ := c.chat(tc.key, tc.model); got != tc.want {
			t.Errorf("%s/%s: status %d, want %d", tc.key, tc.model, got, tc.want)
		}
	}
	// A default that is not healthy applies to everything unscripted.
	fu.SetDefault(fakeupstream.Script{Steps: []fakeupstream.Step{{Status: 418}}})
	if got, _ := c.chat("k2", "model-y"); got != 418 {
		t.Errorf("default: %d", got)
	}
}

func TestLabels(t *testing.T) {
	const secret = "sk-ant-canary-0123456789abcdef"
	fu := fakeupstream.Start(t)
	fu.Label(secret, "conn-a")
	fu.Script("conn-a", fakeupstream.Step{Status: 403})
	c := newClient(t, fu)
	if got, _ := c.chat(secret, "m"); got != 403 {
		t.Errorf("script by label: status %d", got)
	}
	c.chat("sk-other-secret", "m")
	h := fu.Hits()
	if h[0].KeyLabel != "conn-a" || h[0].Credential != secret || !strings.HasPrefix(h[1].KeyLabel, "key-") {
		t.Errorf("labels %q %q", h[0].KeyLabel, h[1].KeyLabel)
	}
	if len(fu.HitsFor("conn-a")) != 1 || len(fu.HitsFor(secret)) != 1 || fu.CountFor("sk-other-secret") != 1 {
		t.Errorf("HitsFor by label/credential")
	}
	// The JSON hit log (an artifact, swept for secrets) never holds a credential.
	var buf strings.Builder
	if err := fu.WriteHitLog(&buf); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(buf.String(), secret) || strings.Contains(buf.String(), "sk-other-secret") {
		t.Errorf("hit log leaks a credential:\n%s", buf.String())
	}
}

func TestScriptSequencing(t *testing.T) {
	tests := []struct {
		name   string
		script fakeupstream.Script
		want   []int
	}{
		{"repeat_last by default", fakeupstream.Script{Steps: []fakeupstream.Step{{Status: 500, Times: 2}, {Status: 201}}},
			[]int{500, 500, 201, 201, 201}},
		{"cycle", fakeupstream.Script{Steps: []fakeupstream.Step{{Status: 503}, {Times: 2}}, Then: fakeupstream.ThenCycle},
			[]int{503, 200, 200, 503, 200, 200}},
		{"default", fakeupstream.Script{Steps: []fakeupstream.Step{{Status: 429}}, Then: fakeupstream.ThenDefault},
			[]int{429, 418, 418}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fu := fakeupstream.Start(t)
			fu.SetDefault(fakeupstream.Script{Steps: []fakeupstream.Step{{Status: 418}}})
			fu.SetScript("fk", "*", tc.script)
			c := newClient(t, fu)
			var got []int
			for range tc.want {
				s, _ := c.chat("fk", "m")
				got = append(got, s)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("statuses %v, want %v", got, tc.want)
			}
			// Reset rewinds the script.
			fu.Reset()
			if s, _ := c.chat("fk", "m"); s != tc.want[0] {
				t.Errorf("after Reset: %d, want %d", s, tc.want[0])
			}
		})
	}
}

func TestInvalidScriptPanics(t *testing.T) {
	fu := fakeupstream.New()
	defer func() {
		if recover() == nil {
			t.Error("no panic for an unknown preset")
		}
	}()
	fu.Script("k", fakeupstream.Step{Preset: "no_such_preset"})
}

func TestScriptFileJSON(t *testing.T) {
	const doc = `{
	  "labels": {"sk-secret": "conn-a"},
	  "models": ["model-x"],
	  "key_models": {"conn-a": ["only-this"]},
	  "default": {"random": {"seed": 7, "rate": 0.25, "mix": {"server_503": 2, "reset": 1}}},
	  "scripts": [
	    {"key": "fk-limited", "steps": [{"status": 429, "retry_after": "7", "times": 2,
	      "ratelimit": {"style": "openai", "remaining": 0, "reset": "6m0s"}}]},
	    {"key": "*", "model": "slow", "then": "cycle", "steps": [
	      {"delay": "uniform:[100ms,2s]", "cut_after": 3, "cut_mode": "rst", "event_gap": 25, "events": 10},
	      {"first_byte_delay": "1.5s", "stall_after": 0, "stall_for": "2s"},
	      {"reset_before_headers": true},
	      {"malformed_at": 4, "write_size": 1, "retry_after_date": "7s"},
	      {"error_event_at": 2, "error_type": "overloaded_error"},
	      {"empty_200": true}, {"html_502": true}, {"preset": "quota_cn_403", "headers": {"X-Foo": "bar"}}
	    ]}
	  ]
	}`
	sf, err := fakeupstream.ParseScriptFile(strings.NewReader(doc))
	if err != nil {
		t.Fatal(err)
	}
	slow := sf.Scripts[1].Steps
	want := []fakeupstream.Step{
		{Delay: 100 * time.Millisecond, DelayMax: 2 * time.Second, Fault: fakeupstream.FaultCut, At: 3, CutMode: fakeupstream.CutRST,
			EventGap: 25 * time.Millisecond, Events: 10},
		{FirstByteDelay: 1500 * time.Millisecond, Fault: fakeupstream.FaultStall, At: 0, StallFor: 2 * time.Second},
		{Fault: fakeupstream.FaultReset},
		{Fault: fakeupstream.FaultMalformed, At: 4, WriteSize: 1, RetryAfterDate: 7 * time.Second},
		{Fault: fakeupstream.FaultErrorEvent, At: 2, ErrorType: "overloaded_error"},
		{Fault: fakeupstream.FaultEmpty200}, {Fault: fakeupstream.FaultHTML502},
		{Preset: "quota_cn_403", Headers: map[string]string{"X-Foo": "bar"}},
	}
	if !reflect.DeepEqual(slow, want) {
		t.Errorf("steps\n%+v\nwant\n%+v", slow, want)
	}
	if sf.Scripts[1].Then != fakeupstream.ThenCycle || sf.Default.Random.Rate != 0.25 || sf.Scripts[0].Model != "" ||
		sf.Scripts[0].Steps[0].RateLimit.Reset != 6*time.Minute || sf.Scripts[0].Steps[0].Times != 2 {
		t.Errorf("parsed %+v", sf)
	}

	// Round trip: what Marshal writes, Parse reads back identically.
	b, err := json.Marshal(sf)
	if err != nil {
		t.Fatal(err)
	}
	again, err := fakeupstream.ParseScriptFile(strings.NewReader(string(b)))
	if err != nil {
		t.Fatalf("re-parse %s: %v", b, err)
	}
	if !reflect.DeepEqual(again, sf) {
		t.Errorf("round trip differs:\n%s", b)
	}

	bad := map[string]string{
		"unknown field":  `{"scripts":[{"key":"k","steps":[{"stauts":429}]}]}`,
		"two faults":     `{"scripts":[{"key":"k","steps":[{"cut_after":1,"stall_after":2}]}]}`,
		"unknown preset": `{"scripts":[{"key":"k","steps":[{"preset":"nope"}]}]}`,
		"bad then":       `{"scripts":[{"key":"k","then":"forever"}]}`,
		"empty key":      `{"scripts":[{"steps":[{}]}]}`,
		"bad uniform":    `{"scripts":[{"key":"k","steps":[{"delay":"uniform:[2s,1s]"}]}]}`,
		"bad rate":       `{"default":{"random":{"seed":1,"rate":2}}}`,
		"bad mix":        `{"default":{"random":{"seed":1,"rate":0.5,"mix":{"gremlins":1}}}}`,
	}
	for name, doc := range bad {
		if _, err := fakeupstream.ParseScriptFile(strings.NewReader(doc)); err == nil {
			t.Errorf("%s: parsed without error", name)
		}
	}
}

func TestControlRoutes(t *testing.T) {
	fu := fakeupstream.Start(t)
	c := newClient(t, fu)
	post := func(path, body string) int {
		t.Helper()
		resp := must(c.hc.Post(fu.URL()+path, "application/json", strings.NewReader(body)))
		resp.Body.Close()
		return resp.StatusCode
	}
	if s := post("/_fake/script", `{"scripts":[{"key":"fk","steps":[{"status":429,"retry_after":"3"}]}]}`); s != 204 {
		t.Fatalf("POST /_fake/script: %d", s)
	}
	if s, _ := c.chat("fk", "m"); s != 429 {
		t.Errorf("scripted over HTTP: %d", s)
	}
	if s := post("/_fake/script", `{"scripts":[{"key":"fk","steps":[{"preset":"nope"}]}]}`); s != 400 {
		t.Errorf("bad script: %d", s)
	}
	if s := post("/_fake/script?replace=1", `{}`); s != 204 {
		t.Errorf("replace: %d", s)
	}
	if s, _ := c.chat("fk", "m"); s != 200 {
		t.Errorf("after replace: %d", s)
	}

	resp := must(c.hc.Get(fu.URL() + "/_fake/hits"))
	defer resp.Body.Close()
	var hits []fakeupstream.Hit
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		var h fakeupstream.Hit
		if err := json.Unmarshal(sc.Bytes(), &h); err != nil {
			t.Fatalf("hit line %q: %v", sc.Text(), err)
		}
		hits = append(hits, h)
	}
	if len(hits) != 2 || hits[0].Status != 429 || hits[1].Status != 200 || hits[0].Seq != 1 || hits[1].End != fakeupstream.EndCompleted {
		t.Errorf("hits over HTTP: %+v", hits)
	}
	if s := post("/_fake/reset", ""); s != 204 || fu.Count() != 0 {
		t.Errorf("reset: %d, %d hits left", s, fu.Count())
	}
}

// chaosOutcomes sends, for each nonce, `attempts` requests (serially per nonce, nonces in the
// given order and concurrently when parallel) and returns the action of every (nonce, attempt).
func chaosOutcomes(t *testing.T, seed uint64, nonces []string, attempts int, parallel bool) map[string]string {
	t.Helper()
	fu := fakeupstream.Start(t)
	fu.SetDefault(fakeupstream.Script{Random: &fakeupstream.Random{Seed: seed, Rate: 0.5, Mix: map[string]float64{
		"server_503": 1, "rate_limit": 1, "reset": 1, "cut": 1, "malformed": 1, "error_event": 1, "quick_empty": 1},
		Faults: map[string]fakeupstream.Step{"quick_empty": {Fault: fakeupstream.FaultEmpty200}}}})
	c := newClient(t, fu)
	var wg sync.WaitGroup
	for _, n := range nonces {
		run := func() {
			for range attempts {
				resp, err := c.send(context.Background(), "POST", "/v1/chat/completions", "fk",
					openAIReq("m", true, false, "question sy-nonce:"+n))
				if err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			}
		}
		if parallel {
			wg.Go(run)
		} else {
			run()
		}
	}
	wg.Wait()
	out := map[string]string{}
	for _, h := range fu.Hits() {
		if !h.Reproducible || h.Nonce == "" {
			t.Errorf("hit %d not reproducible", h.Seq)
		}
		out[fmt.Sprintf("%s#%d", h.Nonce, h.Attempt)] = h.Action
	}
	if len(out) != len(nonces)*attempts {
		t.Fatalf("%d outcomes, want %d", len(out), len(nonces)*attempts)
	}
	return out
}

func TestRandomScheduleReplaysByNonce(t *testing.T) {
	seed := testSeed(t, 42)
	var nonces []string
	for i := range 12 {
		nonces = append(nonces, fmt.Sprintf("%04x", 0xa000+i))
	}
	first := chaosOutcomes(t, seed, nonces, 3, false)
	reversed := slices.Clone(nonces)
	slices.Reverse(reversed)
	// Same seed, other arrival order and concurrency: identical per (nonce, attempt).
	if second := chaosOutcomes(t, seed, reversed, 3, true); !reflect.DeepEqual(first, second) {
		t.Errorf("same seed, different outcomes:\n%v\n%v", first, second)
	}
	faults := 0
	for _, a := range first {
		if strings.HasPrefix(a, "random:") {
			faults++
		}
	}
	if faults == 0 || faults == len(first) {
		t.Errorf("%d of %d attempts faulted at rate 0.5", faults, len(first))
	}
	if other := chaosOutcomes(t, seed+1, nonces, 3, false); reflect.DeepEqual(first, other) {
		t.Errorf("seeds %d and %d drew the same schedule", seed, seed+1)
	}
}

func TestRandomScheduleArrivalOrderWithoutNonce(t *testing.T) {
	seed := testSeed(t, 9)
	run := func() []string {
		fu := fakeupstream.Start(t)
		fu.SetDefault(fakeupstream.Script{Random: &fakeupstream.Random{Seed: seed, Rate: 0.4,
			Mix: map[string]float64{"server_502": 1, "server_503": 1, "openai_rate_limit": 1}}})
		c := newClient(t, fu)
		var got []string
		for range 30 {
			status, _ := c.chat("fk", "m")
			got = append(got, fmt.Sprint(status))
		}
		for _, h := range fu.Hits() {
			if h.Reproducible {
				t.Errorf("hit without nonce marked reproducible")
			}
		}
		return got
	}
	a, b := run(), run()
	if !slices.Equal(a, b) {
		t.Errorf("serial replay differs:\n%v\n%v", a, b)
	}
	if !slices.Contains(a, "200") || slices.Index(a, "200") == -1 || len(slices.Compact(slices.Sorted(slices.Values(a)))) < 2 {
		t.Errorf("no mix of outcomes: %v", a)
	}
}

func TestDemoScenario(t *testing.T) {
	seed := testSeed(t, 3)
	sf, err := fakeupstream.Scenario(fakeupstream.ScenarioDemo, seed, 0)
	if err != nil {
		t.Fatal(err)
	}
	fu := fakeupstream.Start(t, fakeupstream.WithScript(sf))
	c := newClient(t, fu)
	var limited []int
	for range 6 {
		resp := c.must("POST", "/v1/chat/completions", "demo-key", openAIReq(fakeupstream.DemoLimited, false, false, "x"))
		limited = append(limited, resp.StatusCode)
		if resp.StatusCode == 429 && (resp.Header.Get("Retry-After") != "15" || resp.Header.Get("x-ratelimit-remaining-requests") != "0") {
			t.Errorf("429 headers %v", resp.Header)
		}
	}
	if !slices.Equal(limited, []int{200, 200, 429, 200, 200, 429}) {
		t.Errorf("demo-limited statuses %v", limited)
	}
	flaky := func() []string {
		var got []string
		for i := range 40 {
			resp, err := c.send(context.Background(), "POST", "/v1/chat/completions", "demo-key",
				openAIReq(fakeupstream.DemoFlaky, false, false, fmt.Sprintf("x sy-nonce:%x", i)))
			if err != nil {
				got = append(got, "reset")
				continue
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			got = append(got, fmt.Sprint(resp.StatusCode))
		}
		return got
	}
	first := flaky()
	fu.Reset()
	if again := flaky(); !slices.Equal(first, again) {
		t.Errorf("demo-flaky not reproducible:\n%v\n%v", first, again)
	}
	if !slices.Contains(first, "503") || !slices.Contains(first, "200") {
		t.Errorf("demo-flaky outcomes %v", first)
	}
	models := c.must("GET", "/v1/models", "demo-key", "")
	var list struct{ Data []struct{ ID string } }
	json.NewDecoder(models.Body).Decode(&list)
	if len(list.Data) != 3 || list.Data[0].ID != fakeupstream.DemoFast {
		t.Errorf("demo models %+v", list)
	}
	if _, err := fakeupstream.Scenario("nope", 1, 0); err == nil {
		t.Error("unknown scenario accepted")
	}
}

func TestUniformDelayIsSeeded(t *testing.T) {
	// The drawn delay is only visible as the time between arrival and headers, so check the
	// lower bound (a real wait) and leave the upper one to the clock's mercy.
	fu := fakeupstream.Start(t, fakeupstream.WithSeed(5))
	fu.Script("fk", fakeupstream.Step{Delay: time.Millisecond, DelayMax: 3 * time.Millisecond})
	c := newClient(t, fu)
	for range 3 {
		c.chat("fk", "m")
	}
	for _, h := range fu.Hits() {
		if d := h.THeaders.Sub(h.TStart); d < time.Millisecond {
			t.Errorf("hit %d headers after %v, want ≥ 1ms", h.Seq, d)
		}
	}
}

func TestHTTPDate(t *testing.T) {
	at := time.Date(2026, 3, 1, 13, 0, 0, 0, time.FixedZone("CET", 3600))
	if got := fakeupstream.HTTPDate(at); got != "Sun, 01 Mar 2026 12:00:00 GMT" {
		t.Errorf("HTTPDate = %q", got)
	}
	if _, err := http.ParseTime(fakeupstream.HTTPDate(at)); err != nil {
		t.Error(err)
	}
}
