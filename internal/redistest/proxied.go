package redistest

import (
	"context"
	"net"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"
)

// Proxies are the proxies of a Proxied client, one per server it dialed,
// made as it dials each (a cluster client learns its nodes from the
// cluster). A fault set on Proxies applies to every one of them, and to
// those made later.
type Proxies struct {
	tb testing.TB

	mu        sync.Mutex
	byAddr    map[string]*Proxy
	loseMatch string
	loseN     int
}

// Proxied returns a client of the real backend named (BackendStandalone or
// BackendCluster) whose every connection goes through a Proxy of its own
// per server, and those proxies. It skips tb as Standalone and Cluster do
// when the backend is not configured. The client and the proxies are
// closed when tb's test ends.
func Proxied(tb testing.TB, backend string) (redis.UniversalClient, *Proxies) {
	tb.Helper()
	ps := &Proxies{tb: tb, byAddr: map[string]*Proxy{}}
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, ps.of(addr).Addr())
	}
	var rdb redis.UniversalClient
	switch backend {
	case BackendStandalone:
		Standalone(tb) // skips or fails as it says
		opts, err := redis.ParseURL(strings.TrimSpace(os.Getenv(EnvURL)))
		if err != nil {
			tb.Fatal(err)
		}
		opts.ContextTimeoutEnabled, opts.Dialer = true, dial
		rdb = redis.NewClient(opts)
	case BackendCluster:
		Cluster(tb)
		rdb = redis.NewClusterClient(&redis.ClusterOptions{ContextTimeoutEnabled: true,
			Addrs: clusterAddrs(os.Getenv(EnvCluster)), Dialer: dial})
	default:
		tb.Fatalf("redistest: no proxied backend %q", backend)
	}
	tb.Cleanup(func() { _ = rdb.Close() })
	return rdb, ps
}

// of returns the proxy of the server at addr, made if there is none.
func (ps *Proxies) of(addr string) *Proxy {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	p := ps.byAddr[addr]
	if p == nil {
		p = NewProxy(ps.tb, addr)
		p.LoseReplies(ps.loseMatch, ps.loseN)
		ps.byAddr[addr] = p
	}
	return p
}

// LoseReplies has every proxy lose the replies to its next n requests
// that contain match (Proxy.LoseReplies): n for each server.
func (ps *Proxies) LoseReplies(match string, n int) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	ps.loseMatch, ps.loseN = match, n
	for _, p := range ps.byAddr {
		p.LoseReplies(match, n)
	}
}

// Lost returns how many replies the proxies lost, in all.
func (ps *Proxies) Lost() int64 {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	var n int64
	for _, p := range ps.byAddr {
		n += p.Lost()
	}
	return n
}
