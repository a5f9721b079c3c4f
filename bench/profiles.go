package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	httppprof "net/http/pprof"
	"os"
	"runtime/pprof"
	"strconv"
	"time"
)

// Profiles with -profile-dir: of this process in process; of the gateway
// binary (SWITCHYARD_PPROF_ADDR) and the bare proxy (-pprof-addr) through
// their loopback pprof listeners in the process topology.

// freeLoopbackAddr is a 127.0.0.1 address with a port free a moment ago.
func freeLoopbackAddr() (string, error) {
	ln, err := loopbackListen()
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// pprofAddr is the pprof listener of the process serving path ("" = this
// process or none).
func (t *topology) pprofAddr(path string) string {
	if !t.procs {
		return ""
	}
	switch path {
	case "baseline":
		return t.barePprof
	case "gateway", "gateway-min":
		return t.gwPprof
	}
	return ""
}

// cpuProfile profiles the process serving path for about d into f and
// returns a function that waits for the profile to be written. f nil: no-op.
func (t *topology) cpuProfile(ctx context.Context, path string, f *os.File, d time.Duration) (wait func()) {
	if f == nil {
		return func() {}
	}
	if !t.procs {
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintf(os.Stderr, "bench: cpu profile: %v\n", err)
			return func() {}
		}
		return pprof.StopCPUProfile
	}
	addr := t.pprofAddr(path)
	if addr == "" {
		return func() {}
	}
	secs := max(1, int((d+time.Second-1)/time.Second))
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := fetchProfile(ctx, addr, "profile?seconds="+strconv.Itoa(secs), f); err != nil {
			fmt.Fprintf(os.Stderr, "bench: cpu profile of %s: %v\n", path, err)
		}
	}()
	return func() { <-done }
}

// dumpProfile writes the named profile (heap, goroutine) of the process
// serving path to f.
func (t *topology) dumpProfile(ctx context.Context, path, name string, debug int, f *os.File) {
	if f == nil {
		return
	}
	defer f.Close()
	if !t.procs {
		pprof.Lookup(name).WriteTo(f, debug)
		return
	}
	if addr := t.pprofAddr(path); addr != "" {
		if err := fetchProfile(ctx, addr, name+"?debug="+strconv.Itoa(debug), f); err != nil {
			fmt.Fprintf(os.Stderr, "bench: %s profile of %s: %v\n", name, path, err)
		}
	}
}

func fetchProfile(ctx context.Context, addr, query string, w io.Writer) error {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/debug/pprof/"+query, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %d", req.URL, resp.StatusCode)
	}
	_, err = io.Copy(w, resp.Body)
	return err
}

// servePprof serves net/http/pprof on addr for a role subcommand.
func servePprof(addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", httppprof.Index)
	mux.HandleFunc("/debug/pprof/profile", httppprof.Profile)
	go (&http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}).Serve(ln)
	return nil
}
