package views

import (
	"strings"
	"testing"
	"time"

	"switchyard/services/events"
)

// The Recent events panel shows each event's time (relative, absolute in
// the title), what happened, its subject by display name (ids when the
// name is gone) and its cause in words; the per-replica note appears only
// when replicas share state.
func TestEventsPanel(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	list := []events.Event{
		{Type: events.EmergencyFallback, At: now, Model: "demo", Target: "openai/gpt-4o-mini", Cause: "server_error"},
		{Type: events.CooldownCleared, At: now.Add(-time.Minute), ConnectionID: "c_1", Cause: events.CauseAdmin},
		{Type: events.CooldownSet, At: now.Add(-3 * time.Minute), Provider: "openai", ConnectionID: "c_1", Cause: "rate_limit", Status: 429},
		{Type: events.BreakerHalfOpen, At: now.Add(-4 * time.Minute), Provider: "openai", Cause: events.CauseResetTimeout},
		{Type: events.LeaseEnded, At: now.Add(-5 * time.Minute), Provider: "glm", ConnectionID: "c_gone", LeaseID: "17", Cause: "ttl_expired"},
	}
	names := EventNames{Providers: map[string]string{"openai": "OpenAI"}, Connections: map[string]string{"c_1": "team-1"},
		ProviderOf: map[string]string{"c_1": "openai"}}
	doc := renderDoc(t, EventsPanel(NewEventsPanelVM(list, names, false, now)))
	want := []string{
		"just now | Emergency fallback used | demo → openai/gpt-4o-mini | server error",
		"1 min ago | Cooldown cleared | team-1 · OpenAI | admin",
		"3 min ago | Cooldown set | team-1 · OpenAI | rate limit (429)",
		"4 min ago | Breaker half-open | OpenAI | retry time reached",
		"5 min ago | Lease ended | lease 17 on c_gone | ttl expired",
	}
	for i, w := range want {
		row := doc.Find(`[data-testid="` + RowID(RowEvent, itoa(i)) + `"]`)
		var cells []string
		for _, l := range []string{"Time", "Event", "Subject", "Cause"} {
			cells = append(cells, squash(row.Find(`[data-label="`+l+`"]`)))
		}
		if got := strings.Join(cells, " | "); got != w {
			t.Errorf("row %d = %q, want %q", i, got, w)
		}
	}
	if title := doc.Find(`[data-testid="`+RowID(RowEvent, "2")+`"] time`).AttrOr("title", ""); title != "2026-12-01 11:57:00 UTC" {
		t.Errorf("absolute time %q", title)
	}
	if doc.Find(`[data-testid="`+EventsReplicaID+`"]`).Length() != 0 || doc.Find(`[data-testid="`+EventsEmptyID+`"]`).Length() != 0 {
		t.Error("replica note or empty line on a single gateway with events")
	}
	shared := renderDoc(t, EventsPanel(NewEventsPanelVM(nil, EventNames{}, true, now)))
	if got := squash(shared.Find(`[data-testid="` + EventsEmptyID + `"]`)); got != "No resilience events since the gateway started." {
		t.Errorf("empty line %q", got)
	}
	if !strings.Contains(squash(shared.Find(`[data-testid="`+EventsReplicaID+`"]`)), "Events on this replica") {
		t.Error("no per-replica note in shared mode")
	}
}

func TestAffinityLine(t *testing.T) {
	for _, tc := range []struct {
		vm    AffinityLineVM
		text  string
		clear bool
	}{
		{AffinityLineVM{On: true}, "0 active pins", false},
		{AffinityLineVM{On: true, Pins: 1}, "1 active pin", true},
		{AffinityLineVM{On: true, Pins: 37}, "37 active pins", true},
		{AffinityLineVM{}, "off (sessionAffinity.ttlMs is 0), so no session is pinned", false},
	} {
		doc := renderDoc(t, AffinityLine(tc.vm))
		if got := squash(doc.Find(`[data-testid="` + AffinityPinsID + `"]`)); got != tc.text {
			t.Errorf("%+v: %q, want %q", tc.vm, got, tc.text)
		}
		if got := doc.Find(`[data-testid="`+AffinityClearID+`"]`).Length() == 1; got != tc.clear {
			t.Errorf("%+v: Clear all pins shown %v", tc.vm, got)
		}
	}
	if cf := AffinityConfirm(1); cf.Lines[0] != "1 active pin is dropped. Each session's next request is routed afresh and pinned to the connection that answers it." ||
		cf.URL != "/runtime/affinity/clear" || cf.Target != "#"+AffinityLineID {
		t.Errorf("confirm %+v", cf)
	}
}
