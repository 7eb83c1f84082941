package agentloop

import (
	"context"
	"sync"

	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/provider"
)

// In a Stream, a read whose arguments are complete is dispatched while the
// reply still streams (provider.Request.Ready), so its result is ready
// when the reply ends; its call and result events reach the transcript as
// they happen, before the reply's message. A write waits for the reply's
// end: a reply cut short (a token limit, a refusal) must not have run a
// write. When the reply then does not end normally, or does not carry the
// call after all, the read's result reaches no one: an EventUnanswered
// says so. Early reads are not counted against Options.Parallel (a
// reply's reads are few, and a bound shared with the calls that wait for
// them could only deadlock).

// early holds the reads of one streamed reply dispatched before it ended.
type early struct {
	ctx   context.Context
	r     *run
	turn  int // the turn of the streaming reply
	mu    sync.Mutex
	calls map[string]*earlyCall
	order []*earlyCall
	wg    sync.WaitGroup
}

type earlyCall struct {
	c     provider.ToolCall
	done  chan struct{}
	res   *guard.Result
	err   error
	taken bool
}

func newEarly(ctx context.Context, r *run) *early {
	return &early{ctx: ctx, r: r, turn: r.st.Turn + 1, calls: map[string]*earlyCall{}}
}

// ready is provider.Request.Ready: a read that needs no answer of its own
// is dispatched at once.
func (e *early) ready(responseID string, c provider.ToolCall) {
	t := e.r.l.tools.Lookup(c.Name)
	if c.Answer != nil || c.ID == "" || t == nil || t.Spec().Effect != guard.Read || e.r.isStatus(c) {
		return
	}
	e.mu.Lock()
	if _, ok := e.calls[c.ID]; ok {
		e.mu.Unlock()
		return
	}
	ec := &earlyCall{c: c, done: make(chan struct{})}
	e.calls[c.ID] = ec
	e.order = append(e.order, ec)
	e.mu.Unlock()
	e.r.emitTurn(e.turn, Event{Kind: EventCall, CallID: c.ID, Tool: c.Name, Arguments: c.Arguments})
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		defer close(ec.done)
		ec.res, ec.err = e.r.dispatch(e.ctx, responseID, c, "")
		if ec.err == nil {
			e.r.emitTurn(e.turn, Event{Kind: EventResult, CallID: c.ID, Tool: c.Name, Result: []byte(ec.res.String())})
		}
	}()
}

// take returns the early dispatch of the reply's call c, if there was one
// of this very call (id, tool and arguments); its events are emitted
// already.
func (e *early) take(c provider.ToolCall) *earlyCall {
	if e == nil || c.Answer != nil {
		return nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	ec := e.calls[c.ID]
	if ec == nil || ec.taken || ec.c.Name != c.Name || ec.c.Arguments != c.Arguments {
		return nil
	}
	ec.taken = true
	return ec
}

// settle waits for every early read and says of each the reply did not
// take that its result reaches no one, and why.
func (e *early) settle(why string) {
	if e == nil {
		return
	}
	e.wg.Wait()
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, ec := range e.order {
		if !ec.taken {
			ec.taken = true
			e.r.emit(Event{Kind: EventUnanswered, CallID: ec.c.ID, Tool: ec.c.Name, Text: why})
		}
	}
}
