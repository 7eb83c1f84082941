package guard_test

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"

	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/idem"
	"github.com/toolguard/toolguard/internal/orders"
	"github.com/toolguard/toolguard/internal/redisconn"
	"github.com/toolguard/toolguard/internal/redistest"
)

type benchWorld struct {
	g      *guard.Guard
	signer *guard.Signer
	p      guard.Principal
	grant  string
	rt     *redisconn.RoundTrips
}

func newBenchWorld(b *testing.B, store guard.Store, rt *redisconn.RoundTrips, opts guard.Options) *benchWorld {
	signer, _ := guard.NewSigner([]byte("bench-approval-key-0123456789abcdef"))
	w := &benchWorld{signer: signer, p: guard.Principal{TenantID: "tenant-a", SubjectID: "user-1"}, rt: rt}
	opts.Signer = signer
	w.g = guard.New(orders.Tools(orders.NewService()), store, opts)
	tok, err := signer.Sign(guard.NewGrant(w.p, writeProp, "bench", time.Now(), time.Hour))
	if err != nil {
		b.Fatal(err)
	}
	w.grant = tok
	return w
}

var (
	readProp  = guard.Proposal{Name: "get_order", Arguments: []byte(`{"order_ref":"ORDER-7"}`)}
	writeProp = guard.Proposal{Name: "create_refund_draft", Arguments: []byte(`{"order_ref":"ORDER-7","reason":"duplicate"}`)}
	otherProp = guard.Proposal{Name: "create_refund_draft", Arguments: []byte(`{"order_ref":"ORDER-7","reason":"damaged"}`)}
	badProp   = guard.Proposal{Name: "create_refund_draft", Arguments: []byte(`{"order_ref":"ORDER-7","reason":"because"}`)}
)

func (w *benchWorld) call(prop guard.Proposal, callID, key string, approved bool) guard.Call {
	c := guard.Call{Principal: w.p, Proposal: prop,
		Context: guard.ExecutionContext{Provider: "openai", APIFamily: "responses", ResponseID: "resp_1",
			CallID: callID, IdempotencyKey: key, AdapterRevision: "openai-responses-v1"}}
	if approved {
		c.Approval = w.grant
	}
	return c
}

// benchCases are the dispatch paths of issue 5: a fresh read, a fresh write,
// a replay, a conflict and invalid arguments.
var benchCases = []struct {
	name  string
	want  guard.Code
	setup func(w *benchWorld)
	call  func(w *benchWorld, i int) guard.Call
}{
	{"read", guard.CodeOK, nil, func(w *benchWorld, i int) guard.Call {
		return w.call(readProp, "r"+strconv.Itoa(i), "", false)
	}},
	{"write", guard.CodeOK, nil, func(w *benchWorld, i int) guard.Call {
		// Each execution is approved by a grant of its own: a grant pays
		// for one.
		c := w.call(writeProp, "w"+strconv.Itoa(i), "k"+strconv.Itoa(i), false)
		c.Approval, _ = w.signer.Sign(guard.NewGrant(w.p, writeProp, "bench", time.Now(), time.Hour))
		return c
	}},
	{"replay", guard.CodeOK, func(w *benchWorld) {
		_, _ = w.g.Dispatch(context.Background(), w.call(writeProp, "first", "k-replay", true))
	}, func(w *benchWorld, i int) guard.Call {
		return w.call(writeProp, "p"+strconv.Itoa(i), "k-replay", true)
	}},
	{"conflict", guard.CodeIdempotencyConflict, func(w *benchWorld) {
		_, _ = w.g.Dispatch(context.Background(), w.call(writeProp, "first", "k-conflict", true))
	}, func(w *benchWorld, i int) guard.Call {
		c := w.call(otherProp, "c"+strconv.Itoa(i), "k-conflict", false)
		tok, _ := w.signer.Sign(guard.NewGrant(w.p, otherProp, "bench", time.Now(), time.Hour))
		c.Approval = tok
		return c
	}},
	{"invalid", guard.CodeInvalidArguments, nil, func(w *benchWorld, i int) guard.Call {
		return w.call(badProp, "i"+strconv.Itoa(i), "ki"+strconv.Itoa(i), true)
	}},
}

// BenchmarkDispatch measures whole dispatches through the Redis store,
// reporting Redis round trips per dispatch (redis-rt/op) and, on a real
// server, Redis's time executing them (redis-script-µs/op), its whole CPU
// time per dispatch (redis-cpu-µs/op, INFO cpu: scripts, parsing and the
// round trips themselves) and its memory growth per dispatch
// (redis-bytes/op, INFO memory used_memory). It runs on miniredis, and on a
// real server when TOOLGUARD_REDIS_URL is set: "redis" as the store comes
// (Redis Functions, FCALL), "redis-scripts" with idem.Options.Scripts
// (EVALSHA), side by side.
func BenchmarkDispatch(b *testing.B) { benchDispatch(b, nil) }

