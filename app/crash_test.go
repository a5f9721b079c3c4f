package app_test

// Crash consistency on SQLite WAL (60-quality R12): the gateway binary runs
// as a child process on one data dir; a driver mixes admin writes
// (connections with custom providers, client keys, combos with targets,
// settings) with proxied traffic that writes cooldowns, terminal states and
// request-log rows; the process is SIGKILLed at a random moment 50 ms–1.5 s
// into the load. After each kill the files are opened directly:
// integrity_check = ok, foreign_key_check empty, every write answered 2xx
// before the kill present (combos with all their targets), the terminal and
// cooling states the API reported still there. Then it restarts on the same
// dir (time to the listening line is measured and logged, bounded only by a
// generous 20 s) and the API must show the same.
//
// Per commit 3 rounds, SWITCHYARD_LONG=1 20. SWITCHYARD_SEED replays the
// kill moments.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"switchyard/internal/fakeupstream"
	"switchyard/internal/testkit"
)

// gatewayBinary builds the gateway (go build -o <tmp>/switchyard . from the
// module root) into the test's temp dir; the build cache makes repeats cheap.
// It skips the test, saying why, when the build is impossible here.
func gatewayBinary(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("..")
	if err == nil {
		_, err = os.Stat(filepath.Join(root, "go.mod"))
	}
	if err != nil {
		t.Skipf("crash test skipped: module root not found above the app package: %v", err)
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("crash test skipped: no go command to build the gateway: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "switchyard")
	cmd := exec.Command(goBin, "build", "-o", bin, ".")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Skipf("crash test skipped: go build of the gateway failed: %v\n%s", err, out)
	}
	return bin
}

// gatewayProc is one run of the gateway binary.
type gatewayProc struct {
	cmd      *exec.Cmd
	killOnce sync.Once
	base     string
	startup  time.Duration
	stderr   *bytes.Buffer
	exited   chan error
}

func startGatewayProc(t *testing.T, bin, dataDir string, env map[string]string) *gatewayProc {
	t.Helper()
	cmd := exec.Command(bin, "--addr", "127.0.0.1:0", "--data-dir", dataDir)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SWITCHYARD_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &gatewayProc{cmd: cmd, stderr: &bytes.Buffer{}, exited: make(chan error, 1)}
	cmd.Stderr = &lockedWriter{w: p.stderr}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.exited <- cmd.Wait() }()
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			default:
			}
		}
		close(lines)
	}()
	deadline := time.After(20 * time.Second)
	for p.base == "" {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("gateway exited before listening: %s", p.stderr)
			}
			if rest, ok := strings.CutPrefix(l, "listening on "); ok {
				p.base = strings.TrimSpace(rest)
				p.startup = time.Since(start)
			}
		case <-deadline:
			p.kill()
			t.Fatalf("no listening line within 20 s: %s", p.stderr)
		}
	}
	t.Cleanup(p.kill)
	return p
}

// kill sends SIGKILL and waits for the exit (idempotent).
func (p *gatewayProc) kill() {
	p.killOnce.Do(func() {
		_ = p.cmd.Process.Signal(syscall.SIGKILL)
		select {
		case <-p.exited:
		case <-time.After(10 * time.Second):
		}
	})
}

type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

// crashAPI calls the management API with a manage key.
type crashAPI struct {
	base, key string
	hc        *http.Client
}

func (c crashAPI) do(ctx context.Context, method, path, body string) (int, map[string]any, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, strings.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Authorization", "Bearer "+c.key)
	resp, err := c.hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, nil, err
	}
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	return resp.StatusCode, m, nil
}

// crashAcked is every write the API acknowledged (2xx) before a kill.
type crashAcked struct {
	mu          sync.Mutex
	connections []string
	keys        []string
	combos      map[string]int // id → number of targets
	lockoutBase int64          // modelLockout.baseCooldownMs last acknowledged
	lockoutSent int64          // the last value sent (it may land without its answer)
}

