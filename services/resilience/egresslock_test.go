package resilience_test

import (
	"slices"
	"testing"
	"time"

	"switchyard/services"
	"switchyard/services/resilience"
)

func TestEgressGroupOf(t *testing.T) {
	cases := []struct {
		proxy, label, want string
	}{
		{"", "", "direct"},
		{"  ", " ", "direct"},
		{"http://p2:3128", "", "proxy:http://p2:3128"},
		{"http://ops:s3cret@P2:3128/", "", "proxy:http://p2:3128"},
		{"HTTP://p2", "", "proxy:http://p2:80"},
		{"https://p2", "", "proxy:https://p2:443"},
		{"socks5://u:p@p3", "", "proxy:socks5://p3:1080"},
		{"http://[::1]:8080", "", "proxy:http://[::1]:8080"},
		{"http://p2:3128", "office", "label:office"},
		{"", "office", "label:office"},
	}
	for _, tc := range cases {
		if got := resilience.EgressGroupOf(tc.proxy, tc.label); got != tc.want {
			t.Errorf("EgressGroupOf(%q, %q) = %q, want %q", tc.proxy, tc.label, got, tc.want)
		}
	}
	if a, b := resilience.EgressGroupOf("http://a:1@p:1", ""), resilience.EgressGroupOf("http://b:2@p:1", ""); a != b {
		t.Errorf("credentials split a group: %q vs %q", a, b)
	}
}

func TestParseEgressLockProviders(t *testing.T) {
	def := []string{"opencode", "opencode-zen", "opencode-go", "opencode-cli"}
	cases := []struct {
		env  string
		want []string
	}{
		{"", def},
		{"none", []string{}},
		{"OFF", []string{}},
		{"false", []string{}},
		{"0", []string{}},
		{"opencode, Minimax,,opencode", []string{"opencode", "minimax"}},
	}
	for _, tc := range cases {
		got := resilience.ParseEgressLockProviders(tc.env)
		if !slices.Equal(got, tc.want) || got == nil {
			t.Errorf("ParseEgressLockProviders(%q) = %#v, want %#v", tc.env, got, tc.want)
		}
	}
}

