package redistest

import (
	"bytes"
	"context"
	"io"
	"net"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// fakeClock is a proxy's time that moves only when the test advances it.
// It counts the chunks stamped (now) and the waits that blocked.
type fakeClock struct {
	mu       sync.Mutex
	changed  *sync.Cond // broadcast on every stamp, wait and advance
	t        time.Time
	stamps   int
	blocked  int
	sleepers []fakeSleeper
}

type fakeSleeper struct {
	at time.Time
	ch chan struct{}
}

func newFakeClock() *fakeClock {
	c := &fakeClock{t: time.Unix(1e9, 0)}
	c.changed = sync.NewCond(&c.mu)
	return c
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stamps++
	c.changed.Broadcast()
	return c.t
}

func (c *fakeClock) waiter() waiter { return fakeWaiter{c} }

type fakeWaiter struct{ c *fakeClock }

func (w fakeWaiter) now() time.Time {
	w.c.mu.Lock()
	defer w.c.mu.Unlock()
	return w.c.t
}

func (w fakeWaiter) until(t time.Time, done <-chan struct{}) bool {
	c := w.c
	c.mu.Lock()
	if !t.After(c.t) {
		c.mu.Unlock()
		return true
	}
	s := fakeSleeper{t, make(chan struct{})}
	c.sleepers = append(c.sleepers, s)
	c.blocked++
	c.changed.Broadcast()
	c.mu.Unlock()
	select {
	case <-s.ch:
		return true
	case <-done:
		return false
	}
}

func (fakeWaiter) close() {}

// advance moves the clock on by d and wakes the waits that are due.
func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
	kept := c.sleepers[:0]
	for _, s := range c.sleepers {
		if s.at.After(c.t) {
			kept = append(kept, s)
		} else {
			close(s.ch)
		}
	}
	c.sleepers = kept
	c.changed.Broadcast()
}

// await blocks until cond holds of the clock, or fails the test after a
// long while (a hang, not a timing assertion).
func (c *fakeClock) await(t *testing.T, what string, cond func(*fakeClock) bool) {
	t.Helper()
	stop := time.AfterFunc(30*time.Second, func() {
		c.mu.Lock()
		c.changed.Broadcast()
		c.mu.Unlock()
	})
	defer stop.Stop()
	start := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	for !cond(c) {
		if time.Since(start) > 30*time.Second {
			t.Fatalf("proxy never got to: %s (stamps %d, blocked %d, sleepers %v)", what, c.stamps, c.blocked, c.sleepers)
		}
		c.changed.Wait()
	}
}

// sleeperAt reports whether one delivering goroutine waits, for t.
func sleeperAt(t time.Time) func(*fakeClock) bool {
	return func(c *fakeClock) bool { return len(c.sleepers) == 1 && c.sleepers[0].at.Equal(t) }
}

// readN reads exactly n bytes from c, or fails the test after a long while.
func readN(t *testing.T, c net.Conn, n int) string {
	t.Helper()
	buf := make([]byte, n)
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.ReadFull(c, buf); err != nil {
		t.Fatalf("read %d bytes: got %q, %v", n, buf, err)
	}
	return string(buf)
}

// delayedPair starts a proxy on a fake clock in front of a bare TCP
// listener and returns the clock and both ends of one connection through
// it: the client's and the server's.
func delayedPair(t *testing.T, toServer, toClient time.Duration) (*fakeClock, net.Conn, net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	clk := newFakeClock()
	p, err := startProxy(ln.Addr().String(), clk)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	p.Delay(toServer, toClient)
	client, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })
	server, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = server.Close() })
	return clk, client, server
}

// TestProxyDelayPerChunk checks, on a clock the test moves, that each
// chunk is forwarded D after it arrived, in each direction: a chunk that
// arrived D/2 after another is forwarded D/2 after it, not D after it (a
// delay line, not a queue of delays), and a burst of chunks that arrived
// together is forwarded after one wait of D, not one per chunk. Bytes keep
// their order.
func TestProxyDelayPerChunk(t *testing.T) {
	const d = 10 * time.Millisecond
	for _, dir := range []string{"toServer", "toClient"} {
		t.Run(dir, func(t *testing.T) {
			var clk *fakeClock
			var from, to net.Conn
			if dir == "toServer" {
				clk, from, to = delayedPair(t, d, 0)
			} else {
				var client, server net.Conn
				clk, client, server = delayedPair(t, 0, d)
				from, to = server, client
			}
			t0 := clk.now()
			stamped := func(n int) func(*fakeClock) bool {
				base := clk.stamps
				return func(c *fakeClock) bool { return c.stamps >= base+n }
			}
			send := func(s string) {
				t.Helper()
				arrived := stamped(1)
				if _, err := from.Write([]byte(s)); err != nil {
					t.Fatal(err)
				}
				clk.await(t, "read "+strconv.Quote(s), arrived)
			}

			send("a")
			clk.await(t, "wait for a's time, t0+D", sleeperAt(t0.Add(d)))
			clk.advance(d / 2)
			send("b") // at t0 + D/2
			clk.advance(d / 2)
			if got := readN(t, to, 1); got != "a" {
				t.Fatalf("at t0+D got %q, want a", got)
			}
			// b waits for its own time, D after it arrived: t0 + 1.5 D.
			clk.await(t, "wait for b's time, t0+1.5D", sleeperAt(t0.Add(d+d/2)))
			clk.advance(d / 2)
			if got := readN(t, to, 1); got != "b" {
				t.Fatalf("at t0+1.5D got %q, want b", got)
			}

			// A burst: 20 chunks that arrive while the clock stands still
			// are forwarded, in order, after one wait.
			clk.mu.Lock()
			blocked, t1 := clk.blocked, clk.t
			clk.mu.Unlock()
			var want bytes.Buffer
			for i := range 20 {
				s := strconv.Itoa(i) + ","
				send(s)
				want.WriteString(s)
			}
			clk.await(t, "wait for the burst's time", sleeperAt(t1.Add(d)))
			clk.advance(d)
			if got := readN(t, to, want.Len()); got != want.String() {
				t.Fatalf("burst: got %q, want %q", got, want.String())
			}
			clk.mu.Lock()
			extra := clk.blocked - blocked
			clk.mu.Unlock()
			if extra != 1 {
				t.Fatalf("the burst of 20 chunks waited %d times, want once", extra)
			}
		})
	}
}

