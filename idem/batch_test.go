package idem_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/guard/guardtest"
	"github.com/toolguard/toolguard/idem"
	"github.com/toolguard/toolguard/internal/redistest"
)

// portBatch is the port of the server TestAutoPipeliningLostLibrary starts
// (19460–19469 are the auto-pipelining tests').
const portBatch = 19460

// scriptCalls is a go-redis hook that counts the store's script calls
// (FCALL, EVALSHA, EVAL) by how they went: alone, or in pipelines, and how
// many pipelines carried them. With hold set, every round trip that
// carries one is held up that long before it is sent. With flushFirst set,
// the first pipeline that carries one starts with FUNCTION FLUSH: the
// server runs it and then, in the same read, each call of the pipeline
// with no library.
type scriptCalls struct {
	alone, piped, pipelines atomic.Int64
	hold                    atomic.Int64 // a time.Duration
	flushFirst              bool
	flushed                 atomic.Bool
	pipedRefused            atomic.Int64 // calls in pipelines answered "Function not found"
	pipelinesAnswered       atomic.Int64 // pipelines with a script call whose replies came back
	mu                      sync.Mutex
	sizes                   []int // script calls per pipeline, in order sent
}

func isScript(cmd redis.Cmder) bool {
	switch cmd.Name() {
	case "fcall", "evalsha", "eval":
		return true
	}
	return false
}

func (h *scriptCalls) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *scriptCalls) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if isScript(cmd) {
			h.alone.Add(1)
			time.Sleep(time.Duration(h.hold.Load()))
		}
		return next(ctx, cmd)
	}
}

func (h *scriptCalls) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		n := 0
		for _, cmd := range cmds {
			if isScript(cmd) {
				n++
			}
		}
		if n > 0 {
			h.pipelines.Add(1)
			h.piped.Add(int64(n))
			h.mu.Lock()
			h.sizes = append(h.sizes, n)
			h.mu.Unlock()
			if h.flushFirst && h.flushed.CompareAndSwap(false, true) {
				cmds = append([]redis.Cmder{redis.NewStatusCmd(ctx, "function", "flush")}, cmds...)
			}
			time.Sleep(time.Duration(h.hold.Load()))
		}
		err := next(ctx, cmds)
		for _, cmd := range cmds {
			if isScript(cmd) && redis.HasErrorPrefix(cmd.Err(), "Function not found") {
				h.pipedRefused.Add(1)
			}
		}
		if n > 0 {
			h.pipelinesAnswered.Add(1)
		}
		return err
	}
}

// burst runs reads and writes (each half of n) from n goroutines at once
// over a few tenants and checks every answer and every tenant's audit
// chain: each dispatch answered OK and fresh, and recorded once.
func burst(t *testing.T, s *idem.Store, n int, tag string) {
	t.Helper()
	w := guardtest.NewWorld(t, s)
	const tenants = 4
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := guardtest.Principal("tenant-"+strconv.Itoa(i%tenants), "u")
			id := tag + strconv.Itoa(i)
			tool, args, key := "get", `{"key":"k"}`, ""
			if i%2 == 1 {
				tool, args, key = "put", `{"key":"k`+id+`","value":"v"}`, id
			}
			res, err := w.TryDispatch(p, guardtest.Req{Tool: tool, Args: args, CallID: id, Key: key})
			switch {
			case err != nil:
				errs <- fmt.Errorf("%s %s: %w", tool, id, err)
			case res.Code != guard.CodeOK || res.Delivery != guard.DeliveryFresh:
				errs <- fmt.Errorf("%s %s: %v %v %s", tool, id, res.Code, res.Delivery, res.Message)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	var total int64
	for i := range tenants {
		got, err := guard.VerifyAudit(context.Background(), s, "tenant-"+strconv.Itoa(i))
		if err != nil {
			t.Fatalf("tenant-%d: %v", i, err)
		}
		total += got
	}
	if total != int64(n) {
		t.Fatalf("%d audit records, want one per dispatch, %d", total, n)
	}
}

// TestAutoPipelining: many concurrent dispatches reach the server in fewer
// round trips than script calls, most calls in pipelines, and all answer
// as they would alone: on miniredis, a real server and a cluster, with
// Redis Functions and with scripts. On miniredis the scripts are flushed
// first, so that calls in a pipeline meet NOSCRIPT and each is sent again
// with EVAL by its own caller.
func TestAutoPipelining(t *testing.T) {
	for _, b := range redistest.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			rdb := b.Open(t)
			h := &scriptCalls{}
			rdb.AddHook(h)
			for _, scripts := range []bool{false, true} {
				t.Run(fmt.Sprintf("Scripts=%v", scripts), func(t *testing.T) {
					s, err := idem.New(rdb, idem.Options{Prefix: redistest.Prefix(t), Scripts: scripts})
					if err != nil {
						t.Fatal(err)
					}
					if err := s.Check(context.Background()); err != nil {
						t.Fatal(err)
					}
					if b.Name == redistest.BackendMiniredis {
						if err := rdb.ScriptFlush(context.Background()).Err(); err != nil {
							t.Fatal(err)
						}
					}
					h.alone.Store(0)
					h.piped.Store(0)
					h.pipelines.Store(0)
					// Every round trip is held up a little, so that the calls
					// that find the server's slots busy queue behind them
					// however the machine schedules the goroutines: without
					// it, on a loaded machine most calls can find a free slot
					// and go alone.
					h.hold.Store(int64(20 * time.Millisecond))
					defer h.hold.Store(0)
					burstAndCount(t, s, h)
				})
			}
		})
	}
}

