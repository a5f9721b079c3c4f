package app_test

import (
	"testing"

	"switchyard/services"
)

func TestComboStrategyOrdersTargets(t *testing.T) {
	f := twoProviders(t)
	if _, _, err := f.app.Server.Combos().Create(t.Context(), services.ComboInput{Name: "rr", Strategy: "round-robin",
		Targets: []services.Target{{Provider: "fake", Model: "m1"}, {Provider: "fakeb", Model: "m2"}}}); err != nil {
		t.Fatal(err)
	}
	var got []string
	for i := 0; i < 4; i++ {
		resp, _ := postKey(t, f.url+"/v1/chat/completions", f.key, `{"model":"rr","messages":[{"role":"user","content":"x"}]}`)
		if resp.StatusCode != 200 {
			t.Fatalf("request %d: %d", i, resp.StatusCode)
		}
		got = append(got, resp.Header.Get("X-Switchyard-Provider"))
	}
	want := []string{"fake", "fakeb", "fake", "fakeb"}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("round-robin served %v, want %v", got, want)
		}
	}
	// priority keeps the first target while it works.
	if _, _, err := f.app.Server.Combos().Create(t.Context(), services.ComboInput{Name: "prio",
		Targets: []services.Target{{Provider: "fakeb", Model: "m2"}, {Provider: "fake", Model: "m1"}}}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		resp, _ := postKey(t, f.url+"/v1/chat/completions", f.key, `{"model":"prio","messages":[{"role":"user","content":"y"}]}`)
		if p := resp.Header.Get("X-Switchyard-Provider"); p != "fakeb" {
			t.Fatalf("priority served %s", p)
		}
	}
}
