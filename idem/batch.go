package idem

import (
	"context"
	"errors"
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

// How many pipelines (or lone calls) one batcher has in flight at most: its
// limit, between minInFlight and half the client's pool size (the other
// half stays for the host's own commands on the same client). A call that
// finds that many busy waits in the queue and goes out with the next one
// sent: the fewer in flight, the larger the batches and the fewer the
// round trips. Where Redis is busy (on the same machine, under load),
// batches are what lower its CPU per call, and the limit stays at
// minInFlight; where Redis is far and idle, a call that waits for a slot
// waits for a round trip it did not need, and the limit rises.
//
// The rule (TCP Vegas's, for pipelines): each answered round trip is
// compared with the quickest one lately (the path's own time, pathTime).
// One that took at most grow times that found no queue, in Redis or in
// the client: the limit rises by one, if it held calls back. One that took
// more than shrink times that queued somewhere: it falls by one. Between
// the two it holds.
const (
	minInFlight = 4
	grow        = 2
	shrink      = 4
)

// pathWindow is how long the quickest round trip seen counts as the path's
// time: the least of this window's and the last one's, so that a path
// that became slower (a failover to a node further away) is learnt within
// two windows, while until then its round trips read as queued and the
// limit falls to minInFlight, where calls share round trips.
const pathWindow = 10 * time.Second

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
// one master of a cluster) and sends them as pipelines, at most limit at
// once. It has no timer: a call goes out as soon as a slot is free, with
// every call queued by then.
type batcher struct {
	rdb     redis.UniversalClient // pipelines go through it: on a cluster it follows MOVED and ASK
	ceiling int                   // the most the limit rises to: half the client's pool
	mu      sync.Mutex
	commits []*batchCall // queued commits, sent first
	queue   []*batchCall // the other queued calls
	busy    int          // slots taken: lone calls and workers sending pipelines
	limit   int          // slots at most now, from minInFlight to ceiling
	path    pathTime
}

// newBatcher returns the batcher of a server that rdb reaches.
func newBatcher(rdb redis.UniversalClient) *batcher {
	b := &batcher{}
	b.init(rdb)
	return b
}

func (b *batcher) init(rdb redis.UniversalClient) {
	b.rdb, b.ceiling, b.limit = rdb, minInFlight, minInFlight
	switch c := rdb.(type) {
	case *redis.Client:
		b.ceiling = max(c.Options().PoolSize/2, minInFlight)
	case *redis.ClusterClient:
		b.ceiling = max(c.Options().PoolSize/2, minInFlight) // each node's pool
	}
}

// free reports whether a slot is free. b.mu is held.
func (b *batcher) free() bool { return b.busy < b.limit }

// answered moves the limit by one round trip that took d and started at
// start, before its slot is freed: up if it took at most grow times the
// path's time and the limit holds calls back (every slot busy, or calls
// queued: a limit that holds nothing back has nothing to learn, as TCP's
// window grows only while it limits the sender), down if it took more
// than shrink times the path's time. b.mu is held.
func (b *batcher) answered(start time.Time, d time.Duration) {
	base := b.path.add(start, d)
	switch {
	case d <= grow*base:
		if b.busy >= b.limit || b.queued() > 0 {
			b.limit = min(b.limit+1, b.ceiling)
		}
	case d > shrink*base:
		b.limit = max(b.limit-1, minInFlight)
	}
}

// pathTime is the quickest round trip seen lately: the least of the
// current pathWindow's and the last one's.
type pathTime struct {
	since     time.Time     // the current window's start
	cur, last time.Duration // the least of each window; 0: none yet
}

// add counts a round trip that started at start and took d, and returns
// the path's time.
func (p *pathTime) add(start time.Time, d time.Duration) time.Duration {
	if start.Sub(p.since) >= pathWindow {
		p.since, p.last, p.cur = start, p.cur, 0
	}
	if p.cur == 0 || d < p.cur {
		p.cur = d
	}
	if p.last != 0 && p.last < p.cur {
		return p.last
	}
	return p.cur
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
	if b.free() && b.queued() == 0 {
		b.busy++
		b.mu.Unlock()
		start, ok := time.Now(), false
		defer func() { b.release(start, ok) }() // even if direct panics, so the slot is not lost
		reply, err = direct()
		ok = answered(err)
		return reply, false, err
	}
	c := new(batchCall)
	*c = call
	c.done = make(chan struct{})
	b.enqueue(c)
	if b.free() {
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

// answered reports whether err is a reply from the server (none, or a
// script's error), and not a timeout or a broken connection: only such a
// round trip says how long the path takes.
func answered(err error) bool {
	var rerr redis.Error
	return err == nil || errors.As(err, &rerr)
}

// release frees a lone call's slot, or hands it to a worker for the calls
// that queued meanwhile. ok says the call, started at start, was answered.
func (b *batcher) release(start time.Time, ok bool) {
	d := time.Since(start)
	b.mu.Lock()
	if ok {
		b.answered(start, d)
	}
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
		start := time.Now()
		ok := b.send(calls)
		d := time.Since(start)
		if ok {
			b.mu.Lock()
			b.answered(start, d)
			b.mu.Unlock()
		}
	}
}

// send sends the calls whose callers still wait as one pipeline, on a
// context of its own (batchContext), and answers each with its command's
// reply. A call whose context ended before it was sent is not sent. It
// reports whether the server answered the pipeline.
func (b *batcher) send(calls []*batchCall) bool {
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
		return false
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
	ok := true
	for i, c := range live {
		c.reply, c.err = scriptReply(cmds[i])
		ok = ok && answered(cmds[i].Err())
		close(c.done)
	}
	return ok
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
	bs := &batchers{rdb: rdb}
	bs.one.init(rdb)
	return bs
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
	b, _ := bs.nodes.LoadOrStore(addr, newBatcher(bs.rdb))
	return b.(*batcher)
}
