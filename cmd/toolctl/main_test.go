package main

import (
	"context"
	"encoding/json"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/guard/guardtest"
	"github.com/toolguard/toolguard/idem"
	"github.com/toolguard/toolguard/internal/pgtest"
	"github.com/toolguard/toolguard/internal/redistest"
	"github.com/toolguard/toolguard/pgstore"
)

type outcome struct {
	code           int
	stdout, stderr string
}

// exec runs toolctl with the clock now.
func exec(now func() time.Time, args ...string) outcome {
	var stdout, stderr strings.Builder
	code := run(args, &stdout, &stderr, now)
	return outcome{code, stdout.String(), stderr.String()}
}

func want(t *testing.T, o outcome, code int, stderr string) {
	t.Helper()
	if o.code != code || !strings.Contains(o.stderr, stderr) {
		t.Fatalf("exit %d, stderr %q; want exit %d with %q\nstdout:\n%s", o.code, o.stderr, code, stderr, o.stdout)
	}
}

var alice = guardtest.Principal("tenant-a", "alice")

// world returns a guard over a store with two unknown writes of alice
// (calls c1 and c2, keys idem-1 and idem-2) and a committed one.
func world(t *testing.T, rdb redis.UniversalClient, prefix string) *guardtest.World {
	t.Helper()
	s, err := idem.New(rdb, idem.Options{Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	return worldOn(t, s)
}

// worldOn is world on any store.
func worldOn(t *testing.T, s guard.AuditStore) *guardtest.World {
	t.Helper()
	w := guardtest.NewWorld(t, s)
	for _, c := range []string{"1", "2"} {
		w.Down.FailNext(guard.CodeOutcomeUnknown, false)
		guardtest.Want(t, w.Dispatch(t, alice, guardtest.Req{Tool: "put", Args: `{"key":"a","value":"` + c + `"}`, CallID: "c" + c, Key: "idem-" + c}), guard.CodeOutcomeUnknown, guard.DeliveryFresh)
	}
	guardtest.Want(t, w.Dispatch(t, alice, guardtest.Req{Tool: "put", Args: `{"key":"c","value":"3"}`, CallID: "c3", Key: "idem-3"}), guard.CodeOK, guard.DeliveryFresh)
	return w
}

func TestListAndResolve(t *testing.T) {
	redistest.ForEachBackend(t, func(t *testing.T, rdb redis.UniversalClient) {
		prefix := redistest.Prefix(t)
		w := world(t, rdb, prefix)
		addr := redisAddr(t, rdb)
		base := func(cmd string, args ...string) []string {
			return append([]string{cmd, "-redis", addr, "-prefix", prefix, "-tenant", "tenant-a"}, args...)
		}

		o := exec(w.Now, base("list")...)
		want(t, o, 0, `tenant "tenant-a": 2 unsettled operations`)
		lines := strings.Split(strings.TrimSpace(o.stdout), "\n")
		if len(lines) != 3 || !strings.HasPrefix(lines[0], "STATE") ||
			strings.Join(strings.Fields(lines[1]), " ") != `unknown "alice" "c1" put "k:idem-1" "c1" -` ||
			!strings.Contains(lines[2], `"k:idem-2"`) {
			t.Fatalf("list:\n%s", o.stdout)
		}
		o = exec(w.Now, base("list", "-json")...)
		want(t, o, 0, "2 unsettled")
		var first listed
		if err := json.Unmarshal([]byte(strings.Split(o.stdout, "\n")[0]), &first); err != nil ||
			first.State != string(guard.StateUnknown) || first.OperationID != "c1" || first.IdempotencyKey != "k:idem-1" || first.Record == "" {
			t.Fatalf("list -json: %v\n%s", err, o.stdout)
		}

		// c1 took place, c2 did not.
		o = exec(w.Now, base("resolve", "-subject", "alice", "-key", "k:idem-1", "-as", "committed", "-data", `{"value":"1"}`, "-by", "alice@ops")...)
		want(t, o, 0, "")
		if o.stdout != `resolved tenant "tenant-a" subject "alice" key "k:idem-1" as committed by alice@ops: OK {"value":"1"}`+"\n" {
			t.Fatalf("stdout %q", o.stdout)
		}
		o = exec(w.Now, base("resolve", "-subject", "alice", "-op", "c2", "-as", "not_started", "-by", "bob@ops")...)
		want(t, o, 0, "")
		if !strings.Contains(o.stdout, `operation "c2" as not_started by bob@ops: NOT_FOUND`) {
			t.Fatalf("stdout %q", o.stdout)
		}
		want(t, exec(w.Now, base("list")...), 0, "0 unsettled operations")
		guardtest.Want(t, w.Dispatch(t, alice, guardtest.Req{Tool: "put", Args: `{"key":"a","value":"1"}`, CallID: "c9", Key: "idem-1"}), guard.CodeOK, guard.DeliveryLocalReplay)
		guardtest.Want(t, w.Dispatch(t, alice, guardtest.Req{Tool: "put", Args: `{"key":"a","value":"2"}`, CallID: "c2", Key: "idem-2"}), guard.CodeOK, guard.DeliveryFresh)

		// Refusals: a committed operation, an unknown one.
		o = exec(w.Now, base("resolve", "-subject", "alice", "-key", "k:idem-3", "-as", "not_started", "-by", "bob@ops")...)
		want(t, o, 1, "toolctl: refused: idem: the operation is already committed")
		o = exec(w.Now, base("resolve", "-subject", "alice", "-op", "nope", "-as", "not_started", "-by", "bob@ops")...)
		want(t, o, 1, `refused: idem: no unsettled record: tenant "tenant-a" subject "alice" has no operation "nope"`)

		// The audit log holds both resolutions, with their operators.
		s, _ := idem.New(rdb, idem.Options{Prefix: prefix})
		n, err := guard.VerifyAudit(context.Background(), s, "tenant-a")
		if err != nil {
			t.Fatal(err)
		}
		recs, _, _ := s.Audit(context.Background(), "tenant-a", 0, int(n))
		var ops []string
		for _, r := range recs {
			var b struct{ Action, Operator, Resolution string }
			_ = json.Unmarshal(r.Body, &b)
			if b.Action == "resolve" {
				ops = append(ops, b.Operator+" "+b.Resolution)
			}
		}
		if strings.Join(ops, ",") != "alice@ops committed,bob@ops not_started" {
			t.Fatalf("resolutions audited: %q", ops)
		}
	})
}

// redisAddr is the -redis argument that reaches the client's server.
func redisAddr(t *testing.T, rdb redis.UniversalClient) string {
	t.Helper()
	switch c := rdb.(type) {
	case *redis.ClusterClient:
		return os.Getenv(redistest.EnvCluster)
	case *redis.Client:
		o := c.Options()
		return "redis://" + o.Addr + "/" + strconv.Itoa(o.DB)
	}
	t.Fatalf("client %T", rdb)
	return ""
}

// A reservation whose holder may be running is refused unless -force;
// once its lease (on the guard's clock) is over it is listed as stuck and
// resolved without it.
func TestResolveInProgress(t *testing.T) {
	mr, rdb := redistest.Mini(t)
	w := guardtest.NewWorld(t, mustStore(t, rdb))
	entered, release := w.Down.Block()
	t.Cleanup(release)
	done := make(chan *guard.Result, 2)
	for _, c := range []string{"5", "6"} {
		go func() {
			done <- w.Dispatch(t, alice, guardtest.Req{Tool: "put", Args: `{"key":"b","value":"` + c + `"}`, CallID: "c" + c, Key: "idem-" + c})
		}()
		<-entered
	}
	url := "redis://" + mr.Addr()
	resolve := func(key string, extra ...string) []string {
		return append([]string{"resolve", "-redis", url, "-tenant", "tenant-a", "-subject", "alice",
			"-key", key, "-as", "not_started", "-by", "ops"}, extra...)
	}
	want(t, exec(w.Now, "list", "-redis", url, "-tenant", "tenant-a"), 0, "0 unsettled")
	want(t, exec(w.Now, resolve("k:idem-5")...), 1, "in progress (its lease has not expired)")
	want(t, exec(w.Now, resolve("k:idem-5", "-force")...), 0, "")

	w.Advance(guardtest.Lease + time.Second)
	o := exec(w.Now, "list", "-redis", url, "-tenant", "tenant-a")
	want(t, o, 0, "1 unsettled")
	lease := w.Now().Add(-time.Second).UTC().Format(time.RFC3339)
	if lines := strings.Split(strings.TrimSpace(o.stdout), "\n"); len(lines) != 2 ||
		strings.Join(strings.Fields(lines[1]), " ") != `stuck "alice" "c6" put "k:idem-6" "c6" `+lease {
		t.Fatalf("list:\n%s", o.stdout)
	}
	want(t, exec(w.Now, resolve("k:idem-6")...), 0, "")
	// The holders were alive: their late commits are stored, not lost.
	release()
	for range 2 {
		guardtest.Want(t, <-done, guard.CodeOK, guard.DeliveryFresh)
	}
	if n := w.Down.Writes(); n != 2 {
		t.Fatalf("%d writes", n)
	}
}

func mustStore(t *testing.T, rdb redis.UniversalClient) *idem.Store {
	t.Helper()
	s, err := idem.New(rdb, idem.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestUsageAndConnectionErrors(t *testing.T) {
	mr, _ := redistest.Mini(t)
	url := "redis://" + mr.Addr()
	r := func(extra ...string) []string {
		return append([]string{"resolve", "-redis", url, "-tenant", "t", "-subject", "s"}, extra...)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "the first argument is list, resolve, gaps (verify), evictions, ack or retention"},
		{[]string{"delete"}, "the first argument is list, resolve, gaps (verify), evictions, ack or retention"},
		{[]string{"retention", "-redis", url}, "retention is for the Postgres store"},
		{[]string{"evictions", "-store", "postgres://postgres@127.0.0.1:1/x"}, "evictions is for the Redis store"},
		{[]string{"ack", "-redis", url}, "-by is required"},
		{[]string{"evictions", "-redis", url, "-tenant", "t"}, "flag provided but not defined"},
		{[]string{"list", "-redis", url}, "-tenant is required"},
		{[]string{"list", "-redis", url, "-tenant", "t", "extra"}, "unexpected arguments"},
		{[]string{"list", "-key", "k"}, "flag provided but not defined"},
		{[]string{"resolve", "-redis", url, "-tenant", "t", "-key", "k", "-as", "not_started", "-by", "o"}, "-subject is required"},
		{r("-as", "not_started", "-by", "o"), "with -key or -op"},
		{r("-key", "k", "-op", "o", "-as", "not_started", "-by", "o"), "with -key or -op"},
		{r("-key", "k", "-as", "not_started"), "-by is required"},
		{r("-key", "k", "-as", "done", "-by", "o"), "-as is committed or not_started"},
		{r("-key", "k", "-as", "committed", "-by", "o"), "needs -data"},
		{r("-key", "k", "-as", "not_started", "-data", "{}", "-by", "o"), "takes no -data"},
		{r("-key", "k", "-as", "committed", "-data", "{", "-by", "o"), "result data: invalid JSON"},
		{[]string{"list", "-redis", url, "-tenant", "t", "-prefix", "a{b"}, "-prefix"},
	} {
		want(t, exec(time.Now, tc.args...), 2, tc.want)
	}
	dead := miniredis.RunT(t)
	addr := dead.Addr()
	dead.Close()
	want(t, exec(time.Now, "list", "-redis", "redis://"+addr, "-tenant", "t"), 2, "toolctl: -store:")
	want(t, exec(time.Now, "list", "-store", "postgres://postgres@127.0.0.1:1/none?connect_timeout=2", "-tenant", "t"), 2, "toolctl: -store:")
}

// TestPostgres: list, resolve, gaps (verify) and retention on the Postgres
// store.
func TestPostgres(t *testing.T) {
	db := pgtest.NewDB(t)
	pool := pgtest.Pool(t, db, 2)
	ctx := context.Background()
	s, err := pgstore.New(ctx, pool, pgstore.Options{Schema: "ops", TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	w := worldOn(t, s)
	base := func(cmd string, args ...string) []string {
		return append([]string{cmd, "-store", db, "-schema", "ops", "-tenant", "tenant-a"}, args...)
	}
	o := exec(w.Now, base("list")...)
	want(t, o, 0, `tenant "tenant-a": 2 unsettled operations`)
	lines := strings.Split(strings.TrimSpace(o.stdout), "\n")
	if len(lines) != 3 || strings.Join(strings.Fields(lines[1]), " ") != `unknown "alice" "c1" put "k:idem-1" "c1" -` {
		t.Fatalf("list:\n%s", o.stdout)
	}
	o = exec(w.Now, base("resolve", "-subject", "alice", "-key", "k:idem-1", "-as", "committed", "-data", `{"key":"a","value":"1"}`, "-by", "ops@example")...)
	want(t, o, 0, "")
	if !strings.Contains(o.stdout, `resolved tenant "tenant-a" subject "alice" key "k:idem-1" as committed by ops@example: OK {"key":"a","value":"1"}`) {
		t.Fatalf("resolve: %s", o.stdout)
	}
	want(t, exec(w.Now, base("resolve", "-subject", "alice", "-op", "c3", "-as", "not_started", "-by", "ops@example")...), 1, "refused: pgstore: the operation is already committed")
	want(t, exec(w.Now, base("resolve", "-subject", "alice", "-op", "c2", "-as", "not_started", "-by", "ops@example")...), 0, "")
	want(t, exec(w.Now, base("list")...), 0, "0 unsettled operations")
	guardtest.Want(t, w.Dispatch(t, alice, guardtest.Req{Tool: "put", Args: `{"key":"a","value":"1"}`, CallID: "c1-again", Key: "idem-1"}), guard.CodeOK, guard.DeliveryLocalReplay)

	// gaps: a tenant whose records were deleted has a gap; verify is gaps.
	other := guardtest.Principal("tenant-b", "bob")
	for i := range 3 {
		id := "b" + strconv.Itoa(i)
		guardtest.Want(t, w.Dispatch(t, other, guardtest.Req{Tool: "put", Args: `{"key":"` + id + `","value":"v"}`, CallID: id, Key: id}), guard.CodeOK, guard.DeliveryFresh)
	}
	if _, err := pool.Exec(ctx, "DELETE FROM ops.audit WHERE tenant = 'tenant-b' AND seq = 2"); err != nil {
		t.Fatal(err)
	}
	o = exec(time.Now, "verify", "-store", db, "-schema", "ops")
	want(t, o, 1, "1 of 2 tenants' audit chains have gaps")
	if lines := strings.Split(strings.TrimSpace(o.stdout), "\n"); len(lines) != 2 ||
		!strings.HasPrefix(lines[0], "whole\t\"tenant-a\"\t") || !strings.HasPrefix(lines[1], "gap\t\"tenant-b\"\tsince sequence 2\t") {
		t.Fatalf("verify:\n%s", o.stdout)
	}
	// retention: nothing before the TTL, the records after it.
	o = exec(w.Now, "retention", "-store", db, "-schema", "ops")
	want(t, o, 0, "")
	if o.stdout != "swept 0 rows past their retention\n" {
		t.Fatalf("retention within the TTL: %s", o.stdout)
	}
	o = exec(func() time.Time { return w.Now().Add(2 * time.Hour) }, "retention", "-store", db, "-schema", "ops")
	if o.code != 0 || !strings.HasPrefix(o.stdout, "swept ") || strings.HasPrefix(o.stdout, "swept 0 ") {
		t.Fatalf("retention past the TTL: %d %s %s", o.code, o.stdout, o.stderr)
	}
}

// TestGaps: toolctl gaps names the tenants whose audit chains lost
// records, and since which sequence number, as an eviction leaves them: a
// tenant whose stream was evicted and who wrote on has a gap from 1; one
// whose head alone was evicted is whole (the next record finds its place
// from the stream); the others are whole. One tenant is checked with
// -tenant, every tenant without.
func TestGaps(t *testing.T) {
	redistest.ForEachBackend(t, func(t *testing.T, rdb redis.UniversalClient) {
		prefix := redistest.Prefix(t)
		s, err := idem.New(rdb, idem.Options{Prefix: prefix})
		if err != nil {
			t.Fatal(err)
		}
		w := guardtest.NewWorld(t, s)
		ctx := context.Background()
		write := func(p guard.Principal, n int, tag string) {
			for i := range n {
				id := tag + strconv.Itoa(i)
				guardtest.Want(t, w.Dispatch(t, p, guardtest.Req{Tool: "put", Args: `{"key":"` + id + `","value":"v"}`, CallID: id, Key: id}), guard.CodeOK, guard.DeliveryFresh)
			}
		}
		whole, evicted, headless := guardtest.Principal("t-whole", "u"), guardtest.Principal("t-evicted", "u"), guardtest.Principal("t-headless", "u")
		write(whole, 3, "w")
		write(evicted, 3, "e")
		write(headless, 3, "h")
		stream, _ := s.AuditKeys("t-evicted")
		_, head := s.AuditKeys("t-headless")
		if err := rdb.Del(ctx, stream).Err(); err != nil {
			t.Fatal(err)
		}
		if err := rdb.Del(ctx, head).Err(); err != nil {
			t.Fatal(err)
		}
		write(evicted, 2, "e2-")
		write(headless, 2, "h2-")

		addr := redisAddr(t, rdb)
		o := exec(time.Now, "gaps", "-redis", addr, "-prefix", prefix)
		want(t, o, 1, "1 of 3 tenants' audit chains have gaps")
		lines := strings.Split(strings.TrimSpace(o.stdout), "\n")
		if len(lines) != 3 || !strings.HasPrefix(lines[0], "gap\t\"t-evicted\"\tsince sequence 1\t") ||
			lines[1] != "whole\t\"t-headless\"\t5 records" || lines[2] != "whole\t\"t-whole\"\t3 records" {
			t.Fatalf("gaps:\n%s", o.stdout)
		}
		want(t, exec(time.Now, "gaps", "-redis", addr, "-prefix", prefix, "-tenant", "t-whole"), 0, "0 of 1 tenants")
		if _, err := guard.VerifyAudit(ctx, s, "t-evicted"); err == nil {
			t.Fatal("guard.VerifyAudit passes the evicted tenant's chain")
		}
	})
}

// TestEvictionsAndAck: on a server of the test's own that evicted the
// store's keys, toolctl evictions names the server's count and every
// tenant that lost keys (exit 1: an eviction waits), toolctl ack refuses
// while the policy may still evict and acknowledges once it is
// noeviction; then toolctl evictions finds nothing waiting and the store
// works again.
func TestEvictionsAndAck(t *testing.T) {
	redistest.NeedBinaries(t, "redis-server")
	port := redistest.FreePort(t)
	redistest.StartServer(t, t.TempDir(), port, "--appendonly", "no", "--maxmemory", "2mb", "--maxmemory-policy", "noeviction")
	addr := "redis://127.0.0.1:" + strconv.Itoa(port) + "/0"
	rdb := redis.NewClient(&redis.Options{ContextTimeoutEnabled: true, Addr: "127.0.0.1:" + strconv.Itoa(port)})
	t.Cleanup(func() { _ = rdb.Close() })
	ctx := context.Background()
	prefix := redistest.Prefix(t)
	s, err := idem.New(rdb, idem.Options{Prefix: prefix, CheckEvery: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if err := s.Check(ctx); err != nil {
		t.Fatal(err)
	}
	w := guardtest.NewWorld(t, s)
	tenants := []string{"t-a", "t-b", "t-c"}
	for i := range 30 {
		p, id := guardtest.Principal(tenants[i%3], "u"), "w"+strconv.Itoa(i)
		guardtest.Want(t, w.Dispatch(t, p, guardtest.Req{Tool: "put", Args: `{"key":"` + id + `","value":"v"}`, CallID: id, Key: id}), guard.CodeOK, guard.DeliveryFresh)
	}
	want(t, exec(time.Now, "evictions", "-redis", addr, "-prefix", prefix), 0, "no eviction waits")

	if err := rdb.ConfigSet(ctx, "maxmemory-policy", "allkeys-lru").Err(); err != nil {
		t.Fatal(err)
	}
	// Another application fills the server until it has evicted every
	// key of the store's (a few thousand keys of 1 KB).
	val := strings.Repeat("f", 1024)
	for i := 0; ; i++ {
		n, err := rdb.Keys(ctx, prefix+"*").Result()
		if err != nil {
			t.Fatal(err)
		}
		if len(n) == 0 {
			break
		}
		if i > 200 {
			t.Fatalf("%d of the store's keys left after filling", len(n))
		}
		pipe := rdb.Pipeline()
		for j := range 100 {
			pipe.Set(ctx, "filler:"+strconv.Itoa(i)+":"+strconv.Itoa(j), val, 0)
		}
		if _, err := pipe.Exec(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if !redistest.WaitUntil(10*time.Second, func() bool {
		return rdb.HGet(ctx, prefix+"evictions", "evicted").Val() != ""
	}) {
		t.Fatal("the store wrote no marker")
	}
	want(t, exec(time.Now, "ack", "-redis", addr, "-prefix", prefix, "-by", "ops"), 2, "set it to noeviction before acknowledging")
	if err := rdb.ConfigSet(ctx, "maxmemory-policy", "noeviction").Err(); err != nil {
		t.Fatal(err)
	}
	// The marker went with the store's keys: the report cannot name the
	// tenants, and says so.
	rdb.Del(ctx, prefix+"evictions")
	o := exec(time.Now, "evictions", "-redis", addr, "-prefix", prefix)
	want(t, o, 1, "an eviction waits for an acknowledgement (0 tenants lost keys)")
	if !strings.Contains(o.stdout, "\nunheard\t") {
		t.Errorf("toolctl evictions without the marker:\n%s", o.stdout)
	}
	// The store writes back what it heard at its next check (a call a
	// second after its last refusal), which it still refuses.
	time.Sleep(1100 * time.Millisecond)
	guardtest.Want(t, w.Dispatch(t, guardtest.Principal("t-a", "u"), guardtest.Req{Tool: "put", Args: `{"key":"x","value":"v"}`, CallID: "x", Key: "x"}), guard.CodeUnavailable, guard.DeliveryFresh)
	o = exec(time.Now, "evictions", "-redis", addr, "-prefix", prefix)
	want(t, o, 1, "an eviction waits for an acknowledgement (3 tenants lost keys)")
	for _, line := range []string{"server\t127.0.0.1:" + strconv.Itoa(port) + "\tnoeviction\tevicted_keys ", "noticed\t",
		"tenant\t\"t-a\"\tlost 1-?\tnamed\n", "tenant\t\"t-b\"\tlost 1-?\tnamed\n", "tenant\t\"t-c\"\tlost 1-?\tnamed\n"} {
		if !strings.Contains(o.stdout, line) {
			t.Errorf("toolctl evictions: no line %q in\n%s", line, o.stdout)
		}
	}
	if strings.Contains(o.stdout, "unheard") {
		t.Errorf("toolctl evictions once the store wrote back what it heard:\n%s", o.stdout)
	}

	o = exec(time.Now, "ack", "-redis", addr, "-prefix", prefix, "-by", "ops", "-window", "1h")
	want(t, o, 0, "acknowledged: 3 tenants lost keys")
	if !strings.Contains(o.stdout, "tenant\t\"t-b\"\tlost 1-?\tnamed\n") || !strings.Contains(o.stdout, "acknowledged\tby ops\tat ") {
		t.Errorf("toolctl ack:\n%s", o.stdout)
	}
	want(t, exec(time.Now, "evictions", "-redis", addr, "-prefix", prefix), 0, "no eviction waits")
	time.Sleep(1100 * time.Millisecond)
	guardtest.Want(t, w.Dispatch(t, guardtest.Principal("t-a", "u"), guardtest.Req{Tool: "put", Args: `{"key":"y","value":"v"}`, CallID: "y", Key: "y"}), guard.CodeOK, guard.DeliveryFresh)
}
