package models_test

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"switchyard/internal/testkit"
	"switchyard/models"
	"switchyard/services"
)

func TestConnectionStateStoreRoundTrip(t *testing.T) {
	ctx := context.Background()
	db := testkit.OpenDB(t)
	conns := models.NewConnectionStore(db, testkit.Keyring(t))
	created := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	c := services.Connection{
		ID: "c_1", Provider: "openai", Name: "team-1", AuthClass: services.AuthAPIKey, Enabled: true,
		Credentials: services.Credentials{APIKey: "sk-test-0123456789abcdef"}, ProxyURL: "http://u:pw@p1:3128",
		EgressGroup: "office", Tier: "standard", CreatedAt: created, UpdatedAt: created,
		State: services.ConnectionState{TestStatus: "ok"},
	}
	if err := conns.CreateConnection(ctx, c); err != nil {
		t.Fatal(err)
	}
	other := services.Connection{ID: "c_2", Provider: "openai", Name: "team-2", AuthClass: services.AuthAPIKey,
		Enabled: true, Credentials: services.Credentials{APIKey: "sk-other"}, Tier: "standard", CreatedAt: created, UpdatedAt: created}
	if err := conns.CreateConnection(ctx, other); err != nil {
		t.Fatal(err)
	}
	var encBefore []byte
	if err := db.Raw("SELECT credentials_enc FROM connections WHERE id = ?", "c_1").Row().Scan(&encBefore); err != nil {
		t.Fatal(err)
	}

	store := models.NewConnectionStateStore(db)
	at := func(s int) *time.Time { v := time.Date(2026, 3, 1, 10, 0, s, 123_000_000, time.UTC); return &v }
	want := services.ConnectionState{
		RateLimitedUntil: at(59), BackoffLevel: 3, TerminalStatus: services.TerminalBanned, TerminalAt: at(1),
		LastError: "account suspended", LastErrorReason: "forbidden", LastErrorStatus: 403, ErrorCode: "account_deactivated",
		LastErrorAt: at(2), AuthFailCount: 2, LastAuthFailAt: at(4), RejectStreak: 1, LastRejectAt: at(3),
		CooldownReason: "rate_limit", TestStatus: "ok",
	}
	if err := store.SaveConnectionState(ctx, "c_1", want); err != nil {
		t.Fatal(err)
	}
	states, err := store.LoadConnectionStates(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(states) != 2 {
		t.Fatalf("loaded %d states, want 2", len(states))
	}
	checkConnectionState(t, states["c_1"], want)
	checkConnectionState(t, states["c_2"], services.ConnectionState{})

	// Only the state columns changed: credentials, proxy, configuration and
	// updated_at are as created.
	got, err := conns.FindConnectionByID(ctx, "c_1")
	if err != nil {
		t.Fatal(err)
	}
	if got.Credentials.APIKey.Reveal() != "sk-test-0123456789abcdef" || got.ProxyURL.Reveal() != "http://u:pw@p1:3128" {
		t.Errorf("credentials or proxy changed: %q %q", got.Credentials.APIKey.Reveal(), got.ProxyURL.Reveal())
	}
	if got.Name != "team-1" || got.EgressGroup != "office" || !got.Enabled || !got.UpdatedAt.Equal(created) {
		t.Errorf("configuration changed: %+v", got)
	}
	checkConnectionState(t, got.State, want)
	var encAfter []byte
	if err := db.Raw("SELECT credentials_enc FROM connections WHERE id = ?", "c_1").Row().Scan(&encAfter); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(encBefore, encAfter) {
		t.Error("credentials_enc was rewritten")
	}

	// A configuration edit never overwrites the live state columns.
	edited := got
	edited.State = services.ConnectionState{TestStatus: got.State.TestStatus} // test_status is the connection test's, not live state
	edited.Priority = 7
	if err := conns.UpdateConnection(ctx, edited); err != nil {
		t.Fatal(err)
	}
	states, _ = store.LoadConnectionStates(ctx)
	checkConnectionState(t, states["c_1"], want)

	// Clearing writes NULLs and zeros.
	if err := store.SaveConnectionState(ctx, "c_1", services.ConnectionState{}); err != nil {
		t.Fatal(err)
	}
	var nulls struct {
		Terminal *string
		Until    *int64
		ErrAt    *int64
	}
	if err := db.Raw("SELECT terminal_status AS terminal, rate_limited_until AS until, last_error_at AS err_at FROM connections WHERE id = ?", "c_1").Scan(&nulls).Error; err != nil {
		t.Fatal(err)
	}
	if nulls.Terminal != nil || nulls.Until != nil || nulls.ErrAt != nil {
		t.Errorf("cleared state left values: %+v", nulls)
	}
	states, _ = store.LoadConnectionStates(ctx)
	checkConnectionState(t, states["c_1"], services.ConnectionState{TestStatus: "ok"})

	if err := store.SetEnabled(ctx, "c_1", false); err != nil {
		t.Fatal(err)
	}
	got, _ = conns.FindConnectionByID(ctx, "c_1")
	if got.Enabled || got.Credentials.APIKey.Reveal() != "sk-test-0123456789abcdef" {
		t.Errorf("after SetEnabled(false): enabled=%v key changed=%v", got.Enabled, got.Credentials.APIKey.Reveal() != "sk-test-0123456789abcdef")
	}
	if o, _ := conns.FindConnectionByID(ctx, "c_2"); !o.Enabled {
		t.Error("SetEnabled touched another connection")
	}
}

func TestConnectionStateStoreUnknownID(t *testing.T) {
	ctx := context.Background()
	store := models.NewConnectionStateStore(testkit.OpenDB(t))
	if err := store.SaveConnectionState(ctx, "c_missing", services.ConnectionState{BackoffLevel: 1}); !errors.Is(err, services.ErrNotFound) {
		t.Errorf("SaveConnectionState unknown id: %v, want ErrNotFound", err)
	}
	if err := store.SetEnabled(ctx, "c_missing", false); !errors.Is(err, services.ErrNotFound) {
		t.Errorf("SetEnabled unknown id: %v, want ErrNotFound", err)
	}
	states, err := store.LoadConnectionStates(ctx)
	if err != nil || len(states) != 0 {
		t.Errorf("LoadConnectionStates on empty table = %v, %v", states, err)
	}
}

func checkConnectionState(t *testing.T, got, want services.ConnectionState) {
	t.Helper()
	tp := func(p *time.Time) string {
		if p == nil {
			return "nil"
		}
		return p.UTC().Format(time.RFC3339Nano)
	}
	if tp(got.RateLimitedUntil) != tp(want.RateLimitedUntil) || tp(got.TerminalAt) != tp(want.TerminalAt) ||
		tp(got.LastErrorAt) != tp(want.LastErrorAt) || tp(got.LastRejectAt) != tp(want.LastRejectAt) ||
		tp(got.LastAuthFailAt) != tp(want.LastAuthFailAt) {
		t.Errorf("times: got until=%s terminalAt=%s errAt=%s rejectAt=%s authFailAt=%s, want %s %s %s %s %s",
			tp(got.RateLimitedUntil), tp(got.TerminalAt), tp(got.LastErrorAt), tp(got.LastRejectAt), tp(got.LastAuthFailAt),
			tp(want.RateLimitedUntil), tp(want.TerminalAt), tp(want.LastErrorAt), tp(want.LastRejectAt), tp(want.LastAuthFailAt))
	}
	got.RateLimitedUntil, got.TerminalAt, got.LastErrorAt, got.LastRejectAt, got.LastAuthFailAt = nil, nil, nil, nil, nil
	want.RateLimitedUntil, want.TerminalAt, want.LastErrorAt, want.LastRejectAt, want.LastAuthFailAt = nil, nil, nil, nil, nil
	if got != want {
		t.Errorf("state:\n got %+v\nwant %+v", got, want)
	}
}
