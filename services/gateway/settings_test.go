package gateway

import (
	"context"
	"reflect"
	"testing"
	"time"

	"switchyard/services"
	"switchyard/services/settings"
)

type memSettingsStore struct {
	doc []byte
	rev int64
}

func (s *memSettingsStore) GetSetting(context.Context, string) ([]byte, int64, error) {
	if s.rev == 0 {
		return nil, 0, services.ErrNotFound
	}
	return s.doc, s.rev, nil
}

func (s *memSettingsStore) PutSetting(_ context.Context, _ string, doc []byte, expected int64) (int64, error) {
	if expected != s.rev {
		return 0, services.ErrConflict
	}
	s.doc, s.rev = doc, s.rev+1
	return s.rev, nil
}

// The general document's defaults are the gateway's documented defaults.
func TestFromGeneralDefaults(t *testing.T) {
	got := FromGeneral(new(settings.GeneralSpec(settings.GeneralOptions{}).Defaults()))
	want := DefaultSettings()
	want.ProviderStrategy = map[string]ProviderStrategy{}
	want.TaskFitness = []settings.TaskFitnessRule{}
	if !reflect.DeepEqual(got.Settings, want) {
		t.Fatalf("settings\n got %+v\nwant %+v", got.Settings, want)
	}
	if got.Limits != DefaultLimits() {
		t.Fatalf("limits %+v, want %+v", got.Limits, DefaultLimits())
	}
}

// A PATCH of the general document reaches the next request's settings, once
// per version: strategies per provider, limits, and routing.comboDefaults
// under every combo's own config.
func TestFromGeneralFollowsThePatchedDocument(t *testing.T) {
	ctx := context.Background()
	doc, err := settings.OpenGeneral(ctx, &memSettingsStore{}, settings.GeneralOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := settings.NewDerived(doc, FromGeneral)
	before := cfg.Get()
	if _, err := doc.Patch(ctx, []byte(`{"routing": {"maxAttemptsPerRequest": 4, "requestDeadlineMs": 5000, "echoRequestedModel": true,
	  "providerStrategies": {"openai": {"fallbackStrategy": "round-robin"}},
	  "comboDefaults": {"maxRetries": 3, "queue": {"depth": 5}, "contextRelay": {"handoffModel": "m"}}},
	  "limits": {"maxJsonDepth": 32}, "stream": {"keepaliveIdleMs": 0}}`), ""); err != nil {
		t.Fatal(err)
	}
	got := cfg.Get()
	if got == before || cfg.Get() != got {
		t.Fatal("not derived once per version")
	}
	set := &got.Settings
	if set.MaxAttempts != 4 || set.RequestDeadline != 5*time.Second || set.KeepaliveIdle != 0 || !set.EchoRequestedModel ||
		got.Limits.MaxJSONDepth != 32 {
		t.Fatalf("settings %+v limits %+v", set, got.Limits)
	}
	if ps := set.ProviderStrategy["openai"]; ps.FallbackStrategy != "round-robin" || ps.StickyLimit != 0 {
		t.Fatalf("provider strategy %+v", ps)
	}
	if set.DirectCombo.MaxRetries != 3 || set.DirectCombo.QueueDepth != 5 {
		t.Fatalf("direct combo %+v", set.DirectCombo)
	}
	zero := 0
	combo := &services.Combo{Config: services.ComboConfig{MaxRetries: &zero}}
	if c := comboConfig(set, combo); c.MaxRetries != 0 || c.QueueDepth != 5 {
		t.Fatalf("combo config %+v", c)
	}
	if rc := relayConfigOf(set, combo); rc.model != "m" {
		t.Fatalf("relay config %+v", rc)
	}
}
