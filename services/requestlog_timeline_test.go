package services_test

import (
	"slices"
	"testing"

	"switchyard/services"
)

// The timeline puts each skip between the attempts it came between and
// before the wait that followed it; skips take no time, so the sum is
// unchanged.
func TestTimelinePlacesSkipsBetweenAttempts(t *testing.T) {
	e := services.RequestLogEntry{LatencyMs: 100,
		AttemptLog: []services.AttemptRecord{{Seq: 0, StartOffsetMs: 2, LatencyMs: 10}, {Seq: 1, StartOffsetMs: 60, LatencyMs: 30}},
		Waits:      []services.WaitRecord{{Kind: services.WaitKindSingle, StartOffsetMs: 13, WaitedMs: 45}},
		Skips: []services.SkipRecord{
			{Target: "a/x", Reason: "circuit_open", AtOffsetMs: 0, AfterAttempts: 0},
			{Target: "b/y", Reason: "unavailable", Detail: "cooling", AtOffsetMs: 13, AfterAttempts: 1},
			{Target: "c/z", Reason: "model_lockout", AtOffsetMs: 95, AfterAttempts: 2},
		}}
	tl := e.Timeline()
	var got []string
	for _, r := range tl.Rows {
		switch r.Kind {
		case services.TimelineSkip:
			got = append(got, "skip "+r.Skip.Target+" "+r.Skip.Cause())
		case services.TimelineAttempt:
			got = append(got, "attempt")
		default:
			got = append(got, r.Kind)
		}
	}
	want := []string{"skip a/x circuit_open", "gap", "attempt", "gap", "skip b/y cooling", "wait", "gap", "attempt", "gap", "skip c/z model_lockout", "gap"}
	if !slices.Equal(got, want) {
		t.Fatalf("rows\n got %q\nwant %q", got, want)
	}
	if tl.AttemptsMs+tl.WaitsMs+tl.GapsMs != tl.TotalMs || tl.GapsMs != 100-40-45 {
		t.Errorf("sum %+v", tl)
	}
}
