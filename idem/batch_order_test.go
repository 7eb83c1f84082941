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
	b := &batcher{busy: maxInFlight} // every slot taken: each call queues, no worker starts
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
