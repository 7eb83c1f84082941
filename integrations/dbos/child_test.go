package tgdbos_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/dbos-inc/dbos-transact-golang/dbos"

	"github.com/toolguard/toolguard/durable"
	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/provider"
)

// The child roles: start a run (and wait for its end), or only recover
// (DBOS's recovery at launch) and wait for the run's end. Either prints
// "RESULT <json>" of the run's durable.Result on standard output.
const (
	roleStart   = "start"
	roleRecover = "recover"
	envConfig   = "TGDBOS_TEST_ENV"
)

// Lines a child prints on standard output.
const (
	killLine    = "KILLPOINT "
	resultLine  = "RESULT "
	startedLine = "LAUNCHED"
	runLine     = "STARTED " // a run's workflow started (or found): its id
)

// killAt is the test harness's kill point: when name is the one the
// parent chose, the child says so and stops until it is killed.
func killAt(chosen, name string) {
	if chosen != "" && chosen == name {
		fmt.Printf("%s%s\n", killLine, name)
		_ = os.Stdout.Sync()
		select {}
	}
}

// killProvider is the model, with a kill point after each turn's reply
// came back (before DBOS recorded the step): "turn1", "turn2", ...
type killProvider struct {
	provider.Provider
	kill  string
	turns atomic.Int32
}

func (p *killProvider) Turn(ctx context.Context, req provider.Request) (*provider.Reply, error) {
	rep, err := p.Provider.Turn(ctx, req)
	killAt(p.kill, fmt.Sprintf("turn%d", p.turns.Add(1)))
	return rep, err
}

// killInterceptor puts a kill point after each dispatch the guard
// answered (the tool ran and the guard stored its outcome; DBOS has not
// recorded the step): "dispatched:<tool>:<code>".
func killInterceptor(kill string) guard.Interceptor {
	return guard.InterceptorFunc(func(next guard.Handler) guard.Handler {
		return func(ctx context.Context, call *guard.Call) (*guard.Result, error) {
			res, err := next(ctx, call)
			if err == nil {
				killAt(kill, "dispatched:"+call.Proposal.Name+":"+res.Code.String())
			}
			return res, err
		}
	})
}

// childMain is a child process of the kill tests: its world from the
// environment, with the kill points, DBOS launched (recovering what this
// executor identity left), and each of the env's runs started (staggered
// for roleStart; a run that exists already is its workflow) and awaited:
// it prints each run's result as it ends.
func childMain(role string) int {
	var e env
	if err := json.Unmarshal([]byte(os.Getenv(envConfig)), &e); err != nil {
		fmt.Fprintln(os.Stderr, "child: bad environment:", err)
		return 2
	}
	if role != roleStart && role != roleRecover {
		fmt.Fprintln(os.Stderr, "child:", errNoRole)
		return 2
	}
	ctx := context.Background()
	w, err := buildWorld(ctx, e, hooks{
		wrap:         func(p provider.Provider) provider.Provider { return &killProvider{Provider: p, kill: e.Kill} },
		interceptors: []guard.Interceptor{killInterceptor(e.Kill)},
		enter:        func(tool string) { killAt(e.Kill, "enter:"+tool) },
		after:        func(tool string) { killAt(e.Kill, "tool:"+tool) },
		notified:     func() { killAt(e.Kill, "notify") },
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 2
	}
	defer w.close()
	if err := dbos.Launch(w.dc); err != nil {
		fmt.Fprintln(os.Stderr, "child: launch:", err)
		return 2
	}
	fmt.Println(startedLine)
	var (
		wg     sync.WaitGroup
		failed atomic.Bool
		out    sync.Mutex
	)
	for _, run := range e.Runs {
		if role == roleStart && e.Stagger > 0 {
			time.Sleep(time.Duration(rand.Int64N(int64(e.Stagger) / int64(len(e.Runs)))))
		}
		h, err := w.agent.Start(w.dc, run)
		if err != nil {
			fmt.Fprintln(os.Stderr, "child: start:", err)
			return 2
		}
		out.Lock()
		fmt.Printf("%s%s\n", runLine, run.ID)
		out.Unlock()
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := h.GetResult(dbos.WithHandleTimeout(deadline))
			if err != nil {
				fmt.Fprintln(os.Stderr, "child: the run failed:", err)
				failed.Store(true)
				return
			}
			b, _ := json.Marshal(res)
			out.Lock()
			fmt.Printf("%s%s\n", resultLine, b)
			out.Unlock()
		}()
	}
	wg.Wait()
	if failed.Load() {
		return 1
	}
	return 0
}

