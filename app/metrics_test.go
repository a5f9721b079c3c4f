package app_test

import (
	"io"
	"strings"
	"testing"

	"switchyard/internal/fakeupstream"
	"switchyard/internal/testkit"
)

func TestMetricsExposeResilienceState(t *testing.T) {
	f := newGW(t, "fk-a", "fk-b")
	f.fu.Script("fk-a", fakeupstream.Step{Status: 503})
	f.fu.Script("fk-b", fakeupstream.Step{Status: 503})
	resp := f.post(t, chatBody)
	io.ReadAll(resp.Body)
	// No credential → 401; a metrics-scoped key may scrape; an inference key may not.
	if rec := f.app.Do(testkit.Request("GET", "/metrics", "")); rec.Code != 401 {
		t.Fatalf("anonymous scrape: %d", rec.Code)
	}
	_, inf := f.app.NewKey("inference-only")
	if rec := f.app.Do(testkit.Request("GET", "/metrics", "", "Authorization", "Bearer "+inf)); rec.Code != 403 {
		t.Fatalf("inference key scrape: %d", rec.Code)
	}
	_, scraper := f.app.NewKey("scraper", "metrics")
	rec := f.app.Do(testkit.Request("GET", "/metrics", "", "Authorization", "Bearer "+scraper))
	if rec.Code != 200 {
		t.Fatalf("scrape: %d", rec.Code)
	}
	body := rec.Body.String()
	for _, want := range []string{
		`switchyard_upstream_failures_total{provider="fake",reason="server_error"} 2`,
		`switchyard_failovers_total{kind="connection"} 1`,
		`switchyard_connections{provider="fake",status="cooling"} 2`,
		`switchyard_breaker_state{provider="fake"} 0`,
		`switchyard_cooldowns_applied_total{provider="fake",reason="server_error"} 2`,
		`go_goroutines`,
		`switchyard_affinity_pins`,
		`switchyard_leases_active 0`,
		`switchyard_rate_limit_rejections_total{code="RATE_LIMIT_QUEUE_FULL"} 0`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	if strings.Contains(body, f.key) || strings.Contains(body, "fk-a") {
		t.Error("a secret reached /metrics")
	}
}
