package app_test

import (
	"strings"
	"testing"
	"time"

	"switchyard/internal/fakeupstream"
)

func TestThroughputWatchdogAbortsSlowStreams(t *testing.T) {
	f := newGW(t, "fk-a")
	patchResilience(t, f.app, `{"streamRecovery":{"throughputWatchdog":{"enabled":true,"warmupMs":0,"windowMs":1000,"minUsefulBytesPerSecond":1000}}}`)
	// Pre-commit: nothing useful for 3 s → aborted at ~1 s, reopened on the
	// same connection, and the healthy second attempt serves a clean stream.
	f.fu.SetScript("fk-a", "*", fakeupstream.Script{Steps: []fakeupstream.Step{{FirstByteDelay: 3 * time.Second}}, Then: fakeupstream.ThenDefault})
	resp, b := postKey(t, f.url+"/v1/chat/completions", f.key, streamBody)
	if resp.StatusCode != 200 || !strings.HasSuffix(strings.TrimSpace(string(b)), "data: [DONE]") || len(f.fu.HitsFor("fk-a")) != 2 {
		t.Fatalf("pre-commit: %d hits %d %s", resp.StatusCode, len(f.fu.HitsFor("fk-a")), b)
	}
	if st := f.app.Server.Resilience().Cooldowns.State(f.conns["fk-a"].ID); st.RateLimitedUntil != nil {
		t.Fatal("a watchdog abort cooled the connection")
	}
	// Post-commit: a trickle after the first bytes ends in band, never with [DONE].
	f.fu.ClearScripts()
	f.fu.Script("fk-a", fakeupstream.Step{Events: 40, EventGap: 150 * time.Millisecond})
	_, b = postKey(t, f.url+"/v1/chat/completions", f.key, `{"model":"fake/m1","stream":true,"messages":[{"role":"user","content":"slow"}]}`)
	body := string(b)
	if strings.Contains(body, "[DONE]") || !strings.Contains(body, "STREAM_THROUGHPUT_TOO_LOW") {
		t.Fatalf("post-commit: %s", body)
	}
}
