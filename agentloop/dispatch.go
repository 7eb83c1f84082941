package agentloop

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/host"
	"github.com/toolguard/toolguard/provider"
)

// A reply's calls run at once, up to Options.Parallel, so that a turn
// takes as long as its slowest tool, not their sum; what was per call
// stays per call:
//
//   - Results go back, and each call's events reach the transcript (and
//     Observer, and Stream), in the provider's order: a call's events are
//     held until the calls before it have finished, then follow in order.
//   - Calls of one operation (a write's repeated intent) run one after
//     another, so the repeat replays the first instead of finding it in
//     progress; a repeated call id is answered once.
//   - The Approver is asked for one call at a time, once every call
//     before it has finished (a terminal asks one question at a time,
//     after the transcript up to it); a run pauses for approval after
//     every other call of the reply has finished.
//   - After a host error (a store the guard cannot reach, a bad
//     principal), no further call starts; those running finish.

// slot is one call of a reply being handled.
type slot struct {
	c provider.ToolCall
	// dup marks a repeated call id: answered once, by the first.
	dup bool
	// after is closed when the earlier call of the same operation has
	// finished (nil: there is none).
	after <-chan struct{}
	done  chan struct{}

	// early is the call's dispatch while the reply streamed, if any.
	early *earlyCall

	cs      CallState
	pending *host.ApprovalRequest
	err     error
}

// handleCalls dispatches the calls of one reply and records their answers
// in st.Calls, in the provider's order; writes waiting for approval are
// left in st.Pending, in order.
func (r *run) handleCalls(ctx context.Context, respID string, calls []provider.ToolCall, ahead *early) error {
	st := r.st
	st.Calls = st.Calls[:0]
	slots := make([]*slot, len(calls))
	seen := map[string]bool{}
	latest := map[string]*slot{} // operation id -> its latest call
	for i, c := range calls {
		s := &slot{c: c, dup: seen[c.ID], done: make(chan struct{})}
		seen[c.ID] = true
		if !s.dup {
			s.early = ahead.take(c)
		}
		if !s.dup && c.Answer == nil && !r.isStatus(c) {
			id := r.l.operation(st.RunID, c).id
			if prev := latest[id]; prev != nil {
				s.after = prev.done
			}
			latest[id] = s
		}
		slots[i] = s
	}
	o := newOrdered(len(calls), r.emit)
	sem := make(chan struct{}, r.l.parallel)
	var (
		wg     sync.WaitGroup
		failed atomic.Bool
	)
	for i, s := range slots {
		// A read dispatched early holds no place: it only waits.
		if s.early == nil {
			sem <- struct{}{}
		}
		if failed.Load() || ctx.Err() != nil {
			if s.early == nil {
				<-sem
			}
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if s.early == nil {
				defer func() { <-sem }()
			}
			if r.handle(ctx, respID, i, s, o); s.err != nil {
				failed.Store(true)
			}
		}()
	}
	wg.Wait()
	for _, s := range slots {
		if s.err != nil {
			return s.err
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	for _, s := range slots {
		if s.dup {
			continue
		}
		if s.pending != nil {
			st.Pending = append(st.Pending, *s.pending)
		}
		st.Calls = append(st.Calls, s.cs)
	}
	return nil
}

func (r *run) isStatus(c provider.ToolCall) bool {
	return r.l.statusTool != "" && c.Name == r.l.statusTool
}

// handle runs call i of the reply: its events go through o, in order.
func (r *run) handle(ctx context.Context, respID string, i int, s *slot, o *ordered) {
	defer o.finish(i)
	defer close(s.done)
	c := s.c
	if ec := s.early; ec != nil {
		// Dispatched while the reply streamed; its events are out.
		<-ec.done
		s.cs = CallState{CallID: c.ID, Name: c.Name, Arguments: c.Arguments, Kind: c.Kind, ResponseID: respID}
		if s.err = ec.err; s.err == nil {
			s.cs.Output = ec.res.String()
		}
		return
	}
	emit := func(e Event) { o.emit(i, e) }
	emit(Event{Kind: EventCall, CallID: c.ID, Tool: c.Name, Arguments: c.Arguments})
	if s.dup {
		// One output per call id: a repeated id is answered once.
		return
	}
	if s.after != nil {
		<-s.after
	}
	s.cs = CallState{CallID: c.ID, Name: c.Name, Arguments: c.Arguments, Kind: c.Kind, ResponseID: respID}
	var res *guard.Result
	switch {
	case c.Answer != nil:
		res = c.Answer
	case r.isStatus(c):
		res = r.l.status(ctx, r.p, r.unknown, r.l.info.Context(respID, c.ID), c.Arguments)
	default:
		var err error
		if res, err = r.dispatch(ctx, respID, c, ""); err != nil {
			s.err = err
			return
		}
		if res.Code == guard.CodeApprovalRequired {
			o.waitHead(i)
			if res, s.pending, err = r.approve(ctx, respID, c, emit); err != nil {
				s.err = err
				return
			}
			if s.pending != nil {
				return
			}
		}
	}
	emit(Event{Kind: EventResult, CallID: c.ID, Tool: c.Name, Result: []byte(res.String())})
	s.cs.Output = res.String()
}

// unknown is st.unknown under the run's lock.
func (r *run) unknown(id string) (unknownOperation, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.st.unknown(id)
}

// ordered passes the events of a reply's calls on in the calls' order:
// the head (the first call not finished) emits at once, the others into
// a buffer that follows when every call before them has finished.
type ordered struct {
	mu   sync.Mutex
	cond *sync.Cond
	head int
	bufs [][]Event
	done []bool
	out  func(Event)
}

func newOrdered(n int, out func(Event)) *ordered {
	o := &ordered{bufs: make([][]Event, n), done: make([]bool, n), out: out}
	o.cond = sync.NewCond(&o.mu)
	return o
}

func (o *ordered) emit(i int, e Event) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if i == o.head {
		o.out(e)
		return
	}
	o.bufs[i] = append(o.bufs[i], e)
}

// finish marks call i finished and passes on what follows in order.
func (o *ordered) finish(i int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.done[i] = true
	for o.head < len(o.done) && o.done[o.head] {
		o.head++
		if o.head < len(o.bufs) {
			for _, e := range o.bufs[o.head] {
				o.out(e)
			}
			o.bufs[o.head] = nil
		}
	}
	o.cond.Broadcast()
}

// waitHead waits until every call before i has finished. The calls before
// i were started before it and finish whatever i does, so it returns.
func (o *ordered) waitHead(i int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for o.head != i {
		o.cond.Wait()
	}
}