func TestCrashConsistencyUnderSIGKILL(t *testing.T) {
	bin := gatewayBinary(t)
	seed := testkit.RandSeed(t)
	rng := rand.New(rand.NewPCG(seed, 0xc0ffee))
	rounds := 3
	if testkit.IsLong() {
		rounds = 20
	}
	fu := fakeupstream.Start(t, fakeupstream.WithEvents(5))
	fu.Script("ck-term-51b2", fakeupstream.Step{Status: 402, ErrorCode: "insufficient_quota", ErrorMessage: "You exceeded your current quota."})
	fu.Script("ck-cool-51b2", fakeupstream.Step{Status: 429, RetryAfter: "3600"})
	dataDir := t.TempDir()
	env := map[string]string{"SWITCHYARD_PRIVATE_UPSTREAMS": fu.Addr(), "SWITCHYARD_ADMIN_PASSWORD": testkit.AdminPassword}
	dbPath := filepath.Join(dataDir, "switchyard.db")
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 8}, Timeout: 10 * time.Second}

	// Round 0 sets up through the admin session: a manage key (all later
	// admin writes use it), an inference key, and three providers with one
	// connection each — healthy, terminal after a 402, cooling for an hour.
	p := startGatewayProc(t, bin, dataDir, env)
	t.Logf("first start: listening after %v", p.startup.Round(time.Millisecond))
	adm := newHTTPAdmin(t, p.base)
	api := crashAPI{base: p.base, key: adm.do("POST", "/api/keys", `{"name":"ops","scopes":["manage"]}`, 201)["secret"].(string), hc: hc}
	acked := &crashAcked{combos: map[string]int{}}
	inferKey := adm.do("POST", "/api/keys", `{"name":"traffic"}`, 201)["secret"].(string)
	stateConn := map[string]string{}
	for _, c := range []struct{ provider, key string }{{"crashok", "ck-ok-51b2"}, {"crashterm", "ck-term-51b2"}, {"crashcool", "ck-cool-51b2"}} {
		id := adm.do("POST", "/api/connections", `{"provider":"`+c.provider+`","name":"base","apiKey":"`+c.key+`","baseUrl":"`+fu.URL()+
			`/v1","custom":{"wireFormat":"openai","authClass":"apikey"}}`, 201)["id"].(string)
		acked.connections = append(acked.connections, id)
		stateConn[c.provider] = id
	}
	for _, model := range []string{"crashterm/m1", "crashcool/m1"} {
		out := testkit.DoChat(context.Background(), hc, testkit.ChatCall{BaseURL: p.base, Key: inferKey, Model: model})
		if out.Class != testkit.ClassTypedError {
			t.Fatalf("%s: %v", model, out)
		}
	}
	cds := adm.do("GET", "/api/resilience/cooldowns", "", 200)["connections"].([]any)
	reported := map[string]string{}
	for _, c := range cds {
		m := c.(map[string]any)
		reported[m["id"].(string)], _ = m["status"].(string)
	}
	if reported[stateConn["crashterm"]] != "terminal" || reported[stateConn["crashcool"]] != "cooling" {
		t.Fatalf("states before any kill: %v", reported)
	}

	var startups []time.Duration
	for round := 1; round <= rounds; round++ {
		killAfter := time.Duration(50+rng.IntN(1451)) * time.Millisecond
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		// Admin writes: connections (on a custom provider per round), keys,
		// combos with 1–3 targets, a settings change.
		wg.Go(func() {
			for i := 0; ctx.Err() == nil; i++ {
				switch i % 4 {
				case 0:
					body := fmt.Sprintf(`{"provider":"crashgen%d","name":"g%d","apiKey":"ck-gen-%d-%d","baseUrl":"%s/v1","custom":{"wireFormat":"openai","authClass":"apikey"}}`,
						round, i, round, i, fu.URL())
					if st, m, err := api.do(ctx, "POST", "/api/connections", body); err == nil && st == 201 {
						acked.mu.Lock()
						acked.connections = append(acked.connections, m["id"].(string))
						acked.mu.Unlock()
					}
				case 1:
					if st, m, err := api.do(ctx, "POST", "/api/keys", fmt.Sprintf(`{"name":"k-%d-%d"}`, round, i)); err == nil && st == 201 {
						acked.mu.Lock()
						k, _ := m["key"].(map[string]any)
						id, _ := k["id"].(string)
						acked.keys = append(acked.keys, id)
						acked.mu.Unlock()
					}
				case 2:
					n := 1 + i%3
					targets := make([]string, n)
					for j := range targets {
						targets[j] = fmt.Sprintf(`{"provider":"crashok","model":"m%d"}`, j)
					}
					body := fmt.Sprintf(`{"name":"combo-%d-%d","targets":[%s]}`, round, i, strings.Join(targets, ","))
					if st, m, err := api.do(ctx, "POST", "/api/combos", body); err == nil && st == 201 {
						acked.mu.Lock()
						acked.combos[m["id"].(string)] = n
						acked.mu.Unlock()
					}
				case 3:
					v := int64(5000 + 1000*round + i)
					acked.mu.Lock()
					acked.lockoutSent = v
					acked.mu.Unlock()
					if st, _, err := api.do(ctx, "PATCH", "/api/resilience", fmt.Sprintf(`{"modelLockout":{"baseCooldownMs":%d}}`, v)); err == nil && st == 200 {
						acked.mu.Lock()
						acked.lockoutBase = v
						acked.mu.Unlock()
					}
				}
			}
		})
		// Proxied traffic: request-log rows, successes, cooldown touches.
		for w := range 2 {
			wg.Go(func() {
				for i := 0; ctx.Err() == nil; i++ {
					model := []string{"crashok/m1", "crashcool/m1", "crashterm/m1"}[(i+w)%3]
					testkit.DoChat(ctx, hc, testkit.ChatCall{BaseURL: p.base, Key: inferKey, Model: model, Stream: i%2 == 0})
				}
			})
		}
		time.Sleep(killAfter)
		p.kill()
		cancel()
		wg.Wait()
		hc.Transport.(*http.Transport).CloseIdleConnections()

		// The files, directly.
		acked.mu.Lock()
		integrity, fk, db := testkit.InspectDB(t, dbPath)
		if integrity != "ok" || fk != 0 {
			t.Fatalf("round %d (kill after %v): integrity_check %q, foreign_key_check %d rows\n%s", round, killAfter, integrity, fk, p.stderr)
		}
		missing := 0
		for _, id := range acked.connections {
			missing += 1 - testkit.CountRows(t, db, "connections", "id = ?", id)
		}
		for _, id := range acked.keys {
			missing += 1 - testkit.CountRows(t, db, "api_keys", "id = ?", id)
		}
		for id, n := range acked.combos {
			if got := testkit.CountRows(t, db, "combos", "id = ? AND json_array_length(targets) = ?", id, n); got != 1 {
				t.Errorf("round %d: combo %s with %d targets missing or partial", round, id, n)
			}
		}
		if missing > 0 {
			t.Errorf("round %d: %d acknowledged connections/keys missing after SIGKILL", round, missing)
		}
		if testkit.CountRows(t, db, "connections", "id = ? AND terminal_status = 'credits_exhausted'", stateConn["crashterm"]) != 1 {
			t.Errorf("round %d: the terminal state is gone", round)
		}
		if testkit.CountRows(t, db, "connections", "id = ? AND rate_limited_until > ?", stateConn["crashcool"], time.Now().UnixMilli()) != 1 {
			t.Errorf("round %d: the running cooldown is gone", round)
		}
		logRows := testkit.CountRows(t, db, "request_logs", "")
		db.Close()
		t.Logf("round %d: killed after %v; acked so far: %d connections, %d keys, %d combos; %d request-log rows",
			round, killAfter, len(acked.connections), len(acked.keys), len(acked.combos), logRows)
		wantBase, sentBase := acked.lockoutBase, acked.lockoutSent
		acked.mu.Unlock()

		// Restart on the same dir; the API sees the same.
		p = startGatewayProc(t, bin, dataDir, env)
		startups = append(startups, p.startup)
		api.base = p.base
		ctx2, cancel2 := context.WithTimeout(context.Background(), 10*time.Second)
		st, doc, err := api.do(ctx2, "GET", "/api/resilience", "")
		cancel2()
		if err != nil || st != 200 {
			t.Fatalf("round %d: GET /api/resilience after restart: %d %v", round, st, err)
		}
		if wantBase != 0 {
			ml, _ := doc["modelLockout"].(map[string]any)
			// The last acknowledged value, or a later one whose answer the kill cut off.
			if got, _ := ml["baseCooldownMs"].(float64); int64(got) < wantBase || int64(got) > sentBase {
				t.Errorf("round %d: modelLockout.baseCooldownMs %v after restart, last acknowledged %d, last sent %d", round, ml["baseCooldownMs"], wantBase, sentBase)
			}
		}
		if out := testkit.DoChat(context.Background(), hc, testkit.ChatCall{BaseURL: p.base, Key: inferKey, Model: "crashok/m1",
			Want: fakeupstream.DefaultContent}); out.Class != testkit.ClassOK {
			t.Errorf("round %d: proxying after restart: %v", round, out)
		}
	}
	var worst time.Duration
	for _, d := range startups {
		worst = max(worst, d)
	}
	t.Logf("restart to listening line: %v (worst %v, target < 2 s, measured only)", startups, worst.Round(time.Millisecond))
}
