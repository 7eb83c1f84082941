package idem

import (
	"context"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Auto-pipelining: script calls that concurrent callers make at the same
// time go to Redis together, as one go-redis pipeline, so that the server
// reads, runs and answers many of them per read and write instead of one.
// Under load most of Redis's CPU per call is the round trip itself
// (syscalls, event loop, loopback TCP), not the script, so this is what
// lowers it. A caller that is alone sees no change: its call goes out at
// once, by itself, on its own context, as without batching.

// maxInFlight is how many pipelines (or lone calls) one batcher has in
// flight at most. A call that finds them all busy waits in the queue and
// goes out with the next one sent: the fewer in flight, the larger the
// batches and the fewer the round trips; more than one, so that a batch is
// never held up behind another's round trip for long.
const maxInFlight = 4

// maxBatch bounds the calls in one pipeline, so that one batch's reply
// stays a bounded read.
const maxBatch = 128

// Commits go first: a queued Commit goes out ahead of every other queued
// call (after the commits queued before it), since it finishes a write
// that has run, while any other call starts a dispatch. A fresh write
// waits in the queue twice, for its Reserve and its Commit; this halves
// what the second wait can be under load, and shortens the time in which
// a write has run but its outcome is not stored. It changes neither the
// calls sent nor how many go in a round trip, only their order, and only
// among calls that are pending at once: none of them has been answered,
// so any order is one they could have run in.

// batchCall is one script call waiting in a batcher's queue, and, once its
// batch is answered, its reply.
type batchCall struct {
	ctx   context.Context // the caller's: its deadline counts toward the batch's
	sc    *script
	keys  []string
	argv  []any
	fcall bool // sent as FCALL of the library's function; else EVALSHA

	reply []string
	err   error
	done  chan struct{} // closed once reply and err are set
}

// cmd adds the call to a pipeline.
func (c *batchCall) cmd(ctx context.Context, p redis.Pipeliner) *redis.Cmd {
	if c.fcall {
		return p.FCall(ctx, lib.fn(c.sc), c.keys, c.argv...)
	}
	return c.sc.eval.EvalSha(ctx, p, c.keys, c.argv...)
}

// batcher gathers the calls bound for one server (a standalone server, or
// one master of a cluster) and sends them as pipelines, at most
// maxInFlight at once. It has no timer: a call goes out as soon as a slot
// is free, with every call queued by then.
type batcher struct {
	rdb     redis.UniversalClient // pipelines go through it: on a cluster it follows MOVED and ASK
	mu      sync.Mutex
	commits []*batchCall // queued commits, sent first
	queue   []*batchCall // the other queued calls
	busy    int          // slots taken: lone calls and workers sending pipelines
}

// queued is the number of calls waiting. b.mu is held.
func (b *batcher) queued() int { return len(b.commits) + len(b.queue) }

// enqueue queues c: a commit after the commits queued, any other call
// after every call queued. b.mu is held.
func (b *batcher) enqueue(c *batchCall) {
	if c.sc == commitScript {
		b.commits = append(b.commits, c)
	} else {
		b.queue = append(b.queue, c)
	}
}

// take dequeues the next pipeline's calls: up to maxBatch, commits first.
// b.mu is held.
func (b *batcher) take() []*batchCall {
	n := min(b.queued(), maxBatch)
	if n == 0 {
		return nil
	}
	calls := make([]*batchCall, 0, n)
	for _, q := range []*[]*batchCall{&b.commits, &b.queue} {
		k := min(len(*q), n-len(calls))
		calls = append(calls, (*q)[:k]...)
		rest := copy(*q, (*q)[k:])
		clear((*q)[rest:])
		*q = (*q)[:rest]
	}
	return calls
}

// do runs the call, alone and at once on the caller's context when a slot
// is free and no call is queued (direct), or else in the next pipeline a
// worker sends. It returns when the call is answered or when ctx ends,
// whichever is first; a call whose context ends may or may not have run,
// as with any go-redis call that times out. A call in a pipeline (piped)
// is answered with the reply of its own command: an error of one call
// (such as NOSCRIPT) is that call's alone, for the caller to act on.
// The call is copied to the heap only when it queues: a lone call costs no
// allocation.
func (b *batcher) do(call batchCall, direct func() ([]string, error)) (reply []string, piped bool, err error) {
	b.mu.Lock()
	if b.busy < maxInFlight && b.queued() == 0 {
		b.busy++
		b.mu.Unlock()
		defer b.release() // even if direct panics, so the slot is not lost
		reply, err = direct()
		return reply, false, err
	}
	c := new(batchCall)
	*c = call
	c.done = make(chan struct{})
	b.enqueue(c)
	if b.busy < maxInFlight {
		b.busy++
		go b.work()
	}
	b.mu.Unlock()
	select {
	case <-c.done:
		return c.reply, true, c.err
	case <-c.ctx.Done():
		return nil, true, c.ctx.Err()
	}
}

// release frees a lone call's slot, or hands it to a worker for the calls
// that queued meanwhile.
func (b *batcher) release() {
	b.mu.Lock()
	if b.queued() > 0 {
		go b.work()
	} else {
		b.busy--
	}
	b.mu.Unlock()
}

// work sends the queued calls as pipelines, one after the other, commits
// first, until the queue is empty, and then frees its slot.
func (b *batcher) work() {
	for {
		b.mu.Lock()
		calls := b.take()
		if len(calls) == 0 {
			b.busy--
			b.mu.Unlock()
			return
		}
		b.mu.Unlock()
		b.send(calls)
	}
}

// send sends the calls whose callers still wait as one pipeline, on a
// context of its own (batchContext), and answers each with its command's
// reply. A call whose context ended before it was sent is not sent.
func (b *batcher) send(calls []*batchCall) {
	live := calls[:0]
	for _, c := range calls {
		if err := c.ctx.Err(); err != nil {
			c.err = err
			close(c.done)
			continue
		}
		live = append(live, c)
	}
	if len(live) == 0 {
		return
	}
	ctx, cancel := batchContext(live)
	defer cancel()
	cmds := make([]*redis.Cmd, len(live))
	_, _ = b.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, c := range live {
			cmds[i] = c.cmd(ctx, p)
		}
		return nil
	})
	for i, c := range live {
		c.reply, c.err = scriptReply(cmds[i])
		close(c.done)
	}
}

