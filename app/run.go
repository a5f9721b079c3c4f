package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"gorm.io/gorm"

	"switchyard/models"
	"switchyard/services"
	"switchyard/services/gateway"
)

// Version is the product version shown in the dashboard and health report.
var Version = "0.1.0"

// drainTimeout bounds graceful shutdown: in-flight requests get this long.
const drainTimeout = 10 * time.Second

// cutGrace is how long requests still running at the end of the drain get to
// end after their contexts are cancelled.
const cutGrace = 3 * time.Second

// Run starts Switchyard and serves until ctx ends, then drains in-flight
// requests (bounded) and closes the database. It receives the OS as
// arguments so tests call it directly.
func Run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	cfg, err := LoadConfig(args[1:], getenv)
	if err != nil {
		return err
	}
	log := NewLogger(stderr)
	srv, err := Build(ctx, cfg, Options{Clock: services.RealClock{}, Logger: log, Stdout: stdout})
	if err != nil {
		return err
	}
	defer srv.Close()

	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.Addr, err)
	}
	addr := ln.Addr().(*net.TCPAddr)
	host := addr.IP.String()
	if addr.IP.To4() == nil && !addr.IP.IsUnspecified() {
		host = "[" + host + "]"
	}
	srv.SetListenAddr(ln.Addr().String(), addr.IP.IsLoopback())
	// Every request context descends from reqCtx, so a drain that runs out
	// can end what is still running: streams get their in-band error and
	// upstream calls are cancelled (the cause tells it apart from a client
	// that went away).
	reqCtx, cutRequests := context.WithCancelCause(context.Background())
	defer cutRequests(nil)
	hs := srv.newHTTPServer(reqCtx, log)
	if cfg.PprofAddr != "" {
		stopPprof, err := startPprof(cfg.PprofAddr, log)
		if err != nil {
			ln.Close()
			return err
		}
		defer stopPprof()
	}
	fmt.Fprintf(stdout, "listening on http://%s:%d\n", host, addr.Port)
	if cfg.Demo {
		srv.PrintDemo(stdout, fmt.Sprintf("http://%s:%d", host, addr.Port))
	}
	serveErr := make(chan error, 1)
	go func() { serveErr <- hs.Serve(sniffListener{ln}) }()
	select {
	case err := <-serveErr:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), drainTimeout)
	defer cancel()
	err = hs.Shutdown(sctx)
	if errors.Is(err, context.DeadlineExceeded) {
		// Drain ran out: cut the remaining requests and give their handlers
		// a moment to end the streams and queue their log rows before the
		// store closes.
		cutRequests(gateway.ErrShuttingDown)
		cctx, ccancel := context.WithTimeout(context.Background(), cutGrace)
		err = hs.Shutdown(cctx)
		ccancel()
		if errors.Is(err, context.DeadlineExceeded) {
			hs.Close()
			err = nil
		}
	}
	if err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	if err := <-serveErr; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// NewLogger returns the JSON logger with secrets masked by attribute name.
func NewLogger(w io.Writer) *slog.Logger {
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{ReplaceAttr: redactAttr}))
}

var redactedNames = map[string]bool{"authorization": true, "x-api-key": true, "cookie": true, "set-cookie": true, "password": true, "api_key": true, "apikey": true, "secret": true}

func redactAttr(_ []string, a slog.Attr) slog.Attr {
	if redactedNames[strings.ToLower(a.Key)] {
		return slog.String(a.Key, "[redacted]")
	}
	return a
}

// openStore opens the database (the data dir's SQLite file or the shared
// PostgreSQL database) and loads the secret key, failing closed when it does
// not match the data.
func openStore(ctx context.Context, cfg Config, clock services.Clock, log *slog.Logger) (*gorm.DB, *services.Keyring, error) {
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, nil, fmt.Errorf("data dir %s: %w", cfg.DataDir, err)
	}
	secret, err := loadSecretKey(cfg)
	if err != nil {
		return nil, nil, err
	}
	keys, err := services.NewKeyring(secret)
	if err != nil {
		return nil, nil, err
	}
	db, err := openDatabase(ctx, cfg, clock, log)
	if err != nil {
		return nil, nil, err
	}
	settings := models.NewSettingsStore(db)
	stored, _, err := settings.GetSetting(ctx, services.SettingsKeyCheck)
	if errors.Is(err, services.ErrNotFound) {
		doc := fmt.Sprintf(`{"check":%q,"keyId":%q}`, encodeB64(keys.NewKeyCheck()), keys.KeyID())
		_, err = settings.PutSetting(ctx, services.SettingsKeyCheck, []byte(doc), 0)
		if errors.Is(err, services.ErrConflict) {
			// Another replica sealed its check first: verify ours against it.
			stored, _, err = settings.GetSetting(ctx, services.SettingsKeyCheck)
		} else if err == nil {
			stored = []byte(doc)
		}
	}
	switch {
	case err != nil:
		models.Close(db)
		return nil, nil, err
	default:
		check, derr := decodeKeyCheck(stored)
		if derr != nil || keys.VerifyKeyCheck(check) != nil {
			models.Close(db)
			return nil, nil, fmt.Errorf("start-up refused: %w", services.ErrWrongSecretKey)
		}
	}
	return db, keys, nil
}

// loadSecretKey reads SWITCHYARD_SECRET_KEY, else <data-dir>/secret.key,
// creating that file (0600, 32 random bytes) on first run.
func loadSecretKey(cfg Config) ([]byte, error) {
	if cfg.SecretKey != "" {
		return []byte(cfg.SecretKey), nil
	}
	path := filepath.Join(cfg.DataDir, "secret.key")
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		key := services.RandomToken(32)
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return nil, fmt.Errorf("create %s: %w", path, err)
		}
		if _, err := f.WriteString(key + "\n"); err != nil {
			f.Close()
			return nil, err
		}
		if err := f.Close(); err != nil {
			return nil, err
		}
		return []byte(key), nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	key := strings.TrimSpace(string(b))
	if len(key) < 32 {
		return nil, fmt.Errorf("%s: the key is shorter than 32 characters", path)
	}
	return []byte(key), nil
}
