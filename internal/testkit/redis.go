package testkit

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"
)

// Redis test servers. SWITCHYARD_TEST_REDIS_URL names a shared one (CI
// starts it; tests isolate themselves with key prefixes or their own
// database number); SWITCHYARD_TEST_REDIS_SERVER names the redis-server
// binary for tests that must own their server (to kill and restart it).
const (
	RedisURLEnv    = "SWITCHYARD_TEST_REDIS_URL"
	RedisServerEnv = "SWITCHYARD_TEST_REDIS_SERVER"
)

// RedisURL returns the shared test server's URL, or skips t with the reason.
func RedisURL(t testing.TB) string {
	t.Helper()
	u := os.Getenv(RedisURLEnv)
	if u == "" {
		t.Skipf("%s is unset: no Redis server to test against", RedisURLEnv)
	}
	return u
}

// RedisServer is a redis-server process a test owns: it can stop it and
// start it again on the same port (a Redis restart without persistence).
type RedisServer struct {
	bin  string
	port int
	dir  string
	cmd  *exec.Cmd
}

// StartRedisServer starts a private redis-server on a free loopback port
// (no persistence), or skips t when SWITCHYARD_TEST_REDIS_SERVER is unset.
// It is stopped on cleanup.
func StartRedisServer(t testing.TB) *RedisServer {
	t.Helper()
	bin := os.Getenv(RedisServerEnv)
	if bin == "" {
		t.Skipf("%s is unset: no redis-server binary for a test that restarts Redis", RedisServerEnv)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	r := &RedisServer{bin: bin, port: port, dir: t.TempDir()}
	if err := r.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Stop)
	return r
}

// URL is the server's redis:// URL.
func (r *RedisServer) URL() string { return fmt.Sprintf("redis://127.0.0.1:%d/0", r.port) }

// Start runs the server (again) and waits until it accepts connections.
func (r *RedisServer) Start() error {
	r.cmd = exec.Command(r.bin, "--bind", "127.0.0.1", "--port", strconv.Itoa(r.port), "--save", "",
		"--appendonly", "no", "--dir", r.dir)
	if err := r.cmd.Start(); err != nil {
		return err
	}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", r.port), 200*time.Millisecond)
		if err == nil {
			_, _ = c.Write([]byte("PING\r\n"))
			_ = c.SetReadDeadline(time.Now().Add(time.Second))
			line, _ := bufio.NewReader(c).ReadString('\n')
			c.Close()
			if line == "+PONG\r\n" {
				return nil
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("redis-server on port %d did not answer within 10 s", r.port)
}

// Stop kills the server (SIGKILL: its data is gone, as after a crash).
func (r *RedisServer) Stop() {
	if r.cmd != nil && r.cmd.Process != nil {
		_ = r.cmd.Process.Kill()
		_ = r.cmd.Wait()
		r.cmd = nil
	}
}
