package idem_test

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/guard/guardtest"
	"github.com/toolguard/toolguard/idem"
	"github.com/toolguard/toolguard/internal/redisconn"
	"github.com/toolguard/toolguard/internal/redistest"
)

// Ports of the servers the Redis Functions tests start (19400–19449 are
// theirs).
const (
	portFunctions = 19400
	portFnMaster  = 19401
	portFnReplica = 19402
	portFnCluster = 19410 // to 19415
)

// libraryName is the form of the store's library name.
var libraryName = regexp.MustCompile(`^toolguard_[0-9a-f]{12}$`)

// scriptNames are the store's state changes, each a function of its
// library.
var scriptNames = []string{"finish", "reserve", "commit", "status", "settle", "resolve", "charge", "refund"}

// nodeClient returns a client of one server of the test's own.
func nodeClient(t *testing.T, port int) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{ContextTimeoutEnabled: true, Addr: "127.0.0.1:" + strconv.Itoa(port)})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// cmdstat is one command's line of INFO commandstats on one server.
type cmdstat struct{ calls, failed int }

// cmdstats reads INFO commandstats of one server for the commands the
// store sends its Lua with.
func cmdstats(t *testing.T, c *redis.Client) map[string]cmdstat {
	t.Helper()
	info, err := redisconn.Info(context.Background(), c, "commandstats")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]cmdstat{}
	for _, name := range []string{"fcall", "evalsha", "eval"} {
		var st cmdstat
		for _, kv := range strings.Split(info["cmdstat_"+name], ",") {
			k, v, _ := strings.Cut(kv, "=")
			switch k {
			case "calls":
				st.calls, _ = strconv.Atoi(v)
			case "failed_calls":
				st.failed, _ = strconv.Atoi(v)
			}
		}
		out[name] = st
	}
	return out
}

// delta is what each command's counters moved by between two readings.
func delta(before, after map[string]cmdstat) map[string]cmdstat {
	d := map[string]cmdstat{}
	for name, a := range after {
		d[name] = cmdstat{a.calls - before[name].calls, a.failed - before[name].failed}
	}
	return d
}

// libraries returns the function libraries loaded on one server, each
// with its functions' names.
func libraries(t *testing.T, c *redis.Client) map[string][]string {
	t.Helper()
	libs, err := c.FunctionList(context.Background(), redis.FunctionListQuery{}).Result()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, l := range libs {
		var fns []string
		for _, f := range l.Functions {
			fns = append(fns, f.Name)
		}
		out[l.Name] = fns
	}
	return out
}

// storeLibrary returns the name of the one library loaded on the server,
// after checking that it is the store's: named toolguard_<12 hex digits>,
// with a function <library>_<script> for each state change.
func storeLibrary(t *testing.T, c *redis.Client) string {
	t.Helper()
	libs := libraries(t, c)
	if len(libs) != 1 {
		t.Fatalf("%s: libraries %v, want the store's only", c.Options().Addr, libs)
	}
	for name, fns := range libs {
		if !libraryName.MatchString(name) || len(fns) != len(scriptNames) {
			t.Fatalf("%s: library %s with %v", c.Options().Addr, name, fns)
		}
		for _, sc := range scriptNames {
			if !strings.Contains(" "+strings.Join(fns, " ")+" ", " "+name+"_"+sc+" ") {
				t.Fatalf("%s: library %s has no function %s_%s: %v", c.Options().Addr, name, name, sc, fns)
			}
		}
		return name
	}
	return ""
}

// wantOnly checks that the Lua went through one command: FCALL in
// functions mode, EVALSHA (and EVAL) in scripts mode, never the other.
func wantOnly(t *testing.T, d map[string]cmdstat, functions bool) {
	t.Helper()
	scripts := d["evalsha"].calls + d["eval"].calls
	if functions && (d["fcall"].calls == 0 || scripts != 0) || !functions && (d["fcall"].calls != 0 || scripts == 0) {
		t.Fatalf("commands sent: FCALL %d, EVALSHA %d, EVAL %d (functions mode: %v)",
			d["fcall"].calls, d["evalsha"].calls, d["eval"].calls, functions)
	}
}

// wantFCalls checks what the server counted since before: only FCALL,
// calls of them, failed of those refused.
func wantFCalls(t *testing.T, c *redis.Client, before map[string]cmdstat, calls, failed int, what string) {
	t.Helper()
	d := delta(before, cmdstats(t, c))
	wantOnly(t, d, true)
	if d["fcall"].calls != calls || d["fcall"].failed != failed {
		t.Fatalf("FCALL %+v for %s, want %d calls, %d failed", d["fcall"], what, calls, failed)
	}
}

