package redistest

import (
	"context"
	"errors"
	"io"
	"net"
	"runtime"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// proxied starts miniredis behind a Proxy and returns a client that goes
// through the proxy, with no retries and short timeouts so faults surface
// quickly.
func proxied(t *testing.T) (*miniredis.Miniredis, *Proxy, *redis.Client) {
	t.Helper()
	mr := miniredis.RunT(t)
	p := NewProxy(t, mr.Addr())
	rdb := redis.NewClient(&redis.Options{ContextTimeoutEnabled: true,
		Addr:         p.Addr(),
		MaxRetries:   -1,
		DialTimeout:  time.Second,
		ReadTimeout:  300 * time.Millisecond,
		WriteTimeout: 300 * time.Millisecond,
	})
	t.Cleanup(func() { _ = rdb.Close() })
	return mr, p, rdb
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestProxyForwards(t *testing.T) {
	mr, _, rdb := proxied(t)
	ctx := ctxT(t)
	if err := rdb.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatalf("SET through proxy: %v", err)
	}
	if got := mr.Keys(); len(got) != 1 || got[0] != "k" {
		t.Fatalf("server keys = %v, want [k]", got)
	}
	if got, err := rdb.Get(ctx, "k").Result(); err != nil || got != "v" {
		t.Fatalf("GET = %q, %v; want v", got, err)
	}
	// Larger than one proxy buffer, to exercise multi-chunk forwarding.
	big := make([]byte, 200<<10)
	for i := range big {
		big[i] = byte('a' + i%26)
	}
	if err := rdb.Set(ctx, "big", big, 0).Err(); err != nil {
		t.Fatalf("SET big: %v", err)
	}
	if got, err := rdb.Get(ctx, "big").Bytes(); err != nil || string(got) != string(big) {
		t.Fatalf("GET big: len %d, %v", len(got), err)
	}
}

func TestProxyCutAndRestore(t *testing.T) {
	_, p, rdb := proxied(t)
	ctx := ctxT(t)
	if err := rdb.Ping(ctx).Err(); err != nil {
		t.Fatalf("PING before cut: %v", err)
	}

	p.Cut()
	// Both the pooled connection (reset) and any new one (reset on accept)
	// must fail.
	for i := range 3 {
		if err := rdb.Set(ctx, "k", "v", 0).Err(); err == nil {
			t.Fatalf("SET #%d succeeded while cut", i)
		}
	}

	p.Restore()
	var err error
	// A client may still hold one connection broken by Cut; one failure is
	// acceptable, the next command must get a fresh connection.
	for range 2 {
		if err = rdb.Set(ctx, "k", "v2", 0).Err(); err == nil {
			break
		}
	}
	if err != nil {
		t.Fatalf("SET after restore: %v", err)
	}
	if got, err := rdb.Get(ctx, "k").Result(); err != nil || got != "v2" {
		t.Fatalf("GET after restore = %q, %v", got, err)
	}
}

func TestProxyPauseTimesOut(t *testing.T) {
	mr, p, rdb := proxied(t)
	ctx := ctxT(t)
	if err := rdb.Ping(ctx).Err(); err != nil {
		t.Fatalf("PING before pause: %v", err)
	}

	p.Pause()
	start := time.Now()
	err := rdb.Set(ctx, "k", "v", 0).Err()
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("SET while paused: err = %v, want a timeout", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("timeout took %v", d)
	}
	// New connections are held too.
	if err := rdb.Ping(ctx).Err(); err == nil {
		t.Fatal("PING on a new connection succeeded while paused")
	}

	p.Resume()
	if err := rdb.Ping(ctx).Err(); err != nil {
		t.Fatalf("PING after resume: %v", err)
	}
	// The SET held during the pause was delivered on resume.
	deadline := time.Now().Add(5 * time.Second)
	for !mr.Exists("k") {
		if time.Now().After(deadline) {
			t.Fatal("held SET never reached the server")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestProxyRestoreEndsPause(t *testing.T) {
	_, p, rdb := proxied(t)
	ctx := ctxT(t)
	p.Pause()
	if err := rdb.Ping(ctx).Err(); err == nil {
		t.Fatal("PING succeeded while paused")
	}
	p.Cut()
	p.Restore()
	var err error
	for range 2 {
		if err = rdb.Ping(ctx).Err(); err == nil {
			break
		}
	}
	if err != nil {
		t.Fatalf("PING after restore: %v", err)
	}
}

func TestProxyCloseReleasesGoroutines(t *testing.T) {
	mr := miniredis.RunT(t)
	before := runtime.NumGoroutine()

	p := NewProxy(t, mr.Addr())
	var conns []net.Conn
	for range 4 {
		c, err := net.Dial("tcp", p.Addr())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		conns = append(conns, c)
		if _, err := c.Write([]byte("*1\r\n$4\r\nPING\r\n")); err != nil {
			t.Fatal(err)
		}
	}
	// Read the replies so every link is fully established.
	for _, c := range conns {
		buf := make([]byte, 16)
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if n, err := c.Read(buf); err != nil || string(buf[:n]) != "+PONG\r\n" {
			t.Fatalf("read %q, %v", buf[:n], err)
		}
	}
	p.Pause()
	for _, c := range conns {
		_, _ = c.Write([]byte("*1\r\n$4\r\nPING\r\n")) // held by the pause
	}

	done := make(chan struct{})
	go func() { p.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not return")
	}
	p.Close() // idempotent

	// Proxy goroutines are gone once Close returns; give miniredis a moment
	// to notice its upstream connections closed.
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("goroutines: %d before, %d after Close\n%s",
				before, runtime.NumGoroutine(), buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := net.DialTimeout("tcp", p.Addr(), time.Second); err == nil {
		t.Fatal("proxy still accepting after Close")
	}
}

// TestProxyLosesReplies: a request whose reply is lost ran on the server;
// the client reads the end of the connection. Without retries it gets the
// error; with go-redis's retries it sends the request again on a new
// connection, so a request that is not idempotent (INCR) runs twice. Only
// the requests that match lose their replies, and only n of them.
func TestProxyLosesReplies(t *testing.T) {
	mr, p, rdb := proxied(t)
	ctx := ctxT(t)
	p.LoseReplies("incr", 1)
	if err := rdb.Incr(ctx, "n").Err(); !errors.Is(err, io.EOF) {
		t.Fatalf("INCR with its reply lost: %v, want io.EOF", err)
	}
	if got, _ := mr.Get("n"); got != "1" {
		t.Fatalf("after a lost reply the server holds n = %q, want 1 (it ran the request)", got)
	}
	if err := rdb.Incr(ctx, "n").Err(); err != nil {
		t.Fatalf("INCR after the one lost reply: %v", err)
	}
	retrying := redis.NewClient(&redis.Options{ContextTimeoutEnabled: true, Addr: p.Addr()})
	t.Cleanup(func() { _ = retrying.Close() })
	p.LoseReplies("incr", 2)
	if err := retrying.Set(ctx, "other", "x", 0).Err(); err != nil {
		t.Fatalf("SET while INCR replies are lost: %v", err)
	}
	got, err := retrying.Incr(ctx, "n").Result()
	if err != nil || got != 5 {
		t.Fatalf("INCR resent after two lost replies: %d, %v; want 5 (it ran three times)", got, err)
	}
	if n := p.Lost(); n != 3 {
		t.Fatalf("Lost() = %d, want 3", n)
	}
}
