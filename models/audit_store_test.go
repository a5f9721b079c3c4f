package models_test

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
	"time"

	"switchyard/internal/testkit"
	"switchyard/models"
	"switchyard/services"
)

func TestAuditStoreRoundTripFiltersAndPurge(t *testing.T) {
	ctx := context.Background()
	s := models.NewAuditStore(testkit.OpenDB(t))
	at := func(min int) time.Time { return logT0.Add(time.Duration(min) * time.Minute) }
	full := services.AuditEntry{ID: "req_a", CreatedAt: at(0), ActorKind: services.AuditActorSession, ActorID: "3f2c1ab09d8e",
		ClientIP: "127.0.0.1", UserAgent: "curl/8", RequestID: "req_a", Method: "PATCH", Route: "/api/resilience", Path: "/api/resilience",
		Action: "settings.resilience.update", Status: 200,
		Changes: []services.AuditChange{{Path: "modelLockout.enabled", Before: json.RawMessage("false"), After: json.RawMessage("true")}}}
	entries := []services.AuditEntry{full,
		{ID: "req_b", CreatedAt: at(1), ActorKind: services.AuditActorKey, ActorID: "k_8", ActorName: "ops", KeyPrefix: "sk-sy-Ab12Cd",
			Method: "DELETE", Route: "/api/connections/:id", Path: "/api/connections/c_7", TargetID: "c_7", Status: 204},
		{ID: "req_c", CreatedAt: at(2), ActorKind: services.AuditActorSession, ActorID: "3f2c1ab09d8e",
			Method: "POST", Route: "/connections/:id/reset", Path: "/connections/c_7/reset", TargetID: "c_7", Status: 200},
	}
	if err := s.WriteAuditEntries(ctx, entries); err != nil {
		t.Fatal(err)
	}
	if err := s.WriteAuditEntries(ctx, entries[:1]); err != nil { // re-delivered: skipped
		t.Fatal(err)
	}
	ids := func(q services.AuditQuery) string {
		t.Helper()
		var out []string
		for {
			page, err := s.ListAuditEntries(ctx, q)
			if err != nil {
				t.Fatalf("list %+v: %v", q, err)
			}
			for _, e := range page.Items {
				out = append(out, e.ID)
			}
			if page.NextCursor == "" {
				return fmt.Sprint(out)
			}
			q.Cursor = page.NextCursor
		}
	}
	for _, tc := range []struct {
		q    services.AuditQuery
		want string
	}{
		{services.AuditQuery{}, "[req_c req_b req_a]"},
		{services.AuditQuery{Limit: 1}, "[req_c req_b req_a]"},
		{services.AuditQuery{ActorKind: services.AuditActorKey}, "[req_b]"},
		{services.AuditQuery{ActorID: "3f2c1ab09d8e"}, "[req_c req_a]"},
		{services.AuditQuery{TargetID: "c_7"}, "[req_c req_b]"},
		{services.AuditQuery{Route: "/api/"}, "[req_b req_a]"},
		{services.AuditQuery{Route: "/api/connections"}, "[req_b]"},
		{services.AuditQuery{Method: "patch"}, "[req_a]"},
		{services.AuditQuery{Since: at(1), Until: at(2)}, "[req_b]"},
	} {
		if got := ids(tc.q); got != tc.want {
			t.Errorf("%+v: %s, want %s", tc.q, got, tc.want)
		}
	}
	page, err := s.ListAuditEntries(ctx, services.AuditQuery{Limit: 500})
	if err != nil {
		t.Fatal(err)
	}
	if got := page.Items[2]; !reflect.DeepEqual(got, full) {
		t.Fatalf("round trip\n got %+v\nwant %+v", got, full)
	}
	if got := page.Items[0].Changes; got == nil || len(got) != 0 {
		t.Fatalf("no changes read back as %#v", got)
	}
	if _, err := s.ListAuditEntries(ctx, services.AuditQuery{ActorKind: "robot"}); err == nil {
		t.Fatal("a bad actor kind was accepted")
	}
	n, err := s.PurgeAuditEntries(ctx, at(2))
	if err != nil || n != 2 {
		t.Fatalf("purge %d %v", n, err)
	}
	if got := ids(services.AuditQuery{}); got != "[req_c]" {
		t.Fatalf("after purge %s", got)
	}
}
