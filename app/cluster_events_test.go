package app_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"switchyard/internal/fakeupstream"
	"switchyard/internal/testkit"
	"switchyard/views"
)

// events is replica i's GET /api/resilience/events.
func (f *fleet) events(t *testing.T, i int) []map[string]any {
	t.Helper()
	var out struct {
		Events []map[string]any `json:"events"`
	}
	r := f.manage[i].Must(t, "GET", "/api/resilience/events", "", 200)
	if err := json.Unmarshal(r.Body, &out); err != nil {
		t.Fatal(err)
	}
	return out.Events
}

// With several replicas the Recent events are each replica's own: the one
// that decided a cooldown lists it, another that only follows it through
// the change feed does not, and the panel says the list is per replica.
func TestClusterRecentEventsArePerReplica(t *testing.T) {
	f, conns := startFleet(t, nil, "fk-ev")
	id := conns["fk-ev"]
	// The 429 answers the client at once instead of being waited out.
	f.manage[0].Must(t, "PATCH", "/api/resilience", `{"waitForCooldown":{"enabled":false}}`, 200)
	f.fu.Script("fk-ev", fakeupstream.Step{Status: 429, RetryAfter: "60"})
	f.chat(t, f.c.Replica(0).URL(), "fleet/m1")
	ev := f.events(t, 0)
	if len(ev) != 1 || ev[0]["type"] != "cooldown_set" || ev[0]["connectionId"] != id || ev[0]["cause"] != "rate_limit" {
		t.Fatalf("replica A events %v", ev)
	}
	// B follows the cooldown, and records no event of its own for it.
	deadline := time.Now().Add(10 * time.Second)
	for !f.cooldowns(t, 1)[id].cooling() {
		if time.Now().After(deadline) {
			t.Fatal("replica B never saw the cooldown")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if ev := f.events(t, 1); len(ev) != 0 {
		t.Fatalf("replica B lists events it did not decide: %v", ev)
	}

	d := newDash()
	if st := d.signIn(t, f.c.Replica(0).URL(), testkit.AdminPassword); st != http.StatusSeeOther {
		t.Fatalf("sign in: %d", st)
	}
	page := d.do(t, "GET", f.c.Replica(0).URL(), "/runtime/events", "", "")
	if page.status != 200 || !strings.Contains(page.body, `data-testid="`+views.EventsReplicaID+`"`) ||
		!strings.Contains(page.body, "Events on this replica") || !strings.Contains(page.body, "Cooldown set") {
		t.Fatalf("replica A panel: %d %.2000s", page.status, page.body)
	}
}
