// Command rediscost counts the instructions a Redis server spends per
// dispatch of each kind (a read, a fresh write, a replay of a write), for
// the store's scripts as they are. Run it through scripts/redis-instr.sh,
// which starts a redis-server under valgrind's callgrind and stops it
// after: instruction counts do not depend on what else the machine is
// doing, as Redis CPU time measured under load does, so two versions of
// the scripts can be compared on a shared machine.
//
//	scripts/redis-instr.sh            # 2000 dispatches of each kind
//	scripts/redis-instr.sh -n 500
//	scripts/redis-instr.sh -c 16      # 16 callers at once
//
// By default dispatches go one at a time: no pipelining, so each is one
// script call per round trip (a write two). With -c, that many callers
// dispatch at once and the store batches their calls as it does under
// load (idem/batch.go); the server runs ~50 times slower under callgrind,
// so nearly every call then waits for a batch. The counts include reading
// the request and writing the reply in user space, not the kernel's work.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/errgroup"

	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/idem"
	"github.com/toolguard/toolguard/internal/orders"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "rediscost:", err)
		os.Exit(1)
	}
}

func run() error {
	addr := flag.String("addr", "127.0.0.1:16999", "the redis-server that runs under callgrind")
	n := flag.Int("n", 2000, "dispatches of each kind")
	c := flag.Int("c", 1, "callers dispatching at once (1: one at a time; more: the store batches their calls)")
	out := flag.String("out", "", "callgrind's output file pattern, as given to valgrind (the newest dump is read)")
	flag.Parse()
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: *addr, ContextTimeoutEnabled: true})
	defer rdb.Close()
	store, err := idem.New(rdb, idem.Options{Prefix: "tg:", TTL: time.Hour})
	if err != nil {
		return err
	}
	signer, err := guard.NewSigner([]byte("rediscost-approval-key-0123456789abcdef"))
	if err != nil {
		return err
	}
	g := guard.New(orders.NoopTools(), store, guard.Options{Signer: signer})
	p := guard.Principal{TenantID: "tenant-1", SubjectID: "agent-1"}
	grant, err := signer.Sign(guard.NewGrant(p, guard.Proposal{Name: "create_refund_draft", Arguments: orders.NoopWriteArgs}, "rediscost", time.Now(), 24*time.Hour))
	if err != nil {
		return err
	}
	// Ids unique to the run: every read and write is fresh, every replay
	// finds the write of the same number.
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	call := func(kind string, i int) guard.Call {
		c := guard.Call{Principal: p, Context: guard.ExecutionContext{Provider: "openai", APIFamily: "responses",
			ResponseID: "resp_cost", CallID: "call_" + run + "_" + kind + "_" + strconv.Itoa(i), AdapterRevision: "openai-responses-v1"}}
		if kind == "read" {
			c.Proposal = guard.Proposal{Name: "get_order", Arguments: orders.NoopReadArgs}
			return c
		}
		c.Proposal = guard.Proposal{Name: "create_refund_draft", Arguments: orders.NoopWriteArgs}
		c.Context.IdempotencyKey, c.Approval = "key_"+run+"_"+strconv.Itoa(i), grant
		return c
	}
	want := map[string]guard.Delivery{"read": guard.DeliveryFresh, "write": guard.DeliveryFresh, "replay": guard.DeliveryLocalReplay}
	if *c < 1 || *n < *c {
		return errors.New("need -c >= 1 and -n >= -c")
	}
	if *c == 1 {
		fmt.Printf("rediscost: %d dispatches of each kind, one at a time\n", *n)
	} else {
		fmt.Printf("rediscost: %d dispatches of each kind, %d callers at once\n", *n, *c)
	}
	for _, kind := range []string{"read", "write", "replay"} {
		// A few first, so the library is loaded and the keys' tables have
		// grown before the count starts.
		for i := range 50 {
			if _, err := g.Dispatch(ctx, call(kind, -1-i)); err != nil {
				return err
			}
		}
		before, err := instructions(*out)
		if err != nil {
			return err
		}
		var eg errgroup.Group
		for w := range *c {
			eg.Go(func() error {
				for i := w; i < *n; i += *c {
					res, err := g.Dispatch(ctx, call(kind, i))
					if err != nil {
						return err
					}
					if res.Code != guard.CodeOK || res.Delivery != want[kind] {
						return fmt.Errorf("%s %d: %s %s", kind, i, res.Code, res.Delivery)
					}
				}
				return nil
			})
		}
		if err := eg.Wait(); err != nil {
			return err
		}
		after, err := instructions(*out)
		if err != nil {
			return err
		}
		fmt.Printf("%-7s %8.0f instructions per dispatch\n", kind, float64(after-before)/float64(*n))
	}
	return nil
}

// instructions dumps callgrind's counters and returns the total the
// server has executed since it started.
func instructions(pattern string) (int64, error) {
	if err := exec.Command("callgrind_control", "--dump").Run(); err != nil {
		return 0, fmt.Errorf("callgrind_control --dump (is the server running under callgrind?): %w", err)
	}
	// Each dump holds the counts since the one before; the sum of all is
	// the total.
	files, err := dumps(pattern)
	if err != nil {
		return 0, err
	}
	var total int64
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return 0, err
		}
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "summary: "); ok {
				n, err := strconv.ParseInt(strings.Fields(v)[0], 10, 64)
				if err != nil {
					return 0, err
				}
				total += n
			}
		}
	}
	return total, nil
}

func dumps(pattern string) ([]string, error) {
	if pattern == "" {
		return nil, errors.New("-out is required")
	}
	files, err := filepath.Glob(pattern + "*")
	if err == nil && len(files) == 0 {
		err = errors.New("none yet")
	}
	if err != nil {
		return nil, fmt.Errorf("no callgrind output at %s: %w", pattern, err)
	}
	return files, nil
}
