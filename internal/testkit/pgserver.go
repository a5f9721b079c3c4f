package testkit

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// PostgresBinEnv names the directory holding initdb and pg_ctl, for the
// tests that stop and start a PostgreSQL server of their own (CI sets it;
// the shared test server of PostgresURLEnv is never restarted).
const PostgresBinEnv = "SWITCHYARD_TEST_POSTGRES_BIN"

// PostgresServer is a throw-away PostgreSQL cluster on a free loopback
// port, owned by one test: initdb into a temporary directory, pg_ctl to
// start, stop and restart it, removed on cleanup. Run as root, the server
// runs as the postgres user (PostgreSQL refuses root), as .ci/run does.
type PostgresServer struct {
	bin, dir string
	port     int
	asUser   string // "" = the current user
	t        testing.TB
}

// StartPostgresServer creates and starts a cluster, or skips t when
// SWITCHYARD_TEST_POSTGRES_BIN is unset.
func StartPostgresServer(t testing.TB) *PostgresServer {
	t.Helper()
	bin := os.Getenv(PostgresBinEnv)
	if bin == "" {
		t.Skipf("%s is unset: no initdb/pg_ctl for a test that restarts PostgreSQL", PostgresBinEnv)
	}
	s := &PostgresServer{bin: bin, t: t}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Skipf("%s is set but running as root without a postgres user: %v", PostgresBinEnv, err)
		}
		s.asUser = u.Username
	}
	dir, err := os.MkdirTemp("", "switchyard-pg-")
	if err != nil {
		t.Fatal(err)
	}
	s.dir = dir
	t.Cleanup(func() {
		_ = s.pgctl("-m", "immediate", "stop")
		_ = os.RemoveAll(dir)
	})
	if s.asUser != "" {
		u, _ := user.Lookup(s.asUser)
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chmod(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.port = l.Addr().(*net.TCPAddr).Port
	l.Close()
	if out, err := s.command(filepath.Join(bin, "initdb"), "-D", s.data(), "-U", "postgres", "--auth=trust", "-E", "UTF8").CombinedOutput(); err != nil {
		t.Fatalf("initdb: %v\n%s", err, out)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	return s
}

func (s *PostgresServer) data() string { return filepath.Join(s.dir, "data") }

func (s *PostgresServer) command(name string, args ...string) *exec.Cmd {
	if s.asUser != "" {
		return exec.Command("runuser", append([]string{"-u", s.asUser, "--", name}, args...)...)
	}
	return exec.Command(name, args...)
}

func (s *PostgresServer) pgctl(args ...string) error {
	full := append([]string{"-D", s.data(), "-w", "-t", "60"}, args...)
	if out, err := s.command(filepath.Join(s.bin, "pg_ctl"), full...).CombinedOutput(); err != nil {
		return fmt.Errorf("pg_ctl %v: %v\n%s", args, err, out)
	}
	return nil
}

// URL is the superuser's connection URL of the cluster's postgres database.
func (s *PostgresServer) URL() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", s.port)
}

// Start starts the server on its port and waits until it accepts
// connections.
func (s *PostgresServer) Start() error {
	opts := fmt.Sprintf("-c listen_addresses=127.0.0.1 -p %d -c unix_socket_directories=%s -c fsync=off -c max_connections=100", s.port, s.dir)
	return s.pgctl("-l", filepath.Join(s.dir, "log"), "-o", opts, "start")
}

// Stop stops the server the fast way: every session is disconnected at
// once, as in a database restart or failover.
func (s *PostgresServer) Stop() error { return s.pgctl("-m", "fast", "stop") }

// Log is the server's log so far.
func (s *PostgresServer) Log() string {
	b, _ := os.ReadFile(filepath.Join(s.dir, "log"))
	return string(b)
}

// WaitStopped is a bounded poll until nothing accepts on the port.
func (s *PostgresServer) WaitStopped(limit time.Duration) bool {
	return PollUntil(limit, func() bool {
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", s.port), 100*time.Millisecond)
		if err == nil {
			c.Close()
			return false
		}
		return true
	})
}
