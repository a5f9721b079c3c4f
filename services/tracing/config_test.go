package tracing

import (
	"context"
	"strings"
	"testing"
)

func envOf(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestFromEnv(t *testing.T) {
	for _, tc := range []struct {
		name    string
		env     map[string]string
		url     string
		headers map[string]string
		json    bool
		err     string
	}{
		{name: "unset is off", env: nil},
		{name: "base endpoint gets /v1/traces", env: map[string]string{EnvEndpoint: "http://127.0.0.1:4318"}, url: "http://127.0.0.1:4318/v1/traces"},
		{name: "base endpoint with a path", env: map[string]string{EnvEndpoint: "https://otel.example/collector/"}, url: "https://otel.example/collector/v1/traces"},
		{name: "traces endpoint as is, over the base", env: map[string]string{EnvEndpoint: "http://a:4318", EnvTracesEndpoint: "http://b:4318/custom"}, url: "http://b:4318/custom"},
		{name: "traces endpoint without a path", env: map[string]string{EnvTracesEndpoint: "http://b:4318"}, url: "http://b:4318/"},
		{name: "headers decoded; traces headers win", env: map[string]string{EnvEndpoint: "http://a:4318", EnvHeaders: "x=1",
			EnvTracesHeaders: "Authorization=Bearer%20t0k, x-team = core"}, url: "http://a:4318/v1/traces",
			headers: map[string]string{"Authorization": "Bearer t0k", "x-team": "core"}},
		{name: "json protocol", env: map[string]string{EnvEndpoint: "http://a:4318", EnvProtocol: "http/json"}, url: "http://a:4318/v1/traces", json: true},
		{name: "sdk disabled", env: map[string]string{EnvEndpoint: "http://a:4318", EnvSDKDisabled: "TRUE"}},
		{name: "exporter none", env: map[string]string{EnvEndpoint: "http://a:4318", EnvTracesExporter: "none"}},
		{name: "grpc refused", env: map[string]string{EnvEndpoint: "http://a:4317", EnvTracesProtocol: "grpc"}, err: "grpc is not supported"},
		{name: "other exporter refused", env: map[string]string{EnvEndpoint: "http://a:4318", EnvTracesExporter: "zipkin"}, err: "not supported"},
		{name: "bad URL refused without echoing it", env: map[string]string{EnvEndpoint: "a:4318?token=s3cret"}, err: EnvEndpoint},
		{name: "bad header refused without echoing it", env: map[string]string{EnvEndpoint: "http://a:4318", EnvHeaders: "Authorization"}, err: "not key=value"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := FromEnv(envOf(tc.env))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want %q", err, tc.err)
				}
				if strings.Contains(err.Error(), "s3cret") {
					t.Fatalf("the error echoes a credential: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cfg.URL != tc.url || cfg.Enabled() != (tc.url != "") || cfg.JSON != tc.json {
				t.Fatalf("cfg %+v, want url %q json %v", cfg, tc.url, tc.json)
			}
			for k, v := range tc.headers {
				if cfg.Headers[k] != v {
					t.Fatalf("header %s = %q, want %q", k, cfg.Headers[k], v)
				}
			}
			if cfg.Enabled() && cfg.ServiceName != "switchyard" {
				t.Fatalf("service name %q", cfg.ServiceName)
			}
		})
	}
}

func TestWhereDropsCredentials(t *testing.T) {
	c := Config{URL: "https://user:pw@otel.example:4318/v1/traces?token=x#f"}
	if got := c.Where(); got != "https://otel.example:4318/v1/traces" {
		t.Fatalf("Where %q", got)
	}
}

// Off is nothing: no provider, a nil TracerProvider interface (so the
// gateway's nil check holds) and no-op methods.
func TestStartOffBuildsNothing(t *testing.T) {
	p, err := Start(context.Background(), Config{}, "v", "")
	if err != nil || p != nil {
		t.Fatalf("Start(off) = %v, %v", p, err)
	}
	if p.TracerProvider() != nil || p.Where() != "" || p.Shutdown(context.Background()) != nil {
		t.Fatal("a nil provider is not inert")
	}
}