// TestProxyDelayCloseDelivers checks that what is in flight when a client
// closes its connection still arrives, at its time, before the close.
func TestProxyDelayCloseDelivers(t *testing.T) {
	const d = 10 * time.Millisecond
	clk, client, server := delayedPair(t, d, 0)
	t0 := clk.now()
	if _, err := client.Write([]byte("last")); err != nil {
		t.Fatal(err)
	}
	clk.await(t, "wait for the chunk's time", sleeperAt(t0.Add(d)))
	_ = client.Close()
	clk.advance(d)
	_ = server.SetReadDeadline(time.Now().Add(30 * time.Second))
	got, err := io.ReadAll(server)
	if string(got) != "last" {
		t.Fatalf("after the close the server read %q (%v), want last", got, err)
	}
}

// TestProxyDelayRedis runs commands through a delaying proxy on the real
// clock: replies are whole and in order, a value larger than the proxy's
// buffer included, and a pipeline's replies all come back.
func TestProxyDelayRedis(t *testing.T) {
	mr := miniredis.RunT(t)
	p := NewProxy(t, mr.Addr())
	p.Delay(200*time.Microsecond, 300*time.Microsecond)
	rdb := redis.NewClient(&redis.Options{Addr: p.Addr(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = rdb.Close() })
	ctx := ctxT(t)
	big := bytes.Repeat([]byte("0123456789abcdef"), 20<<10) // 320 KiB
	if err := rdb.Set(ctx, "big", big, 0).Err(); err != nil {
		t.Fatal(err)
	}
	if got, err := rdb.Get(ctx, "big").Bytes(); err != nil || !bytes.Equal(got, big) {
		t.Fatalf("GET big: %d bytes, %v", len(got), err)
	}
	cmds, err := rdb.Pipelined(ctx, func(pipe redis.Pipeliner) error {
		for i := range 100 {
			pipe.Incr(ctx, "n")
			_ = i
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range cmds {
		if v, err := c.(*redis.IntCmd).Result(); err != nil || v != int64(i+1) {
			t.Fatalf("INCR #%d = %d, %v", i, v, err)
		}
	}
	p.Delay(0, 0) // back to no delay, on the same connections: still in order
	for i := range 10 {
		if v, err := rdb.Incr(ctx, "n").Result(); err != nil || v != int64(101+i) {
			t.Fatalf("INCR after the delay = %d, %v", v, err)
		}
	}
}

// BenchmarkProxyDelay reports the round trip of a PING and of a pipeline
// of 100 PINGs through a proxy that delays each direction by D, and what
// it takes over 2·D: a pipeline costs one round trip, not one per
// command. Against the real server when TOOLGUARD_REDIS_URL is set (it
// answers a pipeline in one write), else miniredis (in this process, and
// it writes each reply apart, so each is a chunk of its own).
func BenchmarkProxyDelay(b *testing.B) {
	target := ""
	if url := os.Getenv(EnvURL); url != "" {
		opt, err := redis.ParseURL(url)
		if err != nil {
			b.Fatal(err)
		}
		target = opt.Addr
	} else {
		target = miniredis.RunT(b).Addr()
	}
	for _, d := range []time.Duration{0, 250 * time.Microsecond, time.Millisecond} {
		for _, n := range []int{1, 100} {
			b.Run("D="+d.String()+"/pipeline="+strconv.Itoa(n), func(b *testing.B) {
				p := NewProxy(b, target)
				p.Delay(d, d)
				rdb := redis.NewClient(&redis.Options{Addr: p.Addr(), ContextTimeoutEnabled: true})
				defer rdb.Close()
				ctx := context.Background()
				if err := rdb.Ping(ctx).Err(); err != nil {
					b.Fatal(err)
				}
				b.ResetTimer()
				start := time.Now()
				for range b.N {
					if _, err := rdb.Pipelined(ctx, func(pipe redis.Pipeliner) error {
						for range n {
							pipe.Ping(ctx)
						}
						return nil
					}); err != nil {
						b.Fatal(err)
					}
				}
				per := time.Since(start) / time.Duration(b.N)
				b.ReportMetric(float64(per.Microseconds()), "rtt-µs")
				b.ReportMetric(float64((per - 2*d).Microseconds()), "over-2D-µs")
			})
		}
	}
}
