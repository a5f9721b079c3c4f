package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"switchyard/internal/fakeupstream"
)

// Hidden subcommands: the harness runs the fake upstream and the bare proxy
// as child processes of its own binary (`bench fakeupstream`, `bench
// bareproxy`), so each role's CPU and RSS are measured on its own process.
// Each prints "listening on http://127.0.0.1:port" and serves until SIGTERM.
const readyPrefix = "listening on "

// runRole runs a hidden subcommand; ok is false when args name none.
func runRole(args []string) (ok bool, err error) {
	if len(args) == 0 {
		return false, nil
	}
	switch args[0] {
	case "fakeupstream":
		return true, roleFake(args[1:])
	case "bareproxy":
		return true, roleBare(args[1:])
	}
	return false, nil
}

func roleFake(args []string) error {
	fs := flag.NewFlagSet("fakeupstream", flag.ContinueOnError)
	events := fs.Int("events", 20, "content events per stream")
	gap := fs.Duration("event-gap", time.Millisecond, "pause between content events of the sse model")
	lat := fs.Duration("upstream-latency", 60*time.Millisecond, "fixed delay of the slow model")
	if err := fs.Parse(args); err != nil {
		return err
	}
	fu := newFake(*events, *gap, *lat)
	if err := fu.Listen("127.0.0.1:0"); err != nil {
		return err
	}
	fmt.Printf("%s%s\n", readyPrefix, fu.URL())
	waitTerm()
	fu.Close()
	return nil
}

// newFake is the fake upstream every topology uses, with the per-model
// scripts of the scenarios (see the model constants in topo.go).
func newFake(events int, gap, latency time.Duration) *fakeupstream.Server {
	fu := fakeupstream.New(fakeupstream.WithHitLog(fakeupstream.HitLogOff), fakeupstream.WithEvents(events))
	fu.ScriptModel("*", modelSlow, fakeupstream.Step{Delay: latency})
	fu.ScriptModel("*", modelSSE, fakeupstream.Step{EventGap: gap})
	fu.ScriptModel("*", modelIdle, fakeupstream.Step{Fault: fakeupstream.FaultStall, At: 1, StallFor: 10 * time.Minute})
	return fu
}

func roleBare(args []string) error {
	fs := flag.NewFlagSet("bareproxy", flag.ContinueOnError)
	target := fs.String("target", "", "upstream base URL")
	pprofAddr := fs.String("pprof-addr", "", "serve net/http/pprof on this loopback address")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *pprofAddr != "" {
		if err := servePprof(*pprofAddr); err != nil {
			return err
		}
	}
	h, _, err := newBareProxy(*target)
	if err != nil {
		return err
	}
	ln, err := loopbackListen()
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 120 * time.Second, ErrorLog: quietLog()}
	go srv.Serve(ln)
	fmt.Printf("%shttp://%s\n", readyPrefix, ln.Addr())
	waitTerm()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	srv.Shutdown(ctx)
	return nil
}

func waitTerm() {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGTERM, os.Interrupt)
	<-ch
}

// bufferPool is the sync.Pool BufferPool of 32 KiB buffers of the baseline.
type bufferPool struct{ p sync.Pool }

func (b *bufferPool) Get() []byte {
	if v := b.p.Get(); v != nil {
		return *(v.(*[]byte))
	}
	return make([]byte, 32<<10)
}
func (b *bufferPool) Put(buf []byte) { b.p.Put(&buf) }

// newBareProxy is the baseline of 60-quality §5.2: httputil.ReverseProxy with
// a pooled buffer, FlushInterval -1 and a keep-alive transport
// (MaxIdleConnsPerHost 4096).
func newBareProxy(targetURL string) (http.Handler, *http.Transport, error) {
	target, err := url.Parse(targetURL)
	if err != nil || target.Host == "" {
		return nil, nil, fmt.Errorf("bare proxy target %q: not a URL", targetURL)
	}
	// The request body (about 530 bytes) is read before it is forwarded, as
	// the gateway does. Streamed straight through, a few streams in a
	// thousand with gaps between events died mid-body on this Go version
	// ("use of closed network connection" on the upstream read).
	rp := &httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) {
		if b, err := io.ReadAll(pr.Out.Body); err == nil {
			pr.Out.Body = io.NopCloser(bytes.NewReader(b))
			pr.Out.ContentLength = int64(len(b))
		}
		pr.SetURL(target)
		pr.Out.Host = pr.In.Host // as NewSingleHostReverseProxy did: the client's Host goes through
	}}
	rp.FlushInterval = -1
	rp.BufferPool = &bufferPool{}
	rp.ErrorLog = quietLog()
	tr := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        4096,
		MaxIdleConnsPerHost: 4096,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}
	rp.Transport = tr
	return rp, tr, nil
}
