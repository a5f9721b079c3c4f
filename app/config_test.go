package app

import (
	"strings"
	"testing"
	"time"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestLoadConfigDefaults(t *testing.T) {
	cfg, err := LoadConfig(nil, env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Addr != "127.0.0.1:20128" || cfg.DataDir != "./data" || cfg.Demo {
		t.Fatalf("defaults: %+v", cfg)
	}
}

func TestLoadConfigFlagsOverrideEnv(t *testing.T) {
	cfg, err := LoadConfig([]string{"--addr", "127.0.0.1:0", "--demo"}, env(map[string]string{
		"SWITCHYARD_ADDR": "127.0.0.1:9", "SWITCHYARD_DATA_DIR": "/tmp/x", "SWITCHYARD_PRIVATE_UPSTREAMS": "127.0.0.1:8080,10.0.0.0/8"}))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Addr != "127.0.0.1:0" || cfg.DataDir != "/tmp/x" || !cfg.Demo || cfg.PrivateUpstreams == "" {
		t.Fatalf("got %+v", cfg)
	}
}

func TestLoadConfigReportsEveryProblem(t *testing.T) {
	_, err := LoadConfig([]string{"--addr", "nonsense", "--data-dir", " ", "--allow-private-upstreams", "bad entry"}, env(map[string]string{
		"SWITCHYARD_SECRET_KEY": "short", "SWITCHYARD_ADMIN_PASSWORD": "tiny", "SWITCHYARD_LOG_RETENTION_DAYS": "x",
		"SWITCHYARD_PPROF_ADDR": "0.0.0.0:6060"}))
	if err == nil {
		t.Fatal("want error")
	}
	for _, want := range []string{"--addr", "--data-dir", "SWITCHYARD_SECRET_KEY", "SWITCHYARD_ADMIN_PASSWORD", "--allow-private-upstreams", "SWITCHYARD_LOG_RETENTION_DAYS", "SWITCHYARD_PPROF_ADDR"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not mention %s: %v", want, err)
		}
	}
}

func TestLoadConfigPprofAddrLoopbackOnly(t *testing.T) {
	for addr, ok := range map[string]bool{"127.0.0.1:6060": true, "localhost:6060": true, "[::1]:0": true,
		"0.0.0.0:6060": false, ":6060": false, "10.0.0.1:6060": false, "127.0.0.1": false} {
		cfg, err := LoadConfig(nil, env(map[string]string{"SWITCHYARD_PPROF_ADDR": addr}))
		if ok && (err != nil || cfg.PprofAddr != addr) {
			t.Errorf("%q: %v (PprofAddr %q)", addr, err, cfg.PprofAddr)
		}
		if !ok && err == nil {
			t.Errorf("%q accepted", addr)
		}
	}
}

// TestLoadConfigHardeningBounds (issue 17 items 1, 3, 7): the body
// deadlines, the upstream caps and the public host names come from flags
// over environment, with the documented defaults, and every bad value is
// reported.
func TestLoadConfigHardeningBounds(t *testing.T) {
	cfg, err := LoadConfig(nil, env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Body != DefaultBodyTimeouts() || cfg.Upstream.MaxEventBytes != 4<<20 || cfg.Upstream.MaxBodyBytes != 16<<20 ||
		cfg.Upstream.BudgetBytes != 32<<20 || len(cfg.PublicHosts) != 0 {
		t.Fatalf("defaults: %+v %+v %v", cfg.Body, cfg.Upstream, cfg.PublicHosts)
	}
	cfg, err = LoadConfig([]string{"--body-first-byte-timeout", "5s", "--public-host", "gw.example.com", "--public-host", "Other.Example.:8443",
		"--upstream-max-event-bytes", "512KiB"}, env(map[string]string{
		"SWITCHYARD_BODY_FIRST_BYTE_TIMEOUT": "9s", "SWITCHYARD_BODY_TIMEOUT": "20s", "SWITCHYARD_CLIENT_BODY_TIMEOUT": "5m",
		"SWITCHYARD_BODY_MIN_RATE": "0", "SWITCHYARD_PUBLIC_HOSTS": "ignored.example", "SWITCHYARD_UPSTREAM_BUFFER_BUDGET": "1GiB"}))
	if err != nil {
		t.Fatal(err)
	}
	want := BodyTimeouts{FirstByte: 5 * time.Second, Total: 20 * time.Second, ClientAPITotal: 5 * time.Minute, MinRate: 0}
	if cfg.Body != want || cfg.Upstream.MaxEventBytes != 512<<10 || cfg.Upstream.BudgetBytes != 1<<30 ||
		strings.Join(cfg.PublicHosts, ",") != "gw.example.com,other.example:8443" {
		t.Fatalf("overrides: %+v %+v %v", cfg.Body, cfg.Upstream, cfg.PublicHosts)
	}
	_, err = LoadConfig([]string{"--body-timeout", "forever", "--upstream-max-body-bytes", "10", "--public-host", "https://x.example/"}, env(map[string]string{
		"SWITCHYARD_BODY_FIRST_BYTE_TIMEOUT": "2h", "SWITCHYARD_UPSTREAM_BUFFER_BUDGET": "2MiB", "SWITCHYARD_BODY_MIN_RATE": "-1"}))
	if err == nil {
		t.Fatal("bad values accepted")
	}
	for _, want := range []string{"--body-timeout", "--upstream-max-body-bytes", "--public-host", "--body-first-byte-timeout", "--body-min-rate"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not name %s: %v", want, err)
		}
	}
	if _, err := LoadConfig(nil, env(map[string]string{"SWITCHYARD_UPSTREAM_BUFFER_BUDGET": "2MiB"})); err == nil || !strings.Contains(err.Error(), "--upstream-buffer-budget") {
		t.Errorf("a budget below the body cap: %v", err)
	}
}

// Redis needs the shared database; its grant TTL and call timeout are
// bounded and default to 30 s and 50 ms.
func TestLoadConfigRedis(t *testing.T) {
	shared := map[string]string{"SWITCHYARD_DATABASE_URL": "postgres://u:p@db.internal:5432/s",
		"SWITCHYARD_SECRET_KEY": strings.Repeat("k", 32), "SWITCHYARD_REDIS_URL": "redis://127.0.0.1:6379/0"}
	cfg, err := LoadConfig(nil, env(shared))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.RedisGrantTTLMs != 30_000 || cfg.RedisTimeoutMs != 50 {
		t.Fatalf("defaults: ttl %d timeout %d", cfg.RedisGrantTTLMs, cfg.RedisTimeoutMs)
	}
	shared["SWITCHYARD_REDIS_TIMEOUT_MS"] = "250"
	if cfg, err = LoadConfig(nil, env(shared)); err != nil || cfg.RedisTimeoutMs != 250 {
		t.Fatalf("timeout 250: %d %v", cfg.RedisTimeoutMs, err)
	}
	shared["SWITCHYARD_REDIS_TIMEOUT_MS"], shared["SWITCHYARD_REDIS_GRANT_TTL_MS"] = "0", "10"
	_, err = LoadConfig(nil, env(shared))
	for _, want := range []string{"SWITCHYARD_REDIS_TIMEOUT_MS", "SWITCHYARD_REDIS_GRANT_TTL_MS"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error does not mention %s: %v", want, err)
		}
	}
	_, err = LoadConfig(nil, env(map[string]string{"SWITCHYARD_REDIS_URL": "redis://127.0.0.1:6379/0"}))
	if err == nil || !strings.Contains(err.Error(), "needs SWITCHYARD_DATABASE_URL") {
		t.Fatalf("Redis without the shared database: %v", err)
	}
}