// batchContext returns the context a batch is sent on: no caller's, so
// that one caller's deadline or cancellation neither cuts the batch short
// nor holds it up. Its deadline is the latest of the calls' deadlines, or
// none (the client's read and write timeouts then bound it) when a call
// has none. It carries no caller's values.
func batchContext(calls []*batchCall) (context.Context, context.CancelFunc) {
	var latest time.Time
	for _, c := range calls {
		d, ok := c.ctx.Deadline()
		if !ok {
			return context.Background(), func() {}
		}
		if d.After(latest) {
			latest = d
		}
	}
	return context.WithDeadline(context.Background(), latest)
}

// batchers holds the store's batchers: one for a standalone server, or one
// per master of a cluster, so that a batch goes to one node and a slow node
// holds up only the calls bound for it. A cluster's batchers are keyed by
// the master's address, found from the client's slot map; one that stops
// being a master keeps its (empty) batcher.
type batchers struct {
	rdb   redis.UniversalClient
	one   batcher
	nodes sync.Map // a cluster master's address -> *batcher
}

// newBatchers returns the batchers of a client.
func newBatchers(rdb redis.UniversalClient) *batchers {
	return &batchers{rdb: rdb, one: batcher{rdb: rdb}}
}

// of returns the batcher of the server that holds key, or nil for a client
// the store does not batch on: one other than a *redis.Client or
// *redis.ClusterClient, or a cluster whose slot map cannot be read (the
// call then goes alone and reports why).
func (bs *batchers) of(ctx context.Context, key string) *batcher {
	node, err := masterOf(ctx, bs.rdb, key)
	switch {
	case err != nil:
		return nil
	case node == bs.rdb:
		return &bs.one
	}
	addr := node.Options().Addr
	if b, ok := bs.nodes.Load(addr); ok {
		return b.(*batcher)
	}
	b, _ := bs.nodes.LoadOrStore(addr, &batcher{rdb: bs.rdb})
	return b.(*batcher)
}