func TestEgressLockTriggered(t *testing.T) {
	cfg := resilience.EgressLockConfig{Enabled: true, Providers: resilience.ParseEgressLockProviders("")}
	quota := cdCls(429, resilience.ReasonQuotaExhausted)
	terminal := quota
	terminal.Terminal = resilience.TerminalBanned
	cases := []struct {
		name     string
		cfg      resilience.EgressLockConfig
		provider string
		cls      resilience.Classification
		want     bool
	}{
		{"429 quota on opencode", cfg, "opencode", quota, true},
		{"429 rate limit on opencode-zen", cfg, "opencode-zen", cdCls(429, resilience.ReasonRateLimit), true},
		{"unlisted provider", cfg, "openai", quota, false},
		{"not a 429", cfg, "opencode", cdCls(503, resilience.ReasonServerError), false},
		{"429 model capacity", cfg, "opencode", cdCls(429, resilience.ReasonModelCapacity), false},
		{"terminal", cfg, "opencode", terminal, false},
		{"disabled", resilience.EgressLockConfig{Providers: cfg.Providers}, "opencode", quota, false},
		{"providers none", resilience.EgressLockConfig{Enabled: true, Providers: resilience.ParseEgressLockProviders("none")}, "opencode", quota, false},
	}
	for _, tc := range cases {
		if got := resilience.EgressLockTriggered(tc.cfg, tc.provider, tc.cls); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// egressConn is a connection as the router sees it for the egress lock.
type egressConn struct {
	info         resilience.ConnInfo
	proxy, label string
}

func opencodeConn(id, proxy string) egressConn {
	return egressConn{info: resilience.ConnInfo{ID: id, Provider: "opencode", Profile: services.AuthAPIKey}, proxy: proxy}
}

// egressSiblings is the caller's filter: same group, listed provider, not the failing one.
func egressSiblings(failing egressConn, all []egressConn, providers []string) []resilience.ConnInfo {
	group := resilience.EgressGroupOf(failing.proxy, failing.label)
	var out []resilience.ConnInfo
	for _, c := range all {
		if c.info.ID != failing.info.ID && slices.Contains(providers, c.info.Provider) &&
			resilience.EgressGroupOf(c.proxy, c.label) == group {
			out = append(out, c.info)
		}
	}
	return out
}

// monthlyLimit is opencode's 429 "monthly usage limit reached, resets in 2h".
func monthlyLimit() resilience.Classification {
	c := cdHinted(cdCls(429, resilience.ReasonQuotaExhausted), 2*time.Hour)
	c.RuleID = "opencode-monthly-limit"
	return c
}

// egressFail runs the request-path order: Apply, then the lock when triggered.
func (e *cdEnv) egressFail(providers []string, failing egressConn, all []egressConn, cls resilience.Classification) []string {
	e.cd.Apply(e.ctx, failing.info, cls)
	cfg := resilience.EgressLockConfig{Enabled: true, Providers: providers}
	if !resilience.EgressLockTriggered(cfg, failing.info.Provider, cls) {
		return nil
	}
	return e.cd.ApplyEgressLock(e.ctx, failing.info, egressSiblings(failing, all, providers), cls.Hint, cls.Reason)
}

func TestEgressLockE1SameDirectEgress(t *testing.T) {
	e := newCDEnv(t)
	a, b := opencodeConn("c_a", ""), opencodeConn("c_b", "")
	cooled := e.egressFail(resilience.ParseEgressLockProviders(""), a, []egressConn{a, b}, monthlyLimit())
	if !slices.Equal(cooled, []string{"c_b"}) {
		t.Errorf("cooled %v, want [c_b]", cooled)
	}
	e.wantCooling(t, "c_a", 7200*time.Second)
	e.wantCooling(t, "c_b", 7200*time.Second)
	if st := e.cd.State("c_b"); st.BackoffLevel != 0 || st.LastErrorAt != nil {
		t.Errorf("sibling level or last_error changed: %+v", st)
	}
}

func TestEgressLockE2OtherProxyUnaffected(t *testing.T) {
	e := newCDEnv(t)
	a, b := opencodeConn("c_a", ""), opencodeConn("c_b", "http://p2:3128")
	if cooled := e.egressFail(resilience.ParseEgressLockProviders(""), a, []egressConn{a, b}, monthlyLimit()); len(cooled) != 0 {
		t.Errorf("cooled %v", cooled)
	}
	e.wantCooling(t, "c_a", 7200*time.Second)
	e.wantNotCooling(t, "c_b")
}

func TestEgressLockE3SiblingsCoolingLaterOrTerminalUnchanged(t *testing.T) {
	e := newCDEnv(t)
	later := cdT0.Add(3 * time.Hour)
	a, b, c := opencodeConn("c_a", ""), opencodeConn("c_b", ""), opencodeConn("c_c", "")
	d, off := opencodeConn("c_d", ""), opencodeConn("c_off", "")
	off.info.DisableCooling = true
	e.cd.Replace("c_b", services.ConnectionState{RateLimitedUntil: &later, BackoffLevel: 4})
	e.cd.Replace("c_c", services.ConnectionState{TerminalStatus: services.TerminalBanned, TerminalAt: &cdT0})
	sooner := cdT0.Add(time.Minute)
	e.cd.Replace("c_d", services.ConnectionState{RateLimitedUntil: &sooner, BackoffLevel: 2})
	writes := e.store.Writes()

	cooled := e.egressFail(resilience.ParseEgressLockProviders(""), a, []egressConn{a, b, c, d, off}, monthlyLimit())
	if !slices.Equal(cooled, []string{"c_d"}) {
		t.Errorf("cooled %v, want [c_d] (extended from 1 min)", cooled)
	}
	e.wantCooling(t, "c_b", 3*time.Hour)
	e.wantLevel(t, "c_b", 4)
	if st := e.cd.State("c_c"); st.TerminalStatus != services.TerminalBanned || st.RateLimitedUntil != nil {
		t.Errorf("banned sibling rewritten: %+v", st)
	}
	e.wantCooling(t, "c_d", 2*time.Hour)
	e.wantLevel(t, "c_d", 2)
	e.wantNotCooling(t, "c_off")
	if n := e.store.Writes() - writes; n != 2 { // c_a by Apply, c_d by the lock
		t.Errorf("%d writes, want 2", n)
	}
}

func TestEgressLockE4ProvidersNone(t *testing.T) {
	e := newCDEnv(t)
	a, b := opencodeConn("c_a", ""), opencodeConn("c_b", "")
	if cooled := e.egressFail(resilience.ParseEgressLockProviders("none"), a, []egressConn{a, b}, monthlyLimit()); cooled != nil {
		t.Errorf("cooled %v", cooled)
	}
	e.wantCooling(t, "c_a", 7200*time.Second)
	e.wantNotCooling(t, "c_b")
}

func TestEgressLockWithoutHint(t *testing.T) {
	e := newCDEnv(t)
	a, b, other := opencodeConn("c_a", ""), opencodeConn("c_b", ""), opencodeConn("c_x", "")
	other.info.Provider = "openai" // same egress, unlisted provider
	rate := cdCls(429, resilience.ReasonRateLimit)
	cooled := e.egressFail(resilience.ParseEgressLockProviders(""), a, []egressConn{a, b, other}, rate)
	if !slices.Equal(cooled, []string{"c_b"}) {
		t.Errorf("cooled %v", cooled)
	}
	// max(its backoff 3 s, 120 s); the failing connection's level is Apply's.
	e.wantCooling(t, "c_a", 120*time.Second)
	e.wantLevel(t, "c_a", 1)
	e.wantCooling(t, "c_b", 120*time.Second)
	e.wantLevel(t, "c_b", 0)
	e.wantNotCooling(t, "c_x")

	// A long backoff wins over the 120 s floor; siblings follow it.
	e2 := newCDEnv(t)
	errAt := cdT0.Add(-time.Second)
	e2.cd.Replace("c_a", services.ConnectionState{BackoffLevel: 5, LastErrorAt: &errAt})
	oauth := a
	oauth.info.Profile = services.AuthOAuth // 5 s × 2^5 = 160 s
	e2.egressFail(resilience.ParseEgressLockProviders(""), oauth, []egressConn{oauth, b}, rate)
	e2.wantCooling(t, "c_a", 160*time.Second)
	e2.wantCooling(t, "c_b", 160*time.Second)

	// A concurrent repeat on the cooling failing connection changes nothing.
	e.at(time.Second)
	writes := e.store.Writes()
	if cooled := e.egressFail(resilience.ParseEgressLockProviders(""), a, []egressConn{a, b}, rate); len(cooled) != 0 {
		t.Errorf("repeat cooled %v", cooled)
	}
	e.wantCooling(t, "c_a", 120*time.Second)
	e.wantLevel(t, "c_a", 1)
	if n := e.store.Writes() - writes; n != 1 { // last_error_at of c_a only
		t.Errorf("%d writes on repeat, want 1", n)
	}
}

func TestEgressLockPassthroughModelScopeStillCoolsConnection(t *testing.T) {
	// On a passthroughModels provider the classifier scopes a 429 to the
	// model; the egress lock still gives the connection a cooldown.
	e := newCDEnv(t)
	a, b := opencodeConn("c_a", ""), opencodeConn("c_b", "")
	cls := cdCls(429, resilience.ReasonRateLimit)
	cls.Scope = resilience.ScopeModel
	e.egressFail(resilience.ParseEgressLockProviders(""), a, []egressConn{a, b}, cls)
	e.wantCooling(t, "c_a", 120*time.Second)
	e.wantLevel(t, "c_a", 0)
	e.wantCooling(t, "c_b", 120*time.Second)

	// disableCooling on the failing connection: it is not written, siblings still are.
	e2 := newCDEnv(t)
	a.info.DisableCooling = true
	e2.egressFail(resilience.ParseEgressLockProviders(""), a, []egressConn{a, b}, monthlyLimit())
	e2.wantNotCooling(t, "c_a")
	e2.wantCooling(t, "c_b", 7200*time.Second)
}