// TestFunctionsStandalone, on a server of the test's own: with
// Options.Scripts the store sends EVALSHA and loads no library; by default
// it loads its library once and sends FCALL only, never EVALSHA. After
// FUNCTION FLUSH, and after FUNCTION DELETE of its library, the next
// dispatch meets "Function not found" once, loads the library again and
// succeeds, the write running once. Another version's library loads
// beside it and is never replaced. An account that may not FUNCTION LOAD
// gets an error that names Options.Scripts, and works with it.
func TestFunctionsStandalone(t *testing.T) {
	redistest.NeedBinaries(t, "redis-server")
	redistest.StartServer(t, t.TempDir(), portFunctions, "--appendonly", "no")
	admin := nodeClient(t, portFunctions)
	rdb := nodeClient(t, portFunctions)
	ctx := context.Background()

	t.Run("scripts", func(t *testing.T) {
		s, err := idem.New(rdb, idem.Options{Prefix: redistest.Prefix(t), Scripts: true})
		if err != nil {
			t.Fatal(err)
		}
		w := guardtest.NewWorld(t, s)
		before := cmdstats(t, admin)
		guardtest.Want(t, w.Dispatch(t, alice, guardtest.Req{Tool: "get", Args: `{"key":"a"}`, CallID: "s1"}), guard.CodeOK, guard.DeliveryFresh)
		guardtest.Want(t, w.Dispatch(t, alice, guardtest.Req{Tool: "put", Args: `{"key":"a","value":"v"}`, CallID: "s2", Key: "k1"}), guard.CodeOK, guard.DeliveryFresh)
		wantOnly(t, delta(before, cmdstats(t, admin)), false)
		if libs := libraries(t, admin); len(libs) != 0 {
			t.Fatalf("libraries %v loaded by a store with Options.Scripts", libs)
		}
	})

	t.Run("functions", func(t *testing.T) {
		s := newStore(t, rdb)
		w := guardtest.NewWorld(t, s)
		before := cmdstats(t, admin)
		guardtest.Want(t, w.Dispatch(t, alice, guardtest.Req{Tool: "get", Args: `{"key":"a"}`, CallID: "f1"}), guard.CodeOK, guard.DeliveryFresh)
		guardtest.Want(t, w.Dispatch(t, alice, guardtest.Req{Tool: "put", Args: `{"key":"a","value":"v"}`, CallID: "f2", Key: "k1"}), guard.CodeOK, guard.DeliveryFresh)
		wantFCalls(t, admin, before, 3, 0, "a read and a write (finish, reserve, commit)")
		lib := storeLibrary(t, admin)

		for i, lose := range []func() error{
			func() error { return admin.FunctionFlush(ctx).Err() },
			func() error { return admin.FunctionDelete(ctx, lib).Err() },
		} {
			if err := lose(); err != nil {
				t.Fatal(err)
			}
			if libs := libraries(t, admin); len(libs) != 0 {
				t.Fatalf("libraries %v left", libs)
			}
			before := cmdstats(t, admin)
			key := "lost" + strconv.Itoa(i)
			guardtest.Want(t, w.Dispatch(t, alice, guardtest.Req{Tool: "put", Args: `{"key":"b","value":"v"}`, CallID: key, Key: key}), guard.CodeOK, guard.DeliveryFresh)
			// Reserve: refused, loaded, sent again; then commit.
			wantFCalls(t, admin, before, 3, 1, fmt.Sprintf("a write after the library was lost (%d)", i))
			if got := storeLibrary(t, admin); got != lib {
				t.Fatalf("library %s loaded again, want %s", got, lib)
			}
		}
		if w.Down.Writes() != 3 {
			t.Fatalf("%d writes ran, want 3: each once", w.Down.Writes())
		}
		guardtest.Want(t, w.Dispatch(t, alice, guardtest.Req{Tool: "put", Args: `{"key":"a","value":"v"}`, CallID: "f3", Key: "k1"}), guard.CodeOK, guard.DeliveryLocalReplay)
		if n, err := guard.VerifyAudit(ctx, s, alice.TenantID); err != nil || n != 5 {
			t.Fatalf("audit: %d records, %v; want 5", n, err)
		}
	})

	t.Run("another-version", func(t *testing.T) {
		// Another version of the store, as in a rolling deploy: its own
		// library, with functions of its own names, loads beside ours.
		s := newStore(t, rdb)
		if err := s.Check(ctx); err != nil {
			t.Fatal(err)
		}
		lib := storeLibrary(t, admin)
		code, err := admin.FunctionList(ctx, redis.FunctionListQuery{LibraryNamePattern: lib, WithCode: true}).First()
		if err != nil {
			t.Fatal(err)
		}
		const other = "toolguard_000000000000"
		if err := admin.FunctionLoad(ctx, strings.ReplaceAll(code.Code, lib, other)).Err(); err != nil {
			t.Fatal(err)
		}
		w := guardtest.NewWorld(t, newStore(t, rdb))
		guardtest.Want(t, w.Dispatch(t, alice, guardtest.Req{Tool: "get", Args: `{"key":"a"}`, CallID: "v1"}), guard.CodeOK, guard.DeliveryFresh)
		if err := admin.FunctionDelete(ctx, lib).Err(); err != nil {
			t.Fatal(err)
		}
		guardtest.Want(t, w.Dispatch(t, alice, guardtest.Req{Tool: "get", Args: `{"key":"a"}`, CallID: "v2"}), guard.CodeOK, guard.DeliveryFresh)
		if libs := libraries(t, admin); len(libs) != 2 || len(libs[lib]) != len(scriptNames) || len(libs[other]) != len(scriptNames) {
			t.Fatalf("libraries %v, want ours (%s) and the other version's, whole", libs, lib)
		}
		if err := admin.FunctionDelete(ctx, other).Err(); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("no-function-load", func(t *testing.T) {
		if err := admin.Do(ctx, "ACL", "SETUSER", "nofn", "on", ">pw", "~*", "+@all", "-function|load").Err(); err != nil {
			t.Fatal(err)
		}
		if err := admin.FunctionFlush(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		limited := redis.NewClient(&redis.Options{ContextTimeoutEnabled: true, Addr: admin.Options().Addr, Username: "nofn", Password: "pw"})
		t.Cleanup(func() { _ = limited.Close() })
		s := newStore(t, limited)
		if err := s.Check(ctx); err == nil || !strings.Contains(err.Error(), "Options.Scripts") || !strings.Contains(err.Error(), "NOPERM") {
			t.Fatalf("Check by an account that may not FUNCTION LOAD: %v, want NOPERM and a hint of Options.Scripts", err)
		}
		s, err := idem.New(limited, idem.Options{Prefix: redistest.Prefix(t), Scripts: true})
		if err != nil {
			t.Fatal(err)
		}
		w := guardtest.NewWorld(t, s)
		guardtest.Want(t, w.Dispatch(t, alice, guardtest.Req{Tool: "get", Args: `{"key":"a"}`, CallID: "n1"}), guard.CodeOK, guard.DeliveryFresh)
	})
}

// waitReplicaSynced waits until the replica at port has its master's data
// (master_link_status:up): before that, WAIT counts it out.
func waitReplicaSynced(t *testing.T, port int) {
	t.Helper()
	c := nodeClient(t, port)
	up := func() bool {
		info, err := redisconn.Info(context.Background(), c, "replication")
		return err == nil && info["master_link_status"] == "up"
	}
	if !redistest.WaitUntil(20*time.Second, up) {
		t.Fatalf("replica %d never synced", port)
	}
}

// TestFunctionsWithReplicas: with Options.Replicas, FCALL and WAIT go in
// one pipeline; after FUNCTION FLUSH on the master (the replica follows),
// the next write loads the library again and is acknowledged; the replica
// has the library too, and no EVALSHA was sent.
func TestFunctionsWithReplicas(t *testing.T) {
	redistest.NeedBinaries(t, "redis-server")
	redistest.StartServer(t, t.TempDir(), portFnMaster, "--appendonly", "no", "--repl-diskless-sync-delay", "0")
	redistest.StartServer(t, t.TempDir(), portFnReplica, "--appendonly", "no", "--replicaof", "127.0.0.1", strconv.Itoa(portFnMaster))
	waitReplicaSynced(t, portFnReplica)
	master, replica := nodeClient(t, portFnMaster), nodeClient(t, portFnReplica)
	ctx := context.Background()
	s, err := idem.New(nodeClient(t, portFnMaster), idem.Options{Prefix: redistest.Prefix(t), Replicas: 1})
	if err != nil {
		t.Fatal(err)
	}
	if !redistest.WaitUntil(10*time.Second, func() bool { return s.Check(ctx) == nil }) {
		t.Fatalf("Check: %v", s.Check(ctx))
	}
	w := guardtest.NewWorld(t, s)
	before := cmdstats(t, master)
	guardtest.Want(t, w.Dispatch(t, alice, guardtest.Req{Tool: "put", Args: `{"key":"a","value":"v"}`, CallID: "r1", Key: "k1"}), guard.CodeOK, guard.DeliveryFresh)
	if err := master.FunctionFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	guardtest.Want(t, w.Dispatch(t, alice, guardtest.Req{Tool: "put", Args: `{"key":"b","value":"v"}`, CallID: "r2", Key: "k2"}), guard.CodeOK, guard.DeliveryFresh)
	wantFCalls(t, master, before, 5, 1, "two writes with the library flushed between")
	lib := storeLibrary(t, master)
	if !redistest.WaitUntil(5*time.Second, func() bool { return len(libraries(t, replica)[lib]) == len(scriptNames) }) {
		t.Fatalf("replica libraries %v, want %s", libraries(t, replica), lib)
	}
	if w.Down.Writes() != 2 {
		t.Fatalf("%d writes ran, want 2", w.Down.Writes())
	}
}

// fnCluster is a cluster of the test's own: three masters, each with a
// replica.
type fnCluster struct {
	addrs   []string        // masters first
	masters []*redis.Client // direct clients of the masters
	ids     []string        // the masters' node ids
}

func startFnCluster(t *testing.T) *fnCluster {
	t.Helper()
	redistest.NeedBinaries(t, "redis-server", "redis-cli")
	const nodes = 6
	c := &fnCluster{}
	for i := range nodes {
		port := portFnCluster + i
		redistest.StartServer(t, t.TempDir(), port, "--appendonly", "no", "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
			"--cluster-node-timeout", "15000", "--repl-diskless-sync-delay", "0")
		c.addrs = append(c.addrs, "127.0.0.1:"+strconv.Itoa(port))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if out, err := redistest.CreateCluster(ctx, 1, c.addrs...); err != nil {
		t.Fatalf("cluster create: %v\n%s", err, out)
	}
	for i := range nodes {
		waitClusterOK(t, portFnCluster+i)
		if i >= 3 {
			waitReplicaSynced(t, portFnCluster+i)
		}
	}
	for i := range 3 { // redis-cli makes the first three masters
		m := nodeClient(t, portFnCluster+i)
		c.masters = append(c.masters, m)
		c.ids = append(c.ids, m.ClusterMyID(ctx).Val())
	}
	return c
}

// master returns the index of the master that owns the slot, as the
// masters themselves say.
func (c *fnCluster) master(t *testing.T, slot int64) int {
	t.Helper()
	slots, err := c.masters[0].ClusterSlots(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range slots {
		if int64(r.Start) <= slot && slot <= int64(r.End) {
			for i, a := range c.addrs[:3] {
				if r.Nodes[0].Addr == a {
					return i
				}
			}
		}
	}
	t.Fatalf("no master owns slot %d", slot)
	return -1
}

// tenantOn returns a tenant none of the cluster tests used yet whose keys
// are on master m, and their slot.
func (c *fnCluster) tenantOn(t *testing.T, s *idem.Store, m int, used map[string]bool) (guard.Principal, int64) {
	t.Helper()
	for i := 0; ; i++ {
		tenant := "fn-tenant-" + strconv.Itoa(i)
		if used[tenant] {
			continue
		}
		stream, _ := s.AuditKeys(tenant)
		slot, err := c.masters[0].ClusterKeySlot(context.Background(), stream).Result()
		if err != nil {
			t.Fatal(err)
		}
		if c.master(t, slot) == m {
			used[tenant] = true
			return guardtest.Principal(tenant, "u"), slot
		}
	}
}

// setSlot sends CLUSTER SETSLOT <slot> <how> to a master.
func (c *fnCluster) setSlot(t *testing.T, m int, slot int64, how ...string) {
	t.Helper()
	args := append([]any{"CLUSTER", "SETSLOT", slot}, toAny(how)...)
	if err := c.masters[m].Do(context.Background(), args...).Err(); err != nil {
		t.Fatalf("%s: CLUSTER SETSLOT %d %v: %v", c.addrs[m], slot, how, err)
	}
}

// migrateSlotKeys moves every key of the slot from one master to another
// (MIGRATE), as redis-cli --cluster reshard does between its SETSLOTs.
func (c *fnCluster) migrateSlotKeys(t *testing.T, from, to int, slot int64) {
	t.Helper()
	ctx := context.Background()
	keys, err := c.masters[from].ClusterGetKeysInSlot(ctx, int(slot), 1000).Result()
	if err != nil || len(keys) == 0 {
		t.Fatalf("keys of slot %d: %v, %v", slot, keys, err)
	}
	args := []any{"MIGRATE", "127.0.0.1", portFnCluster + to, "", 0, 5000, "KEYS"}
	if err := c.masters[from].Do(ctx, append(args, toAny(keys)...)...).Err(); err != nil {
		t.Fatalf("MIGRATE %v: %v", keys, err)
	}
}

func toAny(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// TestFunctionsCluster, on a cluster of the test's own (three masters,
// each with a replica), with and without Options.Replicas: the library is
// loaded on every master and every state change is an FCALL, never an
// EVALSHA. A master whose library was flushed gets it again at the next
// dispatch to one of its tenants. A master that never had it gets it when
// a slot moves to it: after the move (the client still sends to the old
// owner and follows MOVED), and while the slot is moving (ASK).
func TestFunctionsCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster of its own")
	}
	c := startFnCluster(t)
	rdb := redis.NewClusterClient(&redis.ClusterOptions{ContextTimeoutEnabled: true, Addrs: c.addrs[:3], MaxRedirects: 8})
	t.Cleanup(func() { _ = rdb.Close() })
	ctx := context.Background()
	used := map[string]bool{}
	stats := func() []map[string]cmdstat {
		var out []map[string]cmdstat
		for _, m := range c.masters {
			out = append(out, cmdstats(t, m))
		}
		return out
	}

	for _, replicas := range []int{0, 1} {
		t.Run(fmt.Sprintf("Replicas=%d", replicas), func(t *testing.T) {
			s, err := idem.New(rdb, idem.Options{Prefix: redistest.Prefix(t), Replicas: replicas})
			if err != nil {
				t.Fatal(err)
			}
			if !redistest.WaitUntil(20*time.Second, func() bool { return s.Check(ctx) == nil }) {
				t.Fatalf("Check: %v", s.Check(ctx))
			}
			w := guardtest.NewWorld(t, s)
			grants := map[string]string{} // each write's grant, which its replay presents again
			write := func(w *guardtest.World, p guard.Principal, id string) {
				t.Helper()
				call := w.Call(p, guardtest.Req{Tool: "put", Args: `{"key":"a","value":"v"}`, CallID: id, Key: id})
				call.Approval = w.Grant(t, p, "put", `{"key":"a","value":"v"}`)
				grants[id] = call.Approval
				guardtest.Want(t, w.DispatchCall(t, call), guard.CodeOK, guard.DeliveryFresh)
			}
			var mine []guard.Principal // this run's tenants
			tenantOn := func(m int) (guard.Principal, int64) {
				p, slot := c.tenantOn(t, s, m, used)
				mine = append(mine, p)
				return p, slot
			}
			before := stats()
			var lib string
			for m := range c.masters {
				p, _ := tenantOn(m)
				write(w, p, "plain")
				lib = storeLibrary(t, c.masters[m])
			}
			after := stats()
			for m := range c.masters {
				wantOnly(t, delta(before[m], after[m]), true)
			}

			// A master whose library was flushed.
			p, _ := tenantOn(1)
			if err := c.masters[1].FunctionFlush(ctx).Err(); err != nil {
				t.Fatal(err)
			}
			write(w, p, "flushed")
			if got := storeLibrary(t, c.masters[1]); got != lib {
				t.Fatalf("master 1 has library %s again, want %s", got, lib)
			}

			// A slot moves, whole, from master 0 to master 2, which never
			// had the library: the client learns it from MOVED.
			p, slot := tenantOn(0)
			if err := c.masters[2].FunctionFlush(ctx).Err(); err != nil {
				t.Fatal(err)
			}
			c.setSlot(t, 2, slot, "IMPORTING", c.ids[0])
			c.setSlot(t, 0, slot, "MIGRATING", c.ids[2])
			c.setSlot(t, 2, slot, "NODE", c.ids[2])
			c.setSlot(t, 0, slot, "NODE", c.ids[2])
			before = stats()
			write(w, p, "moved")
			d := delta(before[2], stats()[2])
			if d["fcall"].failed != 1 || storeLibrary(t, c.masters[2]) != lib {
				t.Fatalf("after MOVED to master 2: FCALL %+v there, libraries %v; want one refused call and %s",
					d["fcall"], libraries(t, c.masters[2]), lib)
			}

			// A slot on its way from master 0 to master 2, which lost the
			// library again, its keys already moved: master 0 answers ASK.
			// (A call whose keys are not all on the importing master is
			// refused there with TRYAGAIN before any function is looked
			// up: a replay, whose keys all exist, is what reaches it: the
			// same call with the grant its first run spent.)
			p, slot = tenantOn(0)
			write(w, p, "asked")
			if err := c.masters[2].FunctionFlush(ctx).Err(); err != nil {
				t.Fatal(err)
			}
			c.setSlot(t, 2, slot, "IMPORTING", c.ids[0])
			c.setSlot(t, 0, slot, "MIGRATING", c.ids[2])
			c.migrateSlotKeys(t, 0, 2, slot)
			before = stats()
			replay := w.Call(p, guardtest.Req{Tool: "put", Args: `{"key":"a","value":"v"}`, CallID: "asked", Key: "asked"})
			replay.Approval = grants["asked"]
			guardtest.Want(t, w.DispatchCall(t, replay), guard.CodeOK, guard.DeliveryLocalReplay)
			d = delta(before[2], stats()[2])
			if d["fcall"].failed != 1 || storeLibrary(t, c.masters[2]) != lib {
				t.Fatalf("after ASK to master 2: FCALL %+v there, libraries %v; want one refused call and %s",
					d["fcall"], libraries(t, c.masters[2]), lib)
			}
			if n := c.masters[0].ClusterCountKeysInSlot(ctx, int(slot)).Val(); n != 0 {
				t.Fatalf("%d keys of the moving slot written on master 0", n)
			}
			c.setSlot(t, 2, slot, "NODE", c.ids[2])
			c.setSlot(t, 0, slot, "NODE", c.ids[2])

			if w.Down.Writes() != 6 {
				t.Fatalf("%d writes ran, want 6: each once", w.Down.Writes())
			}
			for i, p := range mine {
				want := int64(1)
				if i == len(mine)-1 {
					want = 2 // the write and its replay
				}
				if n, err := guard.VerifyAudit(ctx, s, p.TenantID); err != nil || n != want {
					t.Fatalf("tenant %s: audit %d records, %v; want %d", p.TenantID, n, err, want)
				}
			}
			for m := range c.masters {
				if d := delta(before[m], cmdstats(t, c.masters[m])); d["evalsha"].calls+d["eval"].calls != 0 {
					t.Fatalf("master %d: %+v; want no scripts sent", m, d)
				}
			}
		})
	}
}

// TestFunctionsFallback: on a server without Redis Functions (miniredis)
// the store asks once (FUNCTION LOAD, refused) and sends EVALSHA from then
// on; with Options.Scripts it does not ask at all.
func TestFunctionsFallback(t *testing.T) {
	for _, scripts := range []bool{false, true} {
		t.Run(fmt.Sprintf("Scripts=%v", scripts), func(t *testing.T) {
			_, rdb := redistest.Mini(t)
			names := &commandNames{}
			rdb.AddHook(names)
			s, err := idem.New(rdb, idem.Options{Prefix: redistest.Prefix(t), Scripts: scripts})
			if err != nil {
				t.Fatal(err)
			}
			w := guardtest.NewWorld(t, s)
			for i := range 3 {
				id := "c" + strconv.Itoa(i)
				guardtest.Want(t, w.Dispatch(t, alice, guardtest.Req{Tool: "put", Args: `{"key":"a","value":"v"}`, CallID: id, Key: id}), guard.CodeOK, guard.DeliveryFresh)
			}
			want := 1
			if scripts {
				want = 0
			}
			if n := names.count("function"); n != want || names.count("fcall") != 0 || names.count("evalsha") != 6 {
				t.Fatalf("FUNCTION %d (want %d), FCALL %d (want 0), EVALSHA %d (want 6)",
					n, want, names.count("fcall"), names.count("evalsha"))
			}
		})
	}
}

// commandNames is a go-redis hook that counts the commands a client sends,
// by name.
type commandNames struct {
	mu sync.Mutex
	n  map[string]int
}

func (h *commandNames) count(name string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.n[name]
}

func (h *commandNames) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *commandNames) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (h *commandNames) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.mu.Lock()
		if h.n == nil {
			h.n = map[string]int{}
		}
		h.n[cmd.Name()]++
		h.mu.Unlock()
		return next(ctx, cmd)
	}
}
