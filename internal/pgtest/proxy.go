package pgtest

import (
	"net"
	"net/url"
	"sync"
	"testing"
)

// Proxy is a TCP proxy in front of the test server that a test cuts or
// stalls to play a database outage without stopping the server, which
// other tests share. It is safe for concurrent use.
type Proxy struct {
	target string // host:port of the server

	mu      sync.Mutex
	addr    string // where it listens; the same across Cut and Restore
	ln      net.Listener
	conns   map[net.Conn]bool
	stalled bool
	stall   chan struct{} // closed by Restore, to release stalled copies
	wg      sync.WaitGroup
}

// NewProxy starts a proxy to the server of dsn on a free loopback port and
// returns it with dsn rewritten to go through it. It is closed when the test
// ends.
func NewProxy(t testing.TB, dsn string) (*Proxy, string) {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatalf("pgtest: parse DSN: %v", err)
	}
	p := &Proxy{target: u.Host, conns: map[net.Conn]bool{}, stall: make(chan struct{})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("pgtest: proxy listen: %v", err)
	}
	p.addr = ln.Addr().String()
	p.serve(ln)
	t.Cleanup(p.close)
	u.Host = p.addr
	return p, u.String()
}

// Cut stops the proxy listening and closes every connection through it: the
// server is gone, as when it stops. New connections are refused until
// Restore.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		_ = p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		_ = c.Close()
	}
}

// Stall keeps connections open but forwards nothing more, either way: the
// server hangs, as under a network partition. Restore ends it.
func (p *Proxy) Stall() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stalled = true
}

// Restore ends a Cut or a Stall: the proxy listens again on the same
// address and forwards.
func (p *Proxy) Restore() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stalled {
		p.stalled = false
		close(p.stall)
		p.stall = make(chan struct{})
	}
	if p.ln != nil {
		return nil
	}
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		return err
	}
	p.serveLocked(ln)
	return nil
}

func (p *Proxy) serve(ln net.Listener) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.serveLocked(ln)
}

func (p *Proxy) serveLocked(ln net.Listener) {
	p.ln = ln
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.wg.Add(1)
			go func() {
				defer p.wg.Done()
				p.forward(c)
			}()
		}
	}()
}

// forward joins client c to a new connection to the server until either
// ends or the proxy is cut.
func (p *Proxy) forward(c net.Conn) {
	s, err := net.Dial("tcp", p.target)
	if err != nil {
		_ = c.Close()
		return
	}
	p.mu.Lock()
	if p.ln == nil { // cut while dialling
		p.mu.Unlock()
		_ = c.Close()
		_ = s.Close()
		return
	}
	p.conns[c], p.conns[s] = true, true
	p.mu.Unlock()
	var wg sync.WaitGroup
	pipe := func(dst, src net.Conn) {
		defer wg.Done()
		buf := make([]byte, 32<<10)
		for {
			n, err := src.Read(buf)
			if n > 0 {
				p.mu.Lock()
				stalled, release := p.stalled, p.stall
				p.mu.Unlock()
				if stalled {
					<-release // the bytes wait, like a partition's
				}
				if _, werr := dst.Write(buf[:n]); werr != nil {
					break
				}
			}
			if err != nil {
				break
			}
		}
		// Either side ending ends both.
		_ = c.Close()
		_ = s.Close()
	}
	wg.Add(2)
	go pipe(s, c)
	go pipe(c, s)
	wg.Wait()
	p.mu.Lock()
	delete(p.conns, c)
	delete(p.conns, s)
	p.mu.Unlock()
}

// close stops the proxy for good and waits for its goroutines.
func (p *Proxy) close() {
	p.Cut()
	p.mu.Lock()
	if p.stalled {
		p.stalled = false
		close(p.stall)
	}
	p.mu.Unlock()
	p.wg.Wait()
}
