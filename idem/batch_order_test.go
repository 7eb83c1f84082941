package idem

import (
	"context"
	"testing"
	"time"
)

// TestBatchCommitsFirst: with every slot taken, calls queue; a commit goes
// ahead of the other calls queued before it (after the commits queued
// before it), and the commits and the other calls each keep their order. The next pipeline takes them
// in that order, at most maxBatch.
func TestBatchCommitsFirst(t *testing.T) {
	b := newBatcher(nil)
	b.busy = b.limit // every slot taken: each call queues, no worker starts
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	order := []*script{finishScript, reserveScript, commitScript, finishScript, commitScript, reserveScript, commitScript}
	var want []string
	for i, sc := range order {
		argv := []any{i}
		go func() { _, _, _ = b.do(batchCall{ctx: ctx, sc: sc, argv: argv}, nil) }()
		// One at a time, so that the queue's order is the calls' order.
		for deadline := time.Now().Add(30 * time.Second); ; {
			b.mu.Lock()
			n := b.queued()
			b.mu.Unlock()
			if n == i+1 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("call %d never queued", i)
			}
			time.Sleep(time.Millisecond)
		}
	}
	for _, commits := range []bool{true, false} {
		for i, o := range order {
			if (o == commitScript) == commits {
				want = append(want, o.name+"#"+string(rune('0'+i)))
			}
		}
	}
	b.mu.Lock()
	calls := b.take()
	left := b.queued()
	b.mu.Unlock()
	var got []string
	for _, c := range calls {
		got = append(got, c.sc.name+"#"+string(rune('0'+c.argv[0].(int))))
	}
	if len(got) != len(want) || left != 0 {
		t.Fatalf("the pipeline took %v, %d left; want %v", got, left, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("the pipeline took %v; want %v: commits first, each kind in its order", got, want)
		}
	}
}

// TestBatchTakeBounded: a pipeline takes at most maxBatch calls, commits
// first, and leaves the rest queued in order.
func TestBatchTakeBounded(t *testing.T) {
	b := &batcher{}
	for i := range maxBatch + 10 {
		sc := finishScript
		if i%3 == 0 {
			sc = commitScript
		}
		b.enqueue(&batchCall{sc: sc, argv: []any{i}})
	}
	first := b.take()
	if len(first) != maxBatch {
		t.Fatalf("took %d, want %d", len(first), maxBatch)
	}
	commits := (maxBatch + 10 + 2) / 3
	for i, c := range first {
		if (i < commits) != (c.sc == commitScript) {
			t.Fatalf("call %d of the pipeline is %s; want the %d commits first", i, c.sc.name, commits)
		}
	}
	rest := b.take()
	if len(rest) != 10 || b.queued() != 0 {
		t.Fatalf("then took %d, %d left; want 10, 0", len(rest), b.queued())
	}
	for i := 1; i < len(rest); i++ {
		if rest[i].argv[0].(int) < rest[i-1].argv[0].(int) {
			t.Fatalf("the rest out of order: %v then %v", rest[i-1].argv, rest[i].argv)
		}
	}
}

// TestBatchLimitRule: the limit rises by one for each round trip that took
// at most grow times the quickest one lately while the limit held calls
// back, up to the client's pool size; it holds when it held nothing back
// or the round trip took between grow and shrink times; it falls by one,
// to minInFlight at least, for each that took longer. The quickest round
// trip counts for two windows at most.
func TestBatchLimitRule(t *testing.T) {
	b := newBatcher(nil) // a client of no known pool: ceiling minInFlight
	b.ceiling = 6
	t0 := time.Unix(1000, 0)
	const path = 10 * time.Millisecond
	at := func(i int) time.Time { return t0.Add(time.Duration(i) * time.Millisecond) }
	if !b.free() {
		t.Fatal("a new batcher has no free slot")
	}

	// Nothing held back (one call at a time): no change, however quick.
	b.busy = 1
	for i := range 10 {
		b.answered(at(i), path)
	}
	if b.limit != minInFlight {
		t.Fatalf("limit %d after quick round trips that held nothing back; want %d", b.limit, minInFlight)
	}

	// Every slot busy, round trips at the path's time: up by one each,
	// to the ceiling and no further.
	for i := range 10 {
		b.busy = b.limit
		b.answered(at(10+i), path+path/2)
	}
	if b.limit != 6 {
		t.Fatalf("limit %d after quick round trips with every slot busy; want the ceiling, 6", b.limit)
	}

	// Calls queued count as held back too; between grow and shrink times
	// the path's time, the limit holds.
	b.limit, b.busy = 5, 1
	b.enqueue(&batchCall{sc: finishScript})
	b.answered(at(20), 3*path)
	if b.limit != 5 {
		t.Fatalf("limit %d after a round trip of 3 path times; want it held at 5", b.limit)
	}
	b.answered(at(21), path)
	if b.limit != 6 {
		t.Fatalf("limit %d after a quick round trip with calls queued; want 6", b.limit)
	}

	// Slow round trips (queued in Redis or the client): down by one each,
	// to minInFlight.
	for i := range 5 {
		b.answered(at(30+i), 5*path)
	}
	if b.limit != minInFlight {
		t.Fatalf("limit %d after slow round trips; want %d", b.limit, minInFlight)
	}

	// A path that became slower is learnt within two windows: then round
	// trips of its new time raise the limit again.
	later := t0.Add(2*pathWindow + time.Second)
	b.answered(later, 5*path) // the old quickest still counts: slow, stays at the floor
	if b.limit != minInFlight {
		t.Fatalf("limit %d; want %d while the last window's quickest round trip counts", b.limit, minInFlight)
	}
	b.answered(later.Add(pathWindow), 5*path) // the old one is two windows back: 5·path is the path now
	b.busy = minInFlight
	b.answered(later.Add(pathWindow+time.Millisecond), 5*path)
	if b.limit <= minInFlight {
		t.Fatalf("limit %d; want it rising once the slower path is learnt", b.limit)
	}
}
