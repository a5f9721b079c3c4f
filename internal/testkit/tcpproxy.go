package testkit

import (
	"net"
	"net/url"
	"sync"
	"testing"
	"time"
)

// TCPProxy forwards loopback TCP connections to a target and can cut them:
// the tests of a shared database that goes away (its pool and the change
// feed's listener connect through it) without stopping the server other
// tests share. Cut closes every forwarded connection and the listener, so
// new connections are refused as by a stopped server; Restore listens on
// the same address again.
type TCPProxy struct {
	target string
	addr   string

	mu     sync.Mutex
	ln     net.Listener
	conns  map[net.Conn]struct{}
	thawed chan struct{} // closed while bytes flow; open while frozen
}

// StartTCPProxy listens on a free loopback port and forwards to target
// (host:port). It stops on cleanup.
func StartTCPProxy(t testing.TB, target string) *TCPProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("tcp proxy: %v", err)
	}
	p := &TCPProxy{target: target, addr: ln.Addr().String(), conns: map[net.Conn]struct{}{}, thawed: make(chan struct{})}
	close(p.thawed)
	p.serve(ln)
	t.Cleanup(p.Cut)
	return p
}

// Addr is where the proxy listens (the same after a Restore).
func (p *TCPProxy) Addr() string { return p.addr }

// URL returns dsn (a postgres:// URL) with its host and port replaced by the
// proxy's.
func (p *TCPProxy) URL(t testing.TB, dsn string) string {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatalf("tcp proxy: %v", err)
	}
	u.Host = p.addr
	return u.String()
}

// Freeze stops forwarding bytes while keeping every connection open and
// accepting new ones: a network that silently drops packets.
func (p *TCPProxy) Freeze() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.thawed:
		p.thawed = make(chan struct{})
	default:
	}
}

// Thaw forwards again what Freeze held.
func (p *TCPProxy) Thaw() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.thawed:
	default:
		close(p.thawed)
	}
}

func (p *TCPProxy) waitThawed() {
	p.mu.Lock()
	ch := p.thawed
	p.mu.Unlock()
	<-ch
}

// Cut closes the listener and every forwarded connection (and ends a
// Freeze).
func (p *TCPProxy) Cut() {
	p.Thaw()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		c.Close()
	}
	clear(p.conns)
}

// Restore listens again on the proxy's address (retried for up to 5 s
// while the port is still being released).
func (p *TCPProxy) Restore(t testing.TB) {
	t.Helper()
	var ln net.Listener
	var err error
	deadline := time.Now().Add(5 * time.Second)
	for {
		if ln, err = net.Listen("tcp", p.addr); err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("tcp proxy: listen again on %s: %v", p.addr, err)
	}
	p.serve(ln)
}

func (p *TCPProxy) serve(ln net.Listener) {
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.forward(c)
		}
	}()
}

func (p *TCPProxy) track(cs ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln == nil {
		return false
	}
	for _, c := range cs {
		p.conns[c] = struct{}{}
	}
	return true
}

func (p *TCPProxy) forward(c net.Conn) {
	up, err := net.DialTimeout("tcp", p.target, 5*time.Second)
	if err != nil {
		c.Close()
		return
	}
	if !p.track(c, up) {
		c.Close()
		up.Close()
		return
	}
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		buf := make([]byte, 32<<10)
		for {
			n, err := src.Read(buf)
			if n > 0 {
				p.waitThawed()
				if _, werr := dst.Write(buf[:n]); werr != nil {
					break
				}
			}
			if err != nil {
				break
			}
		}
		done <- struct{}{}
	}
	go pipe(up, c)
	go pipe(c, up)
	<-done
	c.Close()
	up.Close()
	<-done
	p.mu.Lock()
	delete(p.conns, c)
	delete(p.conns, up)
	p.mu.Unlock()
}
