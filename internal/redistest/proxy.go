package redistest

import (
	"errors"
	"net"
	"sync"
	"testing"
	"time"
)

// proxyDialTimeout bounds the proxy's connection attempts to its target.
const proxyDialTimeout = 5 * time.Second

// Proxy is a TCP proxy on 127.0.0.1 that forwards every connection to a
// target address and can inject faults between a client and a Redis server:
//
//   - Cut drops every connection (with a TCP reset) and resets new ones
//     until Restore;
//   - Pause holds all bytes in both directions, keeping connections open so
//     clients run into their read timeouts, until Resume or Restore.
//
// Point a client at Addr instead of the server. A Proxy is safe for
// concurrent use and is closed, with all its goroutines, when the test ends.
type Proxy struct {
	target string
	ln     net.Listener
	wg     sync.WaitGroup

	mu      sync.Mutex
	closed  bool
	cut     bool
	paused  bool
	resumed chan struct{} // closed when a Pause ends; valid while paused
	links   map[*link]struct{}
}

// link is one proxied client connection and its upstream connection.
type link struct {
	client, upstream net.Conn
	once             sync.Once
	done             chan struct{}
}

func (l *link) close() {
	l.once.Do(func() {
		close(l.done)
		resetClose(l.client)
		resetClose(l.upstream)
	})
}

// resetClose closes c so that the peer sees a reset rather than an orderly
// EOF, like a crashed server or a dropped network path.
func resetClose(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = c.Close()
}

// NewProxy starts a proxy listening on 127.0.0.1 (random port) that forwards
// to target (host:port). It fails tb if it cannot listen, and is closed when
// tb's test ends.
func NewProxy(tb testing.TB, target string) *Proxy {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("redistest: proxy listen: %v", err)
	}
	p := &Proxy{target: target, ln: ln, links: make(map[*link]struct{})}
	p.wg.Go(p.acceptLoop)
	tb.Cleanup(p.Close)
	return p
}

// Addr returns the host:port clients should connect to.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Cut closes every current connection with a TCP reset and makes the proxy
// reset new connections immediately, until Restore is called.
func (p *Proxy) Cut() {
	p.mu.Lock()
	p.cut = true
	links := p.takeLinksLocked()
	p.mu.Unlock()
	for _, l := range links {
		l.close()
	}
}

// Pause stops forwarding bytes in both directions. Connections, old and new,
// stay open, so requests go unanswered and clients time out. Bytes received
// while paused are delivered after Resume or Restore.
func (p *Proxy) Pause() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.paused {
		p.paused = true
		p.resumed = make(chan struct{})
	}
}

// Resume ends a Pause: held and new bytes flow again. It does not undo Cut.
func (p *Proxy) Resume() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.resumeLocked()
}

// Restore returns the proxy to normal service, undoing both Cut and Pause.
// Connections dropped by Cut stay dropped; clients must reconnect.
func (p *Proxy) Restore() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = false
	p.resumeLocked()
}

func (p *Proxy) resumeLocked() {
	if p.paused {
		p.paused = false
		close(p.resumed)
	}
}

// Close stops the listener, drops every connection and waits for all of the
// proxy's goroutines to exit. It is called automatically at the end of the
// test and may be called more than once.
func (p *Proxy) Close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		p.wg.Wait()
		return
	}
	p.closed = true
	links := p.takeLinksLocked()
	p.mu.Unlock()
	_ = p.ln.Close()
	for _, l := range links {
		l.close()
	}
	p.wg.Wait()
}

func (p *Proxy) takeLinksLocked() []*link {
	links := make([]*link, 0, len(p.links))
	for l := range p.links {
		links = append(links, l)
	}
	clear(p.links)
	return links
}

func (p *Proxy) acceptLoop() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// Transient (e.g. out of file descriptors): back off briefly.
			time.Sleep(10 * time.Millisecond)
			continue
		}
		p.mu.Lock()
		refuse := p.cut || p.closed
		p.mu.Unlock()
		if refuse {
			resetClose(c)
			continue
		}
		p.wg.Go(func() { p.serve(c) })
	}
}

// serve dials the target for client connection c and pumps bytes both ways.
func (p *Proxy) serve(c net.Conn) {
	up, err := net.DialTimeout("tcp", p.target, proxyDialTimeout)
	if err != nil {
		resetClose(c)
		return
	}
	l := &link{client: c, upstream: up, done: make(chan struct{})}
	p.mu.Lock()
	if p.cut || p.closed {
		// Cut or closed while we were dialing.
		p.mu.Unlock()
		l.close()
		return
	}
	p.links[l] = struct{}{}
	p.mu.Unlock()

	p.wg.Go(func() { p.pump(l, up, c) })
	p.pump(l, c, up)
}

// pump copies src to dst, holding data while the proxy is paused. Any error
// on either side tears down the whole link.
func (p *Proxy) pump(l *link, src, dst net.Conn) {
	defer func() {
		l.close()
		p.mu.Lock()
		delete(p.links, l)
		p.mu.Unlock()
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if !p.waitRunning(l) {
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// waitRunning blocks while the proxy is paused. It reports false if the link
// was closed in the meantime.
func (p *Proxy) waitRunning(l *link) bool {
	for {
		p.mu.Lock()
		paused, resumed := p.paused, p.resumed
		p.mu.Unlock()
		if !paused {
			select {
			case <-l.done:
				return false
			default:
				return true
			}
		}
		select {
		case <-resumed:
		case <-l.done:
			return false
		}
	}
}
