package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"switchyard/internal/fakeupstream"
	"switchyard/services"
)

// Demo data names. A data dir keeps its demo: connections and the combo are
// reused (their base URL follows the fake upstream's new port); the demo
// keys are replaced on every start, because a key's secret is shown once and
// never stored.
const (
	demoProvider   = "demo"
	demoComboName  = "demo"
	demoClientName = "demo client"
	demoAdminName  = "demo admin"
)

// demoConnections are one rate-limited, one failing and one healthy account,
// tried in that order so every resilience mechanism has something to do.
var demoConnections = []struct{ name, key string }{
	{"rate-limited", "fk-demo-limited"},
	{"failing", "fk-demo-failing"},
	{"healthy", "fk-demo-healthy"},
}

// demoEnv is the in-process fake upstream and the demo keys of --demo.
type demoEnv struct {
	fu           *fakeupstream.Server
	clientSecret string
	adminSecret  string
}

func (d *demoEnv) Close() {
	if d.fu != nil {
		d.fu.Close()
	}
}

// startDemo starts the fake upstream on loopback, allows it through the
// egress guard, and creates or refreshes the demo data.
func startDemo(ctx context.Context, s *Server) (*demoEnv, error) {
	sf, err := fakeupstream.Scenario(fakeupstream.ScenarioDemo, 1, 0.3)
	if err != nil {
		return nil, err
	}
	sf.Scripts = append(sf.Scripts,
		fakeupstream.ScriptEntry{Key: "fk-demo-limited", Model: "*", Script: fakeupstream.Script{Steps: []fakeupstream.Step{{
			Status: 429, RetryAfter: "30", ErrorMessage: "Rate limit reached for this demo account. Please try again in 30s."}}}},
		fakeupstream.ScriptEntry{Key: "fk-demo-failing", Model: "*", Script: fakeupstream.Script{Steps: []fakeupstream.Step{{
			Status: 503, ErrorMessage: "The demo account's upstream is unavailable."}}}},
		// demo-limited is rate-limited on the healthy account too, so that
		// demo/demo-limited answers the client 429 with Retry-After
		// (00-overview.md). The message names the model's capacity, which
		// the classifier scopes to the model: the healthy account keeps
		// serving demo-fast and the demo combo's failover.
		fakeupstream.ScriptEntry{Key: "fk-demo-healthy", Model: fakeupstream.DemoLimited, Script: fakeupstream.Script{Steps: []fakeupstream.Step{{
			Name: "demo_rate_limited", Status: 429, RetryAfter: "120",
			ErrorMessage: "demo-limited is over capacity on every demo account (rate limited to 2 requests per minute). Please try again in 2 minutes."}}}},
	)
	fu := fakeupstream.New(fakeupstream.WithScript(sf), fakeupstream.WithHitLog(fakeupstream.HitLogRing(1000)))
	if err := fu.Listen("127.0.0.1:0"); err != nil {
		return nil, err
	}
	d := &demoEnv{fu: fu}
	s.egress.Allow(fu.Addr())
	if err := seedDemo(ctx, s, fu.URL()+"/v1", d); err != nil {
		fu.Close()
		return nil, err
	}
	return d, nil
}

func seedDemo(ctx context.Context, s *Server, baseURL string, d *demoEnv) error {
	existing, err := s.conns.List(ctx, services.ConnectionFilter{Provider: demoProvider})
	if err != nil {
		return err
	}
	byName := map[string]services.Connection{}
	for _, c := range existing {
		byName[c.Name] = c
	}
	for i, dc := range demoConnections {
		if c, ok := byName[dc.name]; ok {
			// The demo's own fake upstream moved to a new port: its demo key
			// follows it on purpose.
			if _, err := s.conns.Update(ctx, c.ID, services.ConnectionInput{BaseURL: services.Some(baseURL), KeepCredentials: services.Some(true)}); err != nil {
				return err
			}
			continue
		}
		in := services.ConnectionInput{Provider: services.Some(demoProvider), Name: services.Some(dc.name), APIKey: services.Some(dc.key),
			BaseURL: services.Some(baseURL), Priority: services.Some(i)}
		if _, ok := s.catalogue.Get().Get(demoProvider); !ok {
			in.Custom = services.Some(services.CustomSpec{WireFormat: "openai", AuthClass: "apikey"})
		}
		if _, err := s.conns.Create(ctx, in); err != nil {
			return fmt.Errorf("demo connection %s: %w", dc.name, err)
		}
	}
	if err := s.conns.SetCustomModels(ctx, demoProvider, []string{fakeupstream.DemoFast, fakeupstream.DemoLimited, fakeupstream.DemoFlaky}); err != nil {
		return err
	}
	combos, err := s.combos.List(ctx)
	if err != nil {
		return err
	}
	found := false
	for _, c := range combos {
		found = found || strings.EqualFold(c.Name, demoComboName)
	}
	if !found {
		_, _, err := s.combos.Create(ctx, services.ComboInput{Name: demoComboName, Description: "Flaky first, then rate-limited, then the fast model",
			Targets: []services.Target{{Provider: demoProvider, Model: fakeupstream.DemoFlaky}, {Provider: demoProvider, Model: fakeupstream.DemoLimited},
				{Provider: demoProvider, Model: fakeupstream.DemoFast}}})
		if err != nil {
			return fmt.Errorf("demo combo: %w", err)
		}
	}
	// Replace the demo keys: old secrets cannot be shown again.
	keys, err := s.keys.List(ctx, "all")
	if err != nil {
		return err
	}
	for _, k := range keys {
		if k.Name == demoClientName || k.Name == demoAdminName {
			if _, err := s.keys.Revoke(ctx, k.ID); err != nil {
				return err
			}
			if err := s.keys.Delete(ctx, k.ID); err != nil && !errors.Is(err, services.ErrNotFound) {
				return err
			}
		}
	}
	_, d.clientSecret, err = s.keys.Create(ctx, services.KeyInput{Name: services.Some(demoClientName),
		AllowedCombos: services.Some([]string{demoComboName}), AllowedModels: services.Some([]string{demoProvider + "/*"})})
	if err != nil {
		return err
	}
	_, d.adminSecret, err = s.keys.Create(ctx, services.KeyInput{Name: services.Some(demoAdminName), Scopes: services.Some([]string{services.ScopeManage})})
	return err
}

// PrintDemo prints the demo keys and a ready curl line (00-overview.md).
func (s *Server) PrintDemo(w io.Writer, baseURL string) {
	if s.demo == nil {
		return
	}
	fmt.Fprintf(w, "demo client key: %s\n", s.demo.clientSecret)
	fmt.Fprintf(w, "demo admin key: %s\n", s.demo.adminSecret)
	fmt.Fprintf(w, "try: curl -s %s/v1/chat/completions -H 'Authorization: Bearer %s' -H 'Content-Type: application/json' -d '{\"model\":\"demo\",\"messages\":[{\"role\":\"user\",\"content\":\"Hello\"}]}'\n",
		baseURL, s.demo.clientSecret)
}
