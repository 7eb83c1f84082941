package redistest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
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
//     clients run into their read timeouts, until Resume or Restore;
//   - Delay models a network's latency: each chunk of bytes is forwarded a
//     fixed time after it arrived, in each direction;
//   - LoseReplies lets requests reach the server and loses their replies:
//     the link closes before the answer reaches the client, which resends.
//
// Point a client at Addr instead of the server. A Proxy is safe for
// concurrent use and is closed, with all its goroutines, when the test ends
// (or, from StartProxy, by Close).
type Proxy struct {
	target string
	ln     net.Listener
	wg     sync.WaitGroup
	clock  clock // when a delayed chunk was read, and waiting for its time

	delay [2]atomic.Int64 // toServer, toClient: nanoseconds

	mu      sync.Mutex
	closed  bool
	cut     bool
	paused  bool
	resumed chan struct{} // closed when a Pause ends; valid while paused
	links   map[*link]struct{}

	loseMatch []byte       // LoseReplies: requests whose replies are lost contain it
	loseLeft  int          // … for so many more requests
	losing    atomic.Bool  // loseLeft > 0: chunks are matched (a lock-free test for the rest)
	lost      atomic.Int64 // replies lost so far
}

// link is one proxied client connection and its upstream connection.
type link struct {
	client, upstream net.Conn
	once             sync.Once
	done             chan struct{}
	// losing: a request whose reply is to be lost went to the server; the
	// server's next bytes are dropped and the link closed (LoseReplies).
	losing atomic.Bool
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
	p, err := StartProxy(target)
	if err != nil {
		tb.Fatalf("redistest: %v", err)
	}
	tb.Cleanup(p.Close)
	return p
}

// StartProxy is NewProxy outside a test (cmd/toolbench's -rtt runs its
// Redis clients through one): the caller closes the proxy.
func StartProxy(target string) (*Proxy, error) {
	return startProxy(target, realClock{})
}

func startProxy(target string, clk clock) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("proxy listen: %w", err)
	}
	p := &Proxy{target: target, ln: ln, clock: clk, links: make(map[*link]struct{})}
	p.wg.Go(p.acceptLoop)
	return p, nil
}

// Delay makes the proxy forward each chunk of bytes it reads from a client
// toServer after it arrived, and each chunk from the server toClient after,
// on every connection, old and new, from the next chunk read on; zero (the
// default) forwards at once. It models a network's latency, not its
// bandwidth: a chunk waits for its own time only, not behind the delay of
// the chunks before it, so a pipeline of many commands costs one delay,
// and a round trip toServer + toClient more. Bytes keep their order, and
// the proxy buffers what is in flight, however much. A chunk is what one
// read of the socket returned. On Linux a timerfd wakes the proxy, early
// by as much as it has lately woken late, so that chunks go on average at
// their time (within tens of microseconds on an idle machine; a busy one
// delays the reads that stamp them too); elsewhere Go's timers are as
// precise as the scheduler makes them (often 1 ms).
func (p *Proxy) Delay(toServer, toClient time.Duration) {
	p.delay[toServerDir].Store(int64(max(toServer, 0)))
	p.delay[toClientDir].Store(int64(max(toClient, 0)))
}

// The directions of a link, indexes of Proxy.delay.
const (
	toServerDir = 0
	toClientDir = 1
)

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

// LoseReplies loses the replies to the next n requests that contain match,
// byte for byte (go-redis sends command names in lower case), on any link.
// A request is what one read of the client's socket returned: a pipeline's
// requests count as one. The request goes to the server, and when the
// server's answer comes, the proxy drops it and closes the link, orderly on
// both sides. The server ran the request: it had the bytes before the
// close, and runs all it was sent before an orderly close. The client reads
// the end of the connection (io.EOF), which go-redis takes for a lost reply
// and resends on a new connection, up to its MaxRetries. n ≤ 0 stops losing
// replies.
func (p *Proxy) LoseReplies(match string, n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.loseMatch, p.loseLeft = []byte(match), max(n, 0)
	p.losing.Store(p.loseLeft > 0)
}

// Lost returns how many replies the proxy lost so far (LoseReplies).
func (p *Proxy) Lost() int64 { return p.lost.Load() }

