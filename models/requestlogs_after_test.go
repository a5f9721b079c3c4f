package models_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"switchyard/services"
)

// The live tail's query (RequestLogQuery.After): the entries newer than a
// position in (created_at, id) order, newest first, with the filters.
func TestRequestLogAfter(t *testing.T) {
	ctx := context.Background()
	s := newLogStore(t)
	// Three entries share each millisecond, so the id tie-break matters;
	// every third entry is a stream.
	var all []services.RequestLogEntry
	for i := range 12 {
		all = append(all, services.RequestLogEntry{ID: fmt.Sprintf("r%02d", i), CreatedAt: logT0.Add(time.Duration(i/3) * time.Millisecond),
			Endpoint: "/v1/chat/completions", Stream: i%3 == 0})
	}
	writeLogs(t, s, all...)
	cursorOf := func(e services.RequestLogEntry) string {
		return services.RequestLogCursor{CreatedAt: e.CreatedAt, ID: e.ID}.String()
	}
	ids := func(page services.RequestLogPage) []string {
		var out []string
		for _, e := range page.Items {
			out = append(out, e.ID)
		}
		return out
	}

	// After r04 (same millisecond as r03 and r05): r05 and everything later, newest first.
	page, err := s.ListRequestLogs(ctx, services.RequestLogQuery{After: cursorOf(all[4])})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"r11", "r10", "r09", "r08", "r07", "r06", "r05"}; !reflect.DeepEqual(ids(page), want) || page.NextCursor != "" {
		t.Fatalf("after r04: %v (next %q), want %v", ids(page), page.NextCursor, want)
	}
	// After the newest: nothing.
	page, err = s.ListRequestLogs(ctx, services.RequestLogQuery{After: cursorOf(all[11])})
	if err != nil || len(page.Items) != 0 || page.NextCursor != "" {
		t.Fatalf("after the newest: %v, %v", ids(page), err)
	}
	// Filters apply: streams after r02.
	on := true
	page, err = s.ListRequestLogs(ctx, services.RequestLogQuery{After: cursorOf(all[2]), Stream: &on})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"r09", "r06", "r03"}; !reflect.DeepEqual(ids(page), want) {
		t.Fatalf("streams after r02: %v, want %v", ids(page), want)
	}
	// More newer entries than the limit: the newest ones, and a cursor that
	// continues older from the last of them, down to the ones left out.
	page, err = s.ListRequestLogs(ctx, services.RequestLogQuery{After: cursorOf(all[0]), Limit: 4})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"r11", "r10", "r09", "r08"}; !reflect.DeepEqual(ids(page), want) || page.NextCursor == "" {
		t.Fatalf("after r00, limit 4: %v (next %q), want %v and a next cursor", ids(page), page.NextCursor, want)
	}
	rest := listAll(t, s, services.RequestLogQuery{Cursor: page.NextCursor, Limit: 4})
	if want := []string{"r07", "r06", "r05", "r04", "r03", "r02", "r01", "r00"}; !reflect.DeepEqual(rest, want) {
		t.Fatalf("older from there: %v, want %v", rest, want)
	}

	// A request that arrived first and ended last (a minute-long stream)
	// is written after all of them: past the tail cursor of everything on
	// screen, it is the one new entry, and then nothing is.
	slow := services.RequestLogEntry{ID: "r-slow", CreatedAt: logT0, LatencyMs: 60_000, Endpoint: "/v1/chat/completions", Stream: true}
	writeLogs(t, s, slow)
	page, err = s.ListRequestLogs(ctx, services.RequestLogQuery{After: services.TailCursor(all)})
	if err != nil || !reflect.DeepEqual(ids(page), []string{"r-slow"}) {
		t.Fatalf("after everything shown: %v, %v; want the late-ending r-slow", ids(page), err)
	}
	page, err = s.ListRequestLogs(ctx, services.RequestLogQuery{After: services.TailCursor(append(all, slow))})
	if err != nil || len(page.Items) != 0 {
		t.Fatalf("after r-slow too: %v, %v", ids(page), err)
	}

	for name, q := range map[string]services.RequestLogQuery{
		"garbage":     {After: "not a cursor"},
		"without id":  {After: "eyJ0IjoxfQ"}, // {"t":1}
		"with cursor": {After: cursorOf(all[0]), Cursor: cursorOf(all[5])},
	} {
		_, err := s.ListRequestLogs(ctx, q)
		var verr *services.ValidationError
		if !errors.As(err, &verr) || verr.Fields["after"] == "" {
			t.Errorf("%s: err = %v, want a validation error on after", name, err)
		}
	}
}