// BenchmarkDispatchRateLimited is BenchmarkDispatch with the guard's own
// rate limiter (idem.Limiter) on, at a limit the run never reaches: the
// goal is at most one more round trip per dispatch.
func BenchmarkDispatchRateLimited(b *testing.B) {
	benchDispatch(b, func(b *testing.B, rdb redis.UniversalClient) guard.Options {
		lim, err := idem.NewLimiter(rdb, func(string, string) redis_rate.Limit {
			return redis_rate.PerSecond(1 << 30)
		}, idem.LimiterOptions{Prefix: redistest.Prefix(b) + "rl:"})
		if err != nil {
			b.Fatal(err)
		}
		return guard.Options{Checks: []guard.Check{lim.Check}}
	})
}

// BenchmarkDispatchBudgeted is BenchmarkDispatch with a tenant budget the
// run never spends, so that every execution is charged: a write's charge
// rides on its reservation (no round trip more), a read's takes one before
// the read runs.
func BenchmarkDispatchBudgeted(b *testing.B) {
	benchDispatch(b, func(*testing.B, redis.UniversalClient) guard.Options {
		return guard.Options{TenantBudget: guard.TenantBudget{Limit: 1 << 62}}
	})
}

func benchDispatch(b *testing.B, options func(*testing.B, redis.UniversalClient) guard.Options) {
	type backend struct {
		name    string
		open    func(b *testing.B) redis.UniversalClient
		scripts bool // idem.Options.Scripts: EVALSHA where the server has Redis Functions
	}
	backends := []backend{{name: "miniredis", open: func(b *testing.B) redis.UniversalClient { _, c := redistest.Mini(b); return c }}}
	if os.Getenv(redistest.EnvURL) != "" {
		standalone := func(b *testing.B) redis.UniversalClient { return redistest.Standalone(b) }
		backends = append(backends, backend{name: "redis", open: standalone}, backend{name: "redis-scripts", open: standalone, scripts: true})
	}
	for _, bc := range benchCases {
		b.Run(bc.name, func(b *testing.B) {
			for _, be := range backends {
				b.Run(be.name, func(b *testing.B) {
					rdb := be.open(b)
					rt := &redisconn.RoundTrips{}
					rdb.AddHook(rt)
					store, err := idem.New(rdb, idem.Options{Prefix: redistest.Prefix(b), Scripts: be.scripts})
					if err != nil {
						b.Fatal(err)
					}
					var opts guard.Options
					if options != nil {
						opts = options(b, rdb)
					}
					w := newBenchWorld(b, store, rt, opts)
					if bc.setup != nil {
						bc.setup(w)
					}
					// Load the function library, or warm the script cache, so
					// neither FCALL nor EVALSHA misses in the loop.
					_, _ = w.g.Dispatch(context.Background(), bc.call(w, -1))
					calls := make([]guard.Call, b.N)
					for i := range calls {
						calls[i] = bc.call(w, i)
					}
					// INFO is a round trip too: read it before counting starts.
					ctx := context.Background()
					scripts := redisconn.ScriptTime(ctx, rdb)
					cpu := redisconn.ServerCPU(ctx, rdb)
					mem := int64(redisconn.UsedMemory(ctx, rdb))
					rt.Reset()
					b.ReportAllocs()
					b.ResetTimer()
					for i := range b.N {
						res, err := w.g.Dispatch(context.Background(), calls[i])
						if err != nil || res.Code != bc.want {
							b.Fatalf("%s: %v %v", bc.name, res, err)
						}
					}
					b.StopTimer()
					b.ReportMetric(float64(rt.Count())/float64(b.N), "redis-rt/op")
					if be.name != "miniredis" {
						// Redis's own time executing the scripts (INFO commandstats).
						scripts = redisconn.ScriptTime(ctx, rdb) - scripts
						b.ReportMetric(float64(scripts.Microseconds())/float64(b.N), "redis-script-µs/op")
						// All of Redis's CPU (INFO cpu), which also counts the
						// round trips' reading, parsing and replying; and what the
						// run left in memory (used_memory: negative if Redis freed
						// more than the run stored).
						cpu = redisconn.ServerCPU(ctx, rdb) - cpu
						b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "redis-cpu-µs/op")
						mem = int64(redisconn.UsedMemory(ctx, rdb)) - mem
						b.ReportMetric(float64(mem)/float64(b.N), "redis-bytes/op")
					}
				})
			}
		})
	}
}
