package testkit

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"switchyard/app"
	"switchyard/services"
)

// NewRealApp builds the app in-process like NewApp, but on the real clock:
// for reliability tests (chaos, leaks, shutdown) whose cooldowns, breakers
// and streams must run in real time. env adds to the environment of
// LoadConfig (admin password and data dir are set unless env names them);
// logger receives the app's log (nil discards). The returned App's Clock is
// nil. The server is closed on cleanup.
func NewRealApp(t testing.TB, env map[string]string, logger *slog.Logger) *App {
	t.Helper()
	dir := t.TempDir()
	full := map[string]string{"SWITCHYARD_ADMIN_PASSWORD": AdminPassword, "SWITCHYARD_DATA_DIR": dir, "SWITCHYARD_PUBLIC_HOSTS": TestHost}
	for k, v := range env {
		full[k] = v
	}
	if d := full["SWITCHYARD_DATA_DIR"]; d != "" {
		dir = d
	}
	cfg, err := app.LoadConfig([]string{"--addr", "127.0.0.1:0"}, func(k string) string { return full[k] })
	if err != nil {
		t.Fatal(err)
	}
	srv, err := app.Build(context.Background(), cfg, app.Options{Clock: services.RealClock{}, Logger: logger, Argon2: &CheapArgon2, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return &App{T: t, Server: srv, DataDir: dir}
}

// RandSeed returns the seed of a randomized test: SWITCHYARD_SEED when set (to
// replay a failure), else a fresh one. It logs "seed=<n>" either way.
func RandSeed(t testing.TB) uint64 {
	t.Helper()
	if v := os.Getenv("SWITCHYARD_SEED"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("SWITCHYARD_SEED=%q: %v", v, err)
		}
		t.Logf("seed=%d (from SWITCHYARD_SEED)", n)
		return n
	}
	n := rand.Uint64()>>1 | 1
	t.Logf("seed=%d (replay with SWITCHYARD_SEED=%d)", n, n)
	return n
}

// IsLong reports whether the LONG tier runs (SWITCHYARD_LONG=1).
func IsLong() bool { return os.Getenv("SWITCHYARD_LONG") == "1" }

// PollUntil polls cond every 10 ms until it holds or timeout passes, and
// reports whether it held.
func PollUntil(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
}
