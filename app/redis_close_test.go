package app_test

import (
	"context"
	"io"
	"testing"
	"time"

	"switchyard/app"
	"switchyard/internal/testkit"
	"switchyard/internal/testkit/cluster"
	"switchyard/services"
)

// TestCloseWithRedisReturns: a gateway on the shared database and Redis
// shuts down — its Redis listeners end with the server instead of keeping
// Close waiting for ever (a SIGTERM'd replica never exited).
func TestCloseWithRedisReturns(t *testing.T) {
	dsn, rurl := testkit.PostgresSchema(t), testkit.RedisURL(t)
	env := map[string]string{"SWITCHYARD_ADMIN_PASSWORD": testkit.AdminPassword, "SWITCHYARD_DATA_DIR": t.TempDir(),
		"SWITCHYARD_DATABASE_URL": dsn, "SWITCHYARD_REDIS_URL": rurl, "SWITCHYARD_SECRET_KEY": cluster.SecretKey}
	cfg, err := app.LoadConfig([]string{"--addr", "127.0.0.1:0"}, func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	srv, err := app.Build(context.Background(), cfg, app.Options{Clock: services.RealClock{}, Argon2: &testkit.CheapArgon2, Stdout: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	closed := make(chan error, 1)
	go func() { closed <- srv.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second): // a hang detector, not a timing assertion
		t.Fatal("Close did not return: a Redis listener outlived the server")
	}
}
