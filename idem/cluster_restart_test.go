package idem_test

import (
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/guard/guardtest"
	"github.com/toolguard/toolguard/idem"
	"github.com/toolguard/toolguard/internal/redistest"
)

// startClusterNode runs one cluster-enabled redis-server with the
// append-only file fsynced on every write.
func startClusterNode(t *testing.T, dir string, port int) *exec.Cmd {
	return redistest.StartServer(t, dir, port, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "2000")
}

func waitClusterOK(t *testing.T, port int) {
	t.Helper()
	c := redis.NewClient(&redis.Options{ContextTimeoutEnabled: true, Addr: fmt.Sprintf("127.0.0.1:%d", port)})
	defer c.Close()
	for i := 0; ; i++ {
		info, _ := c.ClusterInfo(context.Background()).Result()
		if strings.Contains(info, "cluster_state:ok") {
			return
		}
		if i > 400 {
			t.Fatalf("cluster not ok: %s", info)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestClusterNodeRestartKeepsAcknowledgedRecords: a master of a
// three-master cluster is killed between calls and restarted from its
// append-only file: every acknowledged record of every tenant (spread over
// the masters by their hash tags) is still there.
func TestClusterNodeRestartKeepsAcknowledgedRecords(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster of its own")
	}
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skip("redis-server not installed: skipping (scripts/redis-up.sh installs it)")
	}
	if _, err := exec.LookPath("redis-cli"); err != nil {
		t.Skip("redis-cli not installed: skipping")
	}
	var ports []int
	var dirs []string
	var procs []*exec.Cmd
	for range 3 {
		port, dir := redistest.FreePort(t), t.TempDir()
		ports, dirs = append(ports, port), append(dirs, dir)
		procs = append(procs, startClusterNode(t, dir, port))
	}
	args := []string{"--cluster", "create"}
	var addrs []string
	for _, p := range ports {
		addrs = append(addrs, "127.0.0.1:"+strconv.Itoa(p))
	}
	args = append(args, addrs...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	if out, err := exec.Command("redis-cli", args...).CombinedOutput(); err != nil {
		t.Fatalf("cluster create: %v\n%s", err, out)
	}
	waitClusterOK(t, ports[0])

	rdb := redis.NewClusterClient(&redis.ClusterOptions{ContextTimeoutEnabled: true, Addrs: addrs, MaxRetries: 20,
		MinRetryBackoff: 50 * time.Millisecond, MaxRetryBackoff: 500 * time.Millisecond})
	defer rdb.Close()
	s, err := idem.New(rdb, idem.Options{})
	if err != nil {
		t.Fatal(err)
	}
	w := guardtest.NewWorld(t, s)
	const tenants = 12
	acked := map[int]string{}
	for i := range tenants {
		p := guardtest.Principal("tenant-"+strconv.Itoa(i), "u")
		r := w.Dispatch(t, p, guardtest.Req{Tool: "put", Args: `{"key":"a","value":"v"}`, CallID: "c", Key: "k"})
		if r.Code != guard.CodeOK {
			t.Fatalf("tenant %d: %s", i, r)
		}
		acked[i] = string(r.Data)
	}

	// Kill the first master with SIGKILL and bring it back from its AOF.
	_ = procs[0].Process.Kill()
	_ = procs[0].Wait()
	startClusterNode(t, dirs[0], ports[0])
	waitClusterOK(t, ports[0])

	for i := range tenants {
		p := guardtest.Principal("tenant-"+strconv.Itoa(i), "u")
		r := w.Dispatch(t, p, guardtest.Req{Tool: "put", Args: `{"key":"a","value":"v"}`, CallID: "c2", Key: "k"})
		if r.Code != guard.CodeOK || r.Delivery != guard.DeliveryLocalReplay || string(r.Data) != acked[i] {
			t.Fatalf("tenant %d after the restart: %s, want the acknowledged %s", i, r, acked[i])
		}
		if n, err := guard.VerifyAudit(context.Background(), s, p.TenantID); err != nil || n != 2 {
			t.Fatalf("tenant %d audit: %d, %v", i, n, err)
		}
	}
	if w.Down.Writes() != tenants {
		t.Fatalf("%d side effects, want %d", w.Down.Writes(), tenants)
	}
}