// child is a running child process and the lines it printed.
type child struct {
	cmd   *exec.Cmd
	lines chan string
	done  chan struct{} // closed when the child ended
	err   error         // its exit, once done
}

// startChild starts the test binary in role with e.
func startChild(t *testing.T, role string, e env) *child {
	t.Helper()
	b, _ := json.Marshal(e)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envRole+"="+role, envConfig+"="+string(b))
	cmd.Stderr = &prefixWriter{t: t, prefix: role + ": "}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &child{cmd: cmd, lines: make(chan string, 64), done: make(chan struct{})}
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			if l := sc.Text(); strings.HasPrefix(l, killLine) || strings.HasPrefix(l, resultLine) || strings.HasPrefix(l, runLine) || l == startedLine {
				c.lines <- l
			}
		}
		_, _ = io.Copy(io.Discard, out)
		close(c.lines)
		c.err = cmd.Wait()
		close(c.done)
	}()
	t.Cleanup(func() { c.kill() })
	return c
}

// kill SIGKILLs the child and waits for it.
func (c *child) kill() {
	select {
	case <-c.done:
		return
	default:
	}
	_ = c.cmd.Process.Signal(syscall.SIGKILL)
	select {
	case <-c.done:
	case <-time.After(10 * time.Second):
	}
}

// line waits for the child's next line other than LAUNCHED and STARTED,
// or fails t.
func (c *child) line(t *testing.T) string {
	t.Helper()
	for {
		if l := c.line1(t); l != startedLine && !strings.HasPrefix(l, runLine) {
			return l
		}
	}
}

// killInFlight waits until the child started the k-th of its runs, and
// after d more SIGKILLs it: a moment while that run runs, whatever the
// machine's speed. It reports false, and kills nothing, when the child
// ended first.
func (c *child) killInFlight(t *testing.T, k int, d time.Duration) bool {
	t.Helper()
	for started := 0; started < k; {
		select {
		case l, ok := <-c.lines:
			if !ok {
				<-c.done
				return false
			}
			if strings.HasPrefix(l, runLine) {
				started++
			}
		case <-time.After(deadline):
			t.Fatalf("the child started %d of its runs in time, want %d", started, k)
		}
	}
	select {
	case <-c.done:
		return false
	case <-time.After(d):
		c.kill()
		return true
	}
}

// line1 waits for the child's next line, or fails t.
func (c *child) line1(t *testing.T) string {
	t.Helper()
	select {
	case l, ok := <-c.lines:
		if !ok {
			<-c.done
			t.Fatalf("the child ended without its line: %v", c.err)
		}
		return l
	case <-time.After(deadline):
		t.Fatal("the child said nothing in time")
	}
	return ""
}

// result waits for the child's RESULT line.
func (c *child) result(t *testing.T) durable.Result {
	t.Helper()
	l := c.line(t)
	js, ok := strings.CutPrefix(l, resultLine)
	if !ok {
		t.Fatalf("child: %q, want its result", l)
	}
	var r durable.Result
	if err := json.Unmarshal([]byte(js), &r); err != nil {
		t.Fatal(err)
	}
	return r
}

// timed is a run's result and when the test saw it.
type timed struct {
	durable.Result
	at time.Time
}

// results waits for n RESULT lines of the child, one a run.
func (c *child) results(t *testing.T, n int) []timed {
	t.Helper()
	var out []timed
	for range n {
		out = append(out, timed{c.result(t), time.Now()})
	}
	return out
}

// prefixWriter logs a child's standard error through t, until the test
// ends.
type prefixWriter struct {
	t      *testing.T
	prefix string
	done   atomic.Bool
}

func (w *prefixWriter) Write(p []byte) (int, error) {
	if os.Getenv("TGDBOS_TEST_VERBOSE") != "" {
		os.Stderr.Write(append([]byte(w.prefix), p...))
	}
	return len(p), nil
}
