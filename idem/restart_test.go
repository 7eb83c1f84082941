package idem_test

import (
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/guard/guardtest"
	"github.com/toolguard/toolguard/idem"
	"github.com/toolguard/toolguard/internal/redistest"
)

// TestServerKilledKeepsAcknowledgedRecords: with appendfsync always, every
// result the guard acknowledged survives the server being killed and
// restarted: replays return it, nothing runs twice, the audit chain holds.
func TestServerKilledKeepsAcknowledgedRecords(t *testing.T) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skip("redis-server not installed: skipping the restart test (scripts/redis-up.sh installs it)")
	}
	dir, port := t.TempDir(), redistest.FreePort(t)
	srv := redistest.StartServer(t, dir, port)
	rdb := redis.NewClient(&redis.Options{ContextTimeoutEnabled: true, Addr: fmt.Sprintf("127.0.0.1:%d", port), MaxRetries: 10,
		MinRetryBackoff: 20 * time.Millisecond, MaxRetryBackoff: 200 * time.Millisecond})
	defer rdb.Close()
	s, err := idem.New(rdb, idem.Options{})
	if err != nil {
		t.Fatal(err)
	}
	w := guardtest.NewWorld(t, s)
	const n = 20
	acked := map[string]string{}
	for i := range n {
		key := "k" + strconv.Itoa(i)
		r := w.Dispatch(t, alice, guardtest.Req{Tool: "put", Args: fmt.Sprintf(`{"key":"a%d","value":"v"}`, i), CallID: "c" + strconv.Itoa(i), Key: key})
		if r.Code != guard.CodeOK {
			t.Fatalf("write %d: %s", i, r)
		}
		acked[key] = string(r.Data)
	}

	_ = srv.Process.Kill() // SIGKILL: no shutdown save
	_ = srv.Wait()
	redistest.StartServer(t, dir, port)

	for i := range n {
		key := "k" + strconv.Itoa(i)
		r := w.Dispatch(t, alice, guardtest.Req{Tool: "put", Args: fmt.Sprintf(`{"key":"a%d","value":"v"}`, i), CallID: "again" + strconv.Itoa(i), Key: key})
		if r.Code != guard.CodeOK || r.Delivery != guard.DeliveryLocalReplay || string(r.Data) != acked[key] {
			t.Fatalf("after restart, write %d: %s; want the acknowledged %s replayed", i, r, acked[key])
		}
	}
	if w.Down.Writes() != n {
		t.Fatalf("%d side effects, want %d", w.Down.Writes(), n)
	}
	if got, err := guard.VerifyAudit(context.Background(), s, alice.TenantID); err != nil || got != 2*n {
		t.Fatalf("audit after restart: %d records, %v", got, err)
	}
}
