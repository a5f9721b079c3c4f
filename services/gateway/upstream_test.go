package gateway

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"switchyard/services"
)

// stubResolver answers every name with fixed addresses.
type stubResolver map[string][]netip.Addr

func (r stubResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a, ok := r[host]; ok {
		return a, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

// countingListener accepts and counts connections on 127.0.0.1: a stand-in
// for an attacker's proxy, which must see no connection when refused.
func countingListener(t *testing.T) (string, *atomic.Int32) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	var n atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			n.Add(1)
			c.Close()
		}
	}()
	return ln.Addr().String(), &n
}

// TestUpstreamProxyDialGuarded (issue 17 item 2, dial time): the outbound
// proxy is dialled through the egress guard, every resolved address
// checked; before, the proxy was dialled directly, so a proxy on loopback
// received the provider key and all traffic.
func TestUpstreamProxyDialGuarded(t *testing.T) {
	addr, hits := countingListener(t)
	_, port, _ := net.SplitHostPort(addr)
	prov := services.Provider{ID: "openai", Format: services.FormatOpenAI, BaseURL: "https://api.example.com/v1",
		AuthHeader: services.AuthHeaderBearer, AuthClass: services.AuthAPIKey}
	send := func(guard *services.EgressGuard, proxy string, class services.AuthClass) error {
		u := NewUpstream(guard, "test")
		u.resolver = stubResolver{
			"proxy.rebind.test": {netip.MustParseAddr("127.0.0.1")},
			"proxy.mixed.test":  {netip.MustParseAddr("203.0.113.9"), netip.MustParseAddr("127.0.0.1")},
			"localhost":         {netip.MustParseAddr("::1"), netip.MustParseAddr("127.0.0.1")},
			"metadata.test":     {netip.MustParseAddr("169.254.169.254")},
		}
		p := prov
		p.AuthClass = class
		c := &services.Connection{ID: "c_1", Provider: p.ID, Credentials: services.Credentials{APIKey: "sk-proxy-canary"}, ProxyURL: services.Secret(proxy)}
		cl, err := u.client(c)
		if err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		req, err := u.newRequest(ctx, p, c, "/chat/completions", []byte(`{}`), false)
		if err != nil {
			return err
		}
		resp, err := cl.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	open, _ := services.ParseEgressAllowlist("")
	for _, proxy := range []string{
		"http://" + addr, "http://localhost:" + port, "socks5://" + addr, "http://2130706433:" + port,
		"http://proxy.rebind.test:" + port,
	} {
		hits.Store(0)
		err := send(open, proxy, services.AuthAPIKey)
		if !errors.Is(err, ErrEgressRefused) {
			t.Errorf("proxy %s: err %v, want the egress refusal", proxy, err)
		}
		if n := hits.Load(); n != 0 {
			t.Errorf("proxy %s: the refused proxy saw %d connections", proxy, n)
		}
	}
	// Of several resolved addresses, the private one is never dialled.
	hits.Store(0)
	if err := send(open, "http://proxy.mixed.test:"+port, services.AuthAPIKey); err == nil || hits.Load() != 0 {
		t.Errorf("mixed public/private proxy name: err %v, %d connections to loopback", err, hits.Load())
	}
	// A local provider may use a proxy on loopback, never one at a metadata address.
	if err := send(open, "http://metadata.test:80", services.AuthLocal); !errors.Is(err, ErrEgressRefused) {
		t.Errorf("local provider, metadata proxy: %v", err)
	}
	hits.Store(0)
	if err := send(open, "http://"+addr, services.AuthLocal); errors.Is(err, ErrEgressRefused) {
		t.Errorf("local provider, loopback proxy refused: %v", err)
	}
	// Only the start-up allowlist widens it, port-exact.
	listed, _ := services.ParseEgressAllowlist(addr)
	if err := send(listed, "http://"+addr, services.AuthAPIKey); errors.Is(err, ErrEgressRefused) {
		t.Errorf("allowlisted proxy refused: %v", err)
	}
	if hits.Load() == 0 {
		t.Error("the allowlisted proxy was never dialled")
	}
	if err := send(listed, "http://127.0.0.1:1", services.AuthAPIKey); !errors.Is(err, ErrEgressRefused) {
		t.Errorf("allowlist is port-exact, got %v", err)
	}
}
