package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/toolset"
)

// peer is the idempotency layer a Go team would write by hand instead of
// the guard, in the manner of AWS Powertools' Redis persistence layer. A
// call with an idempotency key goes
//
//	GET key                          a completed result: return it (a replay)
//	SET key in-progress NX PX lease  refused: another call is running it
//	run the tool
//	SET key result PX ttl
//
// three round trips for a fresh call and one for a replay. The layer wraps
// the dispatcher, so every call goes through it: a call without an
// idempotency key (a read) is keyed by its call id, which is what keeps a
// model's repeated call id from running twice, and what the guard does for
// every call. With reads false (toolbench -peer-reads=false), a read runs
// the tool with no round trip at all, as when a team wraps only its writes.
//
// It does none of what the guard does besides: no schema validation, no
// approval check, no call-id binding, no operation index, no audit record,
// no check that a replay carries the same arguments (Powertools' payload
// validation is off unless asked for). Its record is the tool's output as
// is, where Powertools' adds a status and expiry timestamps, so its bytes
// per stored call are a lower bound for that layer.
type peer struct {
	rdb        redis.UniversalClient
	prefix     string
	lease, ttl time.Duration
	reads      bool // wrap reads too, keyed by call id
	tools      map[string]peerTool
}

// peerTool runs one tool on its JSON arguments and returns its JSON output,
// the way a hand-written dispatcher calls a typed Go function.
type peerTool func(ctx context.Context, p guard.Principal, args []byte) ([]byte, error)

// typed makes a peerTool of the same typed function the guard's toolset
// runs: encoding/json in and out, nothing else.
func typed[In, Out any](fn toolset.Func[In, Out]) peerTool {
	return func(ctx context.Context, p guard.Principal, args []byte) ([]byte, error) {
		var in In
		if err := json.Unmarshal(args, &in); err != nil {
			return nil, err
		}
		out, err := fn(ctx, &guard.Invocation{Principal: p}, in)
		if err != nil {
			return nil, err
		}
		return json.Marshal(out)
	}
}

// peerInProgress is the value of a key whose call is running.
const peerInProgress = "in-progress"

// errPeerInProgress: another call holds the key's lease.
var errPeerInProgress = errors.New("peer: the key's call is in progress")

// key is the call's record: the tenant as a hash tag, like the guard's
// keys, so that a cluster spreads both alike, and the idempotency key, or
// else the call id.
func (p *peer) key(call guard.Call) string {
	if call.Context.IdempotencyKey == "" {
		return p.prefix + "{" + call.Principal.TenantID + "}:c:" + call.Context.CallID
	}
	return p.prefix + "{" + call.Principal.TenantID + "}:k:" + call.Context.IdempotencyKey
}

// Dispatch runs call's tool through the layer. replayed reports a stored result returned without
// running the tool.
func (p *peer) Dispatch(ctx context.Context, call guard.Call) (out []byte, replayed bool, err error) {
	tool, ok := p.tools[call.Proposal.Name]
	if !ok {
		return nil, false, fmt.Errorf("peer: no tool %q", call.Proposal.Name)
	}
	if call.Context.IdempotencyKey == "" && !p.reads {
		out, err := tool(ctx, call.Principal, call.Proposal.Arguments)
		return out, false, err
	}
	key := p.key(call)
	v, err := p.rdb.Get(ctx, key).Bytes()
	switch {
	case err == nil && string(v) == peerInProgress:
		return nil, false, errPeerInProgress
	case err == nil:
		return v, true, nil
	case !errors.Is(err, redis.Nil):
		return nil, false, err
	}
	if ok, err := p.rdb.SetNX(ctx, key, peerInProgress, p.lease).Result(); err != nil {
		return nil, false, err
	} else if !ok {
		return nil, false, errPeerInProgress
	}
	out, err = tool(ctx, call.Principal, call.Proposal.Arguments)
	if err != nil {
		// Powertools deletes the record of a failed call, so it can be retried.
		_ = p.rdb.Del(ctx, key).Err()
		return nil, false, err
	}
	return out, false, p.rdb.Set(ctx, key, out, p.ttl).Err()
}
