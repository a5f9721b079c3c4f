package app

import (
	"strings"
	"testing"
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
