package app_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"switchyard/app"
	"switchyard/internal/testkit"
	"switchyard/services"
)

func TestRunServesHealthzAndShutsDownOnCancel(t *testing.T) {
	r := testkit.StartApp(t, nil, nil)
	if !strings.HasPrefix(r.BaseURL, "http://127.0.0.1:") || strings.HasSuffix(r.BaseURL, ":0") {
		t.Fatalf("listening line gave %q", r.BaseURL)
	}
	resp, err := http.Get(r.BaseURL + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || strings.TrimSpace(string(body)) != `{"status":"ok"}` {
		t.Fatalf("healthz: %d %s", resp.StatusCode, body)
	}
	resp, err = http.Get(r.BaseURL + "/api/monitoring/health")
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || strings.TrimSpace(string(body)) != `{"status":"ok"}` {
		t.Fatalf("public health: %d %s", resp.StatusCode, body)
	}
	if err := r.Stop(); err != nil {
		t.Fatalf("Run returned %v after cancel", err)
	}
	if _, err := http.Get(r.BaseURL + "/healthz"); err == nil {
		t.Fatal("server still answers after shutdown")
	}
}

func TestRunRejectsBadConfigWithEveryProblem(t *testing.T) {
	err := app.Run(context.Background(), []string{"switchyard", "--addr", "x"}, func(k string) string {
		if k == "SWITCHYARD_SECRET_KEY" {
			return "short"
		}
		return ""
	}, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "--addr") || !strings.Contains(err.Error(), "SWITCHYARD_SECRET_KEY") {
		t.Fatalf("err = %v", err)
	}
}

func TestSecretKeyFileCreatedAndWrongKeyFailsClosed(t *testing.T) {
	dir := t.TempDir()
	env := map[string]string{"SWITCHYARD_DATA_DIR": dir}
	cfg, err := app.LoadConfig(nil, func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	srv, err := app.Build(context.Background(), cfg, app.Options{Argon2: &testkit.CheapArgon2})
	if err != nil {
		t.Fatal(err)
	}
	srv.Close()
	fi, err := os.Stat(filepath.Join(dir, "secret.key"))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("secret.key mode %v, want 0600", fi.Mode().Perm())
	}
	// Restart with the same file works.
	srv, err = app.Build(context.Background(), cfg, app.Options{Argon2: &testkit.CheapArgon2})
	if err != nil {
		t.Fatalf("restart: %v", err)
	}
	srv.Close()
	// A different key fails closed with a clear message.
	env["SWITCHYARD_SECRET_KEY"] = "a-completely-different-secret-key-0123456789"
	cfg, _ = app.LoadConfig(nil, func(k string) string { return env[k] })
	_, err = app.Build(context.Background(), cfg, app.Options{Argon2: &testkit.CheapArgon2})
	if !errors.Is(err, services.ErrWrongSecretKey) {
		t.Fatalf("wrong key: err = %v", err)
	}
}

// SWITCHYARD_PPROF_ADDR serves net/http/pprof on its own loopback listener;
// the product's listener never does.
func TestRunServesPprofOnlyWhereAsked(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	r := testkit.StartApp(t, nil, map[string]string{"SWITCHYARD_PPROF_ADDR": addr})
	resp, err := http.Get("http://" + addr + "/debug/pprof/goroutine?debug=1")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), "goroutine profile") {
		t.Fatalf("pprof: %d %.200s", resp.StatusCode, body)
	}
	resp, err = http.Get(r.BaseURL + "/debug/pprof/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode == 200 {
		t.Fatal("the product listener serves pprof")
	}
	if err := r.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := http.Get("http://" + addr + "/debug/pprof/"); err == nil {
		t.Fatal("pprof still answers after shutdown")
	}
}
