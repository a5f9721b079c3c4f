package app

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"
)

// waitClock is a clock whose Wait returns at once and records the wait
// (the app package cannot import the testkit, which imports it).
type waitClock struct {
	now   time.Time
	waits []time.Duration
}

func (c *waitClock) Now() time.Time { return c.now }

func (c *waitClock) Wait(_ context.Context, d time.Duration) error {
	c.waits = append(c.waits, d)
	c.now = c.now.Add(d)
	return nil
}

func TestSharedDatabaseConfigNamesTheVariable(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	key := "0123456789abcdef0123456789abcdef01"
	cases := []struct {
		name string
		env  map[string]string
		args []string
		want []string
	}{
		{"unknown scheme", map[string]string{"SWITCHYARD_DATABASE_URL": "mysql://db/x", "SWITCHYARD_SECRET_KEY": key}, nil,
			[]string{"SWITCHYARD_DATABASE_URL", `unknown scheme "mysql"`}},
		{"malformed", map[string]string{"SWITCHYARD_DATABASE_URL": "postgres://u:p@[::1/x", "SWITCHYARD_SECRET_KEY": key}, nil,
			[]string{"SWITCHYARD_DATABASE_URL", "not a URL"}},
		{"no host", map[string]string{"SWITCHYARD_DATABASE_URL": "postgres:///switchyard", "SWITCHYARD_SECRET_KEY": key}, nil,
			[]string{"SWITCHYARD_DATABASE_URL", "name the server"}},
		{"no shared secret", map[string]string{"SWITCHYARD_DATABASE_URL": "postgres://db:5432/x"}, nil,
			[]string{"SWITCHYARD_SECRET_KEY", "same key"}},
		{"demo", map[string]string{"SWITCHYARD_SECRET_KEY": key}, []string{"--demo", "--database-url", "postgres://db:5432/x"},
			[]string{"--demo", "SWITCHYARD_DATABASE_URL"}},
		{"pool", map[string]string{"SWITCHYARD_DATABASE_URL": "postgres://db:5432/x", "SWITCHYARD_SECRET_KEY": key, "SWITCHYARD_DATABASE_POOL": "1"}, nil,
			[]string{"SWITCHYARD_DATABASE_POOL", "from 2 to 500"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := LoadConfig(tc.args, env(tc.env))
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
			if strings.Contains(err.Error(), ":p@") {
				t.Errorf("error %q repeats the password", err)
			}
		})
	}
	cfg, err := LoadConfig([]string{"--database-url", "postgresql://u:p@db:5432/x"}, env(map[string]string{"SWITCHYARD_SECRET_KEY": key}))
	if err != nil || !cfg.Shared() || cfg.DatabasePool != 10 {
		t.Fatalf("valid URL: %+v %d, %v", cfg.Shared(), cfg.DatabasePool, err)
	}
	cfg, err = LoadConfig(nil, env(map[string]string{"SWITCHYARD_DATABASE_URL": "postgres://db:5432/x", "SWITCHYARD_SECRET_KEY": key, "SWITCHYARD_DATABASE_POOL": "25"}))
	if err != nil || cfg.DatabasePool != 25 {
		t.Fatalf("SWITCHYARD_DATABASE_POOL=25: %d, %v", cfg.DatabasePool, err)
	}
}

// A database that does not answer at start is retried with backoff, each
// attempt logged, for up to 30 s; then the start fails with the reason.
func TestSharedDatabaseUnreachableAtStartRetriesThenFails(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now: every connect is refused at once
	clock := &waitClock{now: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)}
	var logs bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&logs, nil))
	cfg := Config{DatabaseURL: "postgres://u:secretpw@" + addr + "/x?sslmode=disable&connect_timeout=1"}
	_, err = openDatabase(context.Background(), cfg, clock, log)
	if err == nil {
		t.Fatal("opened an unreachable database")
	}
	if !strings.Contains(err.Error(), "SWITCHYARD_DATABASE_URL") {
		t.Errorf("error %q does not name the variable", err)
	}
	var total time.Duration
	for _, w := range clock.waits {
		total += w
	}
	if n := len(clock.waits); n < 5 || total > startupDBWait || total < startupDBWait-5*time.Second {
		t.Errorf("waited %d times, %v in all; want backoff up to %v", n, total, startupDBWait)
	}
	if got := strings.Count(logs.String(), "shared database unreachable at start"); got != len(clock.waits) {
		t.Errorf("%d retry lines for %d waits", got, len(clock.waits))
	}
	if strings.Contains(logs.String(), "secretpw") || strings.Contains(err.Error(), "secretpw") {
		t.Error("the database password reached a log line or the error")
	}
}