// burstAndCount runs a burst and checks that it went in pipelines: fewer
// than half as many round trips as script calls.
func burstAndCount(t *testing.T, s *idem.Store, h *scriptCalls) {
	t.Helper()
	const n = 256
	burst(t, s, n, "b")
	alone, piped, pipelines := h.alone.Load(), h.piped.Load(), h.pipelines.Load()
	t.Logf("%d script calls alone, %d in %d pipelines", alone, piped, pipelines)
	// A read is one call, a write two: at least 384 calls.
	if calls := alone + piped; calls < n*3/2 || alone+pipelines >= calls/2 || pipelines == 0 {
		t.Fatalf("%d script calls in %d round trips (%d alone, %d pipelines): want at least %d calls, in fewer than half as many round trips",
			calls, alone+pipelines, alone, pipelines, n*3/2)
	}
}

// TestAutoPipeliningLostLibrary: a server that lost the store's library
// (flushed at the head of the first pipeline) answers "Function not
// found" to each FCALL of that pipeline; each of those calls (the function
// did not run) loads the library and is sent again by its own caller, and
// every dispatch answers as it would alone.
func TestAutoPipeliningLostLibrary(t *testing.T) {
	redistest.NeedBinaries(t, "redis-server")
	redistest.StartServer(t, t.TempDir(), portBatch, "--appendonly", "no")
	admin := nodeClient(t, portBatch)
	rdb := nodeClient(t, portBatch)
	ctx := context.Background()
	h := &scriptCalls{flushFirst: true}
	rdb.AddHook(h)
	s := newStore(t, rdb)
	if err := s.Check(ctx); err != nil {
		t.Fatal(err)
	}
	before := cmdstats(t, admin)
	h.hold.Store(int64(20 * time.Millisecond)) // so that calls queue and pipelines form (TestAutoPipelining)
	burstAndCount(t, s, h)
	d := delta(before, cmdstats(t, admin))
	refused := h.pipedRefused.Load()
	if refused < 2 || d["fcall"].failed < int(refused) || d["evalsha"].calls+d["eval"].calls != 0 {
		t.Fatalf("commands %v, %d calls in pipelines refused: want several FCALLs in a pipeline refused for want of the library, and no scripts", d, refused)
	}
	t.Logf("%d FCALLs refused, %d of them in pipelines; %d in all", d["fcall"].failed, refused, d["fcall"].calls)
}

