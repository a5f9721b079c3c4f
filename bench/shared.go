package main

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx" for the run's schema
)

// seedShared prepares the shared-mode gateway of -database-url: a schema of
// this run's own on that database (dropped when the run ends), seeded in
// process with the same configuration as the embedded gateway, then closed
// so that the binary (started with the proxies) opens it.
func (t *topology) seedShared(ctx context.Context, cfg *config) error {
	u, err := url.Parse(cfg.databaseURL)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return fmt.Errorf("-database-url: want postgres://…")
	}
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	schema := "bench_" + hex.EncodeToString(b)
	admin, err := sql.Open("pgx", cfg.databaseURL)
	if err != nil {
		return err
	}
	if _, err := admin.ExecContext(ctx, "CREATE SCHEMA "+schema); err != nil {
		admin.Close()
		return fmt.Errorf("create schema: %w", err)
	}
	t.closers = append(t.closers, func() {
		dctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = admin.ExecContext(dctx, "DROP SCHEMA "+schema+" CASCADE")
		admin.Close()
	})
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	t.sharedDSN = u.String()
	t.sharedRedis = cfg.redisURL
	if err := os.Mkdir(filepath.Join(t.workDir, "data-shared"), 0o700); err != nil {
		return err
	}
	// Seed through an in-process gateway on the shared database, keeping
	// the embedded gateway's keys.
	client, adminKey, gwURL := t.clientKey, t.adminKey, t.gatewayURL
	seedCfg := *cfg
	if err := t.startGatewayEnv(ctx, &seedCfg, t.sharedEnv()); err != nil {
		return err
	}
	t.sharedClientKey, t.sharedAdminKey = t.clientKey, t.adminKey
	t.clientKey, t.adminKey, t.gatewayURL = client, adminKey, gwURL
	n := len(t.closers)
	t.closers[n-1]() // stop the in-process gateway: the binary takes the database
	t.closers = t.closers[:n-1]
	t.srv, t.gateway = nil, nil
	return nil
}

// sharedTarget is the shared-mode gateway's budget against the embedded
// one: 1.10× on PostgreSQL alone (the request path reads the same
// in-memory mirrors) and 1.15× when Redis counts the limits, each
// admission then taking a loopback round trip. what names the mode.
func (c *config) sharedTarget() (limit float64, target, what string) {
	if c.redisURL != "" {
		return 1.15, "≤ 1.15× embedded", "gateway on PostgreSQL and Redis (-database-url, -redis-url)"
	}
	return 1.10, "≤ 1.1× embedded", "gateway on PostgreSQL (-database-url)"
}