// losesReply reports whether the reply to the request in chunk is to be
// lost, and counts it if so.
func (p *Proxy) losesReply(chunk []byte) bool {
	if !p.losing.Load() {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.loseLeft <= 0 || !bytes.Contains(chunk, p.loseMatch) {
		return false
	}
	p.loseLeft--
	p.losing.Store(p.loseLeft > 0)
	return true
}

// loseReply drops the server's answer on l and closes the link, orderly on
// both sides (LoseReplies).
func (p *Proxy) loseReply(l *link) {
	p.lost.Add(1)
	l.once.Do(func() {
		close(l.done)
		_ = l.client.Close()
		_ = l.upstream.Close()
	})
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

	p.wg.Go(func() { p.pump(l, up, c, toClientDir) })
	p.pump(l, c, up, toServerDir)
}

// pump copies src to dst, holding data while the proxy is paused. Any error
// on either side tears down the whole link. While the direction has no
// delay, each chunk is written as soon as it is read; from the first chunk
// that has one, chunks go through a delay line (for the link's life, so
// that none overtakes another).
func (p *Proxy) pump(l *link, src, dst net.Conn, dir int) {
	defer func() {
		l.close()
		p.mu.Lock()
		delete(p.links, l)
		p.mu.Unlock()
	}()
	var line *delayLine
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && dir == toClientDir && l.losing.Load() {
			p.loseReply(l)
			return
		}
		if n > 0 && dir == toServerDir && p.losesReply(buf[:n]) {
			l.losing.Store(true)
		}
		if n > 0 {
			d := time.Duration(p.delay[dir].Load())
			if line == nil && d > 0 {
				line = newDelayLine()
				p.wg.Go(func() { p.deliver(l, line, dst) })
			}
			if line != nil {
				line.put(append([]byte(nil), buf[:n]...), p.clock.now().Add(d))
			} else {
				if !p.waitRunning(l) {
					return
				}
				if _, werr := dst.Write(buf[:n]); werr != nil {
					return
				}
			}
		}
		if err != nil {
			if line != nil && errors.Is(err, io.EOF) {
				// An orderly close: what is in flight arrives first.
				line.end()
				select {
				case <-line.drained:
				case <-l.done:
				}
			}
			return
		}
	}
}

// delayLine holds the chunks of one direction of a link until their time.
type delayLine struct {
	mu      sync.Mutex
	chunks  []chunk
	ended   bool          // no more chunks will come
	wake    chan struct{} // (buffered) a chunk was put, or the line ended
	drained chan struct{} // closed when the line ended and every chunk was delivered
}

// chunk is what one read returned, and when it is to be forwarded.
type chunk struct {
	data []byte
	at   time.Time
}

func newDelayLine() *delayLine {
	return &delayLine{wake: make(chan struct{}, 1), drained: make(chan struct{})}
}

// put queues data to be forwarded at at.
func (q *delayLine) put(data []byte, at time.Time) {
	q.mu.Lock()
	q.chunks = append(q.chunks, chunk{data, at})
	q.mu.Unlock()
	q.signal()
}

// end says no more chunks will come.
func (q *delayLine) end() {
	q.mu.Lock()
	q.ended = true
	q.mu.Unlock()
	q.signal()
}

func (q *delayLine) signal() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// due takes the chunks whose time is at or before now, and reports the
// time of the first chunk left (zero if none) and whether the line ended.
func (q *delayLine) due(now time.Time) (data net.Buffers, next time.Time, ended bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	n := 0
	for n < len(q.chunks) && !q.chunks[n].at.After(now) {
		data = append(data, q.chunks[n].data)
		n++
	}
	rest := copy(q.chunks, q.chunks[n:])
	clear(q.chunks[rest:])
	q.chunks = q.chunks[:rest]
	if rest > 0 {
		next = q.chunks[0].at
	}
	return data, next, q.ended && rest == 0
}

// deliver writes line's chunks to dst, each at its time, all that are due
// at once in one write, until the link closes or the line ends and is
// empty.
func (p *Proxy) deliver(l *link, line *delayLine, dst net.Conn) {
	w := p.clock.waiter()
	defer w.close()
	for {
		data, next, ended := line.due(w.now())
		if len(data) > 0 {
			if !p.waitRunning(l) {
				return
			}
			if _, err := data.WriteTo(dst); err != nil {
				return
			}
			continue // more may have come due meanwhile
		}
		if ended {
			close(line.drained)
			return
		}
		if next.IsZero() {
			select {
			case <-line.wake:
			case <-l.done:
				return
			}
			continue
		}
		if !w.until(next, l.done) {
			return
		}
	}
}

// clock is the proxy's time: real, or a test's.
type clock interface {
	// now is when a chunk was read.
	now() time.Time
	// waiter returns a waiter for one goroutine.
	waiter() waiter
}

// waiter is a delivering goroutine's time: it reads it and waits for it.
type waiter interface {
	now() time.Time
	// until returns at t, or false as soon as done is closed.
	until(t time.Time, done <-chan struct{}) bool
	close()
}

// realClock is the system's clock, with a precise waiter where there is
// one (proxy_linux.go).
type realClock struct{}

func (realClock) now() time.Time { return time.Now() }

func (realClock) waiter() waiter {
	if w := preciseWaiter(); w != nil {
		return w
	}
	return timerWaiter{}
}

// timerWaiter waits on a Go timer.
type timerWaiter struct{}

func (timerWaiter) now() time.Time { return time.Now() }

func (timerWaiter) until(t time.Time, done <-chan struct{}) bool {
	tm := time.NewTimer(time.Until(t))
	defer tm.Stop()
	select {
	case <-tm.C:
		return true
	case <-done:
		return false
	}
}

func (timerWaiter) close() {}

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