// TestAutoPipeliningCallerDeadline: a caller whose context ends while its
// batch is in flight returns at once with its context's error, and the
// batch goes on: the other calls in it get their answers.
func TestAutoPipeliningCallerDeadline(t *testing.T) {
	_, rdb := redistest.Mini(t)
	h := &scriptCalls{}
	rdb.AddHook(h)
	s, err := idem.New(rdb, idem.Options{Prefix: redistest.Prefix(t)})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	status := func(ctx context.Context, i int) error {
		q := &guard.Entry{TenantID: "t", SubjectID: "u", OperationID: "op-" + strconv.Itoa(i), Tool: "get", Now: time.Now()}
		_, _, err := s.Status(ctx, q)
		return err
	}
	if err := status(ctx, -1); err != nil { // Check, and the scripts loaded
		t.Fatal(err)
	}
	const hold = 300 * time.Millisecond
	h.hold.Store(int64(hold))
	h.alone.Store(0)

	// Blockers take every slot, alone, for one held round trip each.
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	run := func(ctx context.Context, i int) {
		defer wg.Done()
		if err := status(ctx, i); err != nil {
			errs <- fmt.Errorf("call %d: %w", i, err)
		}
	}
	long, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for i := range 16 {
		wg.Add(1)
		go run(long, i)
		if i == 3 { // the slots (4) are taken: the rest queue
			for h.alone.Load() < 4 {
				time.Sleep(time.Millisecond)
			}
		}
	}
	// The short caller queues too, and its deadline falls while its batch
	// is in flight (sent after the blockers' hold, answered a hold later).
	start := time.Now()
	short, cancelShort := context.WithTimeout(ctx, hold+hold/2)
	defer cancelShort()
	shortErr := make(chan error, 1)
	go func() { shortErr <- status(short, 100) }()
	for {
		time.Sleep(10 * time.Millisecond)
		if h.pipelines.Load() > 0 {
			break
		}
		if time.Since(start) > 5*time.Second {
			t.Fatal("no pipeline was sent")
		}
	}
	err = <-shortErr
	// Its deadline came while its batch was still in flight: it returned
	// then, with the deadline's error, not with the batch's answer.
	inFlight := h.pipelinesAnswered.Load() == 0
	if !errors.Is(err, context.DeadlineExceeded) || !inFlight {
		t.Fatalf("short caller: %v, its batch answered before it returned: %v; want its deadline's error while the batch is in flight",
			err, !inFlight)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.sizes) == 0 || h.sizes[0] != 13 {
		t.Fatalf("pipelines of %v script calls; want the 12 queued calls and the short one in the first", h.sizes)
	}
}

// TestAutoPipeliningFarServer: where the server is far (every round trip
// held up by the network, not by the server), calls that find the slots
// busy do not wait for another caller's round trip: the store lets more
// round trips fly, and once it has learnt the path nearly every call goes
// alone. (Near and busy, TestAutoPipelining, calls queue and share them.)
func TestAutoPipeliningFarServer(t *testing.T) {
	mr, _ := redistest.Mini(t)
	p := redistest.NewProxy(t, mr.Addr())
	p.Delay(10*time.Millisecond, 10*time.Millisecond)
	rdb := redis.NewClient(&redis.Options{ContextTimeoutEnabled: true, Addr: p.Addr(), PoolSize: 32}) // up to 16 in flight
	t.Cleanup(func() { _ = rdb.Close() })
	h := &scriptCalls{}
	rdb.AddHook(h)
	s := newStore(t, rdb)
	ctx := context.Background()
	status := func(c, i int) error {
		q := &guard.Entry{TenantID: "t", SubjectID: "u", OperationID: fmt.Sprintf("op-%d-%d", c, i), Tool: "get", Now: time.Now()}
		_, _, err := s.Status(ctx, q)
		return err
	}
	if err := status(-1, 0); err != nil { // Check, and the scripts loaded
		t.Fatal(err)
	}
	const callers = 12 // three times the slots a store starts with
	rounds := func(n int) {
		t.Helper()
		var wg sync.WaitGroup
		errs := make(chan error, callers)
		for c := range callers {
			wg.Go(func() {
				for i := range n {
					if err := status(c, i); err != nil {
						errs <- err
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
	}
	rounds(20) // the store learns the path
	h.alone.Store(0)
	h.piped.Store(0)
	h.pipelines.Store(0)
	rounds(20)
	alone, piped, pipelines := h.alone.Load(), h.piped.Load(), h.pipelines.Load()
	t.Logf("%d script calls alone, %d in %d pipelines", alone, piped, pipelines)
	// A store that kept its first 4 slots would make about one round trip
	// for every 3 calls here; one that lets round trips fly makes nearly
	// one a call (8 or 9 in 10 on a quiet machine). The bound is half, so
	// that a machine starved of CPU, where callers meet by chance, does
	// not fail a store that adapts (the figure is in the log).
	if calls, trips := alone+piped, alone+pipelines; calls != callers*20 || trips*2 < calls {
		t.Fatalf("%d script calls in %d round trips (%d alone, %d pipelines): want %d calls, at least half alone",
			calls, trips, alone, pipelines, callers*20)
	}
}
