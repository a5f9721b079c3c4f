package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"
)

// child is one role of the process tree (fake upstream, bare proxy or
// gateway) running as its own process, so its CPU time and RSS are its own
// (60-quality §5.2).
type child struct {
	name    string
	cmd     *exec.Cmd
	url     string // base URL it printed ("http://127.0.0.1:port")
	logPath string // its stderr (and stdout after the URL line)
	done    chan struct{}
	waitErr error
}

// spawn starts name with args and env (added to the environment), waits
// for the line starting with readyPrefix on its stdout and takes the URL
// that follows. Its output goes to a log file in dir.
func spawn(ctx context.Context, dir, name string, env []string, readyPrefix string, argv ...string) (*child, error) {
	logPath := filepath.Join(dir, name+".log")
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = logf
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		logf.Close()
		return nil, err
	}
	// Its own process group: an interrupted run does not leave it behind
	// (the harness kills the group on the way out).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	c := &child{name: name, cmd: cmd, logPath: logPath, done: make(chan struct{})}
	urlc := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		sent := false
		for sc.Scan() {
			line := sc.Text()
			if rest, ok := strings.CutPrefix(line, readyPrefix); ok && !sent {
				urlc <- strings.TrimSpace(rest)
				sent = true
				continue
			}
			fmt.Fprintln(logf, line)
		}
		io.Copy(logf, stdout)
	}()
	go func() {
		c.waitErr = cmd.Wait()
		logf.Close()
		close(c.done)
	}()
	select {
	case u := <-urlc:
		c.url = u
		return c, nil
	case <-c.done:
		return nil, fmt.Errorf("%s exited before it listened (%v): %s", name, c.waitErr, tailFile(logPath, 2000))
	case <-time.After(30 * time.Second):
		c.kill()
		return nil, fmt.Errorf("%s did not listen within 30 s: %s", name, tailFile(logPath, 2000))
	case <-ctx.Done():
		c.kill()
		return nil, ctx.Err()
	}
}

func (c *child) pid() int { return c.cmd.Process.Pid }

// stop asks the process to shut down (SIGTERM: the gateway drains and
// flushes its request log) and kills it after grace.
func (c *child) stop(grace time.Duration) error {
	if c == nil {
		return nil
	}
	select {
	case <-c.done:
		return nil
	default:
	}
	c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.done:
		return nil
	case <-time.After(grace):
		c.kill()
		return fmt.Errorf("%s did not stop within %s; killed", c.name, grace)
	}
}

func (c *child) kill() {
	syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
	<-c.done
}

func tailFile(path string, n int) string {
	b, _ := os.ReadFile(path)
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return strings.TrimSpace(string(b))
}

// --- per-process measurements from /proc ---

// clockTick is the kernel's USER_HZ (the unit of utime/stime in
// /proc/<pid>/stat); 100 on every Linux this runs on.
const clockTick = 100

// procCPU is the user + system CPU time of pid (0 = this process).
func procCPU(pid int) time.Duration {
	if pid == 0 {
		return cpuTime()
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// The command name (field 2) may hold spaces; fields count from after its ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(s[i+1:])
	// After ')': state is field 3, so utime (14) and stime (15) are f[11], f[12].
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * time.Second / clockTick
}

// procStatus reads a "Name: N kB" line of /proc/<pid>/status (0 = self).
func procStatus(pid int, name string) int64 {
	p := "/proc/self/status"
	if pid != 0 {
		p = "/proc/" + strconv.Itoa(pid) + "/status"
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, name+":"); ok {
			if f := strings.Fields(v); len(f) > 0 {
				n, _ := strconv.ParseInt(f[0], 10, 64)
				return n
			}
		}
	}
	return 0
}

// --- CPU pinning (sched_setaffinity on every thread) ---

// cpuMask is a CPU set for sched_setaffinity (up to 1,024 CPUs).
type cpuMask [16]uint64

func maskOf(cpus ...int) cpuMask {
	var m cpuMask
	for _, c := range cpus {
		m[c/64] |= 1 << (c % 64)
	}
	return m
}

func allCPUs() cpuMask {
	cpus := make([]int, runtime.NumCPU())
	for i := range cpus {
		cpus[i] = i
	}
	return maskOf(cpus...)
}

// setAffinity pins every thread of pid (0 = this process) to m. Threads
// created later inherit the mask of the thread that creates them, so a
// process pinned this way stays pinned. It is what `taskset -a -p` does.
func setAffinity(pid int, m cpuMask) error {
	dir := "/proc/self/task"
	if pid != 0 {
		dir = "/proc/" + strconv.Itoa(pid) + "/task"
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range ents {
		tid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if _, _, en := syscall.RawSyscall(syscall.SYS_SCHED_SETAFFINITY, uintptr(tid), unsafe.Sizeof(m), uintptr(unsafe.Pointer(&m))); en != 0 && en != syscall.ESRCH {
			errs = append(errs, fmt.Errorf("thread %d: %w", tid, en))
		}
	}
	return errors.Join(errs...)
}

// canPin reports whether this machine and the flags allow pinning.
func canPin(cfg *config) bool {
	return cfg.pin == "auto" && runtime.NumCPU() >= 2 && runtime.GOOS == "linux"
}

// rssSampler samples VmRSS of a process every interval until stopped.
type rssSampler struct {
	stop    chan struct{}
	done    chan struct{}
	mu      sync.Mutex
	samples []int64
}

func startRSS(pid int, interval time.Duration) *rssSampler {
	s := &rssSampler{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			s.mu.Lock()
			s.samples = append(s.samples, procStatus(pid, "VmRSS"))
			s.mu.Unlock()
			select {
			case <-s.stop:
				return
			case <-t.C:
			}
		}
	}()
	return s
}

// finish returns mean and peak RSS in MiB.
func (s *rssSampler) finish() (mean, peak float64) {
	close(s.stop)
	<-s.done
	var sum, mx int64
	for _, v := range s.samples {
		sum += v
		mx = max(mx, v)
	}
	if len(s.samples) == 0 {
		return 0, 0
	}
	return float64(sum) / float64(len(s.samples)) / 1024, float64(mx) / 1024
}

// raiseNoFile sets RLIMIT_NOFILE's soft limit to the hard limit through
// syscall.Setrlimit, which (unlike the runtime's own raise at start) child
// processes inherit: 2,000 idle streams hold about 6,000 sockets across the
// tree.
func raiseNoFile(rep *report) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return
	}
	rl.Cur = rl.Max
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		rep.warn("RLIMIT_NOFILE: %v", err)
	}
	rep.detail("rlimit_nofile", rl.Cur)
}
