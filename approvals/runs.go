package approvals

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/toolguard/toolguard/agentloop"
	"github.com/toolguard/toolguard/guard"
)

// ErrNothingToPark is returned by Park for a result that is not paused.
var ErrNothingToPark = errors.New("approvals: the run is not paused for approvals")

// Park keeps a paused run (agentloop.StatusPaused, with its State) until
// its requests are decided, and asks for each of its pending writes; the
// requests are returned in the order of res.Pending. A write whose intent
// a human of this tenant already denied in the run is denied at once,
// without asking again (contract section 4), with the reason saying so.
// When no request is left to a human, the run is ready at once. A Worker
// resumes it.
func (s *Queue) Park(ctx context.Context, res *agentloop.RunResult) ([]*Request, error) {
	if res == nil || res.Status != agentloop.StatusPaused || res.State == nil || len(res.State.Pending) == 0 {
		return nil, ErrNothingToPark
	}
	st := res.State
	p := st.Pending[0].Principal
	if err := p.Validate(); err != nil {
		return nil, err
	}
	clear, err := st.Marshal()
	if err != nil {
		return nil, err
	}
	// The state holds the conversation and the arguments the model wrote:
	// Redis gets it sealed (seal.go).
	state, err := s.seal(st.TenantID, st.RunID, clear)
	if err != nil {
		return nil, err
	}
	principal, err := json.Marshal(p)
	if err != nil {
		return nil, err
	}
	now := s.clock.Now()
	k := s.keys(st.TenantID)
	keys := []string{k.run(st.RunID), k.pending(), k.ready(), k.audit(), k.runs(), k.claims()}
	var denied []string
	argv := []any{ms(now), s.retain.Milliseconds(), st.RunID, state, string(principal)}
	reqs := make([]*Request, 0, len(st.Pending))
	for _, pr := range st.Pending {
		if pr.Principal.TenantID != st.TenantID || pr.Principal.SubjectID != st.SubjectID {
			return nil, errors.New("approvals: a pending request names another principal than its run")
		}
		r := s.newRequest(st.RunID, pr, now)
		args, err := requestArgs(r)
		if err != nil {
			return nil, err
		}
		reqs = append(reqs, r)
		keys = append(keys, k.req(r.ID))
		denied = append(denied, k.denied(r.OperationID))
		argv = append(argv, args...)
	}
	keys = append(keys, denied...)
	// The tenant is listed for workers before its run exists, so no
	// worker can miss a run; a worker that finds it listed with no runs
	// takes it off again (see unlist).
	if err := s.rdb.SAdd(ctx, s.tenants(), st.TenantID).Err(); err != nil {
		return nil, fmt.Errorf("approvals: park: %w", err)
	}
	if err := parkScript.Run(ctx, s.rdb, keys, argv...).Err(); err != nil {
		return nil, fmt.Errorf("approvals: park: %w", err)
	}
	for i, r := range reqs {
		if got, err := s.Get(ctx, st.TenantID, r.ID); err == nil {
			reqs[i] = got // denied at once, perhaps
		}
	}
	return reqs, nil
}

// Worker resumes parked runs once their requests are decided. Any number of
// workers, in any processes, may run on one store: each ready run is
// claimed by one of them, atomically. A claim is a lease: a run whose
// worker died (or took longer than Lease) is claimed again, and resumed
// again; the guard replays what already ran (operation ids derive from the
// run), so no write runs twice, though the model may be asked again.
type Worker struct {
	Queue *Queue
	// Loop resumes runs; its signer must be the one the runs' guard checks
	// grants with (agentloop's WithSigner, the same key in every process).
	Loop *agentloop.Loop
	// Principal returns the principal a run resumes for, given the one it
	// was parked with (e.g. to read its current roles from the host's
	// directory). Default: the parked principal.
	Principal func(ctx context.Context, parked guard.Principal) (guard.Principal, error)
	// Done is told about every resumed run: its result (paused again, and
	// parked again, or ended) or the error that stopped it, in which case
	// the run is left claimed and tried again when its lease ends.
	Done func(runID string, res *agentloop.RunResult, err error)
	// Poll is how often Run looks for ready runs; default 500ms.
	Poll time.Duration
	// Lease bounds how long one resume may hold its run; default 10
	// minutes.
	Lease time.Duration
}

// Run resumes ready runs until ctx ends, then returns ctx's error. Errors
// of single runs go to Done; store errors are retried at the next poll.
func (w *Worker) Run(ctx context.Context) error {
	poll := w.Poll
	if poll <= 0 {
		poll = 500 * time.Millisecond
	}
	t := time.NewTicker(poll)
	defer t.Stop()
	for {
		_, _ = w.Once(ctx)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// Once expires the requests nobody decided in time, then resumes every run
// that is ready now, and returns how many it resumed.
func (w *Worker) Once(ctx context.Context) (int, error) {
	s := w.Queue
	tenants, err := s.rdb.SMembers(ctx, s.tenants()).Result()
	if err != nil {
		return 0, fmt.Errorf("approvals: worker: %w", err)
	}
	n := 0
	var errs []error
	for _, t := range tenants {
		if err := s.expire(ctx, t); err != nil {
			errs = append(errs, err)
			continue
		}
		for ctx.Err() == nil {
			runID, err := s.claim(ctx, t, w.lease())
			if err != nil {
				errs = append(errs, err)
			}
			if runID == "" || err != nil {
				break
			}
			w.resume(ctx, t, runID)
			n++
		}
		if err := s.unlist(ctx, t); err != nil {
			errs = append(errs, err)
		}
	}
	return n, errors.Join(errs...)
}

func (w *Worker) lease() time.Duration {
	if w.Lease <= 0 {
		return 10 * time.Minute
	}
	return w.Lease
}

// expire settles the tenant's requests that nobody decided in time.
func (s *Queue) expire(ctx context.Context, tenant string) error {
	k := s.keys(tenant)
	ids, err := s.rdb.ZRangeArgs(ctx, redis.ZRangeArgs{Key: k.pending(), ByScore: true, Start: "-inf", Stop: ms(s.clock.Now())}).Result()
	if err != nil {
		return fmt.Errorf("approvals: expire: %w", err)
	}
	for _, id := range ids {
		r, err := s.Get(ctx, tenant, id)
		if errors.Is(err, ErrNotFound) {
			s.rdb.ZRem(ctx, k.pending(), id)
			continue
		}
		if err != nil {
			return err
		}
		if _, err := s.settle(ctx, r, StatusExpired, "", "", ""); err != nil && !errors.Is(err, ErrExpired) {
			var de *DecidedError
			if !errors.As(err, &de) {
				return err
			}
		}
	}
	return nil
}

// claim takes one ready run of the tenant, "" when none is.
func (s *Queue) claim(ctx context.Context, tenant string, lease time.Duration) (string, error) {
	k := s.keys(tenant)
	id, err := claimScript.Run(ctx, s.rdb, []string{k.ready(), k.claims()}, ms(s.clock.Now()), lease.Milliseconds()).Text()
	if errors.Is(err, redis.Nil) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("approvals: claim: %w", err)
	}
	return id, nil
}

// unlist takes a tenant without parked runs off the workers' list. A run
// parked meanwhile lists its tenant again after it exists, or is seen by
// the second count here, which lists the tenant back.
func (s *Queue) unlist(ctx context.Context, tenant string) error {
	k := s.keys(tenant)
	if n, err := s.rdb.SCard(ctx, k.runs()).Result(); err != nil || n > 0 {
		return err
	}
	if err := s.rdb.SRem(ctx, s.tenants(), tenant).Err(); err != nil {
		return err
	}
	if n, err := s.rdb.SCard(ctx, k.runs()).Result(); err != nil || n == 0 {
		return err
	}
	return s.rdb.SAdd(ctx, s.tenants(), tenant).Err()
}

// finish forgets a run that ended.
func (s *Queue) finish(ctx context.Context, tenant, runID string) error {
	k := s.keys(tenant)
	return finishScript.Run(ctx, s.rdb, []string{k.run(runID), k.runs(), k.claims()}, runID).Err()
}

// parked is a run as Park left it, with its requests as decided.
type parked struct {
	state     *agentloop.State
	principal guard.Principal
	requests  []*Request
}

func (s *Queue) parked(ctx context.Context, tenant, runID string) (*parked, error) {
	v, err := s.rdb.HGetAll(ctx, s.keys(tenant).run(runID)).Result()
	if err != nil {
		return nil, err
	}
	if v["state"] == "" {
		return nil, ErrNotFound
	}
	var p parked
	state, err := s.open(tenant, runID, v["state"])
	if err != nil {
		return nil, err
	}
	if p.state, err = agentloop.LoadState(state); err != nil {
		return nil, err
	}
	if p.state.TenantID != tenant || p.state.RunID != runID {
		return nil, fmt.Errorf("approvals: run %s: %w (it names another run)", runID, ErrSealed)
	}
	if err := json.Unmarshal([]byte(v["principal"]), &p.principal); err != nil {
		return nil, err
	}
	for _, id := range strings.Split(v["requests"], ",") {
		r, err := s.Get(ctx, tenant, id)
		if err != nil {
			return nil, err
		}
		p.requests = append(p.requests, r)
	}
	return &p, nil
}

// resume resumes one claimed run with the decisions of its requests.
func (w *Worker) resume(ctx context.Context, tenant, runID string) {
	res, err := w.resume1(ctx, tenant, runID)
	if w.Done != nil {
		w.Done(runID, res, err)
	}
}

func (w *Worker) resume1(ctx context.Context, tenant, runID string) (*agentloop.RunResult, error) {
	s := w.Queue
	p, err := s.parked(ctx, tenant, runID)
	if errors.Is(err, ErrNotFound) {
		// The run's record expired: nothing is left to resume.
		return nil, errors.Join(fmt.Errorf("approvals: run %s is gone", runID), s.finish(ctx, tenant, runID))
	}
	if err != nil {
		return nil, err
	}
	approvals, err := w.approvals(p)
	if err != nil {
		return nil, err
	}
	principal := p.principal
	if w.Principal != nil {
		if principal, err = w.Principal(ctx, p.principal); err != nil {
			return nil, err
		}
	}
	res, err := w.Loop.Resume(ctx, principal, p.state, approvals...)
	if err != nil {
		return res, err
	}
	if res.Status == agentloop.StatusPaused {
		_, err = s.Park(ctx, res)
		return res, err
	}
	return res, s.finish(ctx, tenant, runID)
}

// approvals turns the decisions into agentloop answers: a grant signed for
// each approval, naming who approved, and a denial for the rest (denied or
// expired).
func (w *Worker) approvals(p *parked) ([]agentloop.Approval, error) {
	byCall := map[string]*Request{}
	for _, r := range p.requests {
		byCall[r.CallID] = r
	}
	out := make([]agentloop.Approval, 0, len(p.state.Pending))
	for _, pr := range p.state.Pending {
		r := byCall[pr.CallID]
		switch {
		case r == nil:
			return nil, fmt.Errorf("approvals: run %s has no request for call %s", p.state.RunID, pr.CallID)
		case r.Status == StatusPending:
			return nil, fmt.Errorf("approvals: run %s was claimed with request %s undecided", p.state.RunID, r.ID)
		case r.Status == StatusApproved:
			tok, err := w.Loop.Grant(pr, r.DecidedBy)
			if err != nil {
				return nil, err
			}
			out = append(out, agentloop.Approval{CallID: pr.CallID, Grant: tok, Approver: r.DecidedBy})
		case r.Status == StatusExpired:
			out = append(out, agentloop.Approval{CallID: pr.CallID, Denied: true, Approver: "nobody (the request expired)",
				Reason: "nobody approved it in time", Expired: true})
		default:
			out = append(out, agentloop.Approval{CallID: pr.CallID, Denied: true, Approver: r.DecidedBy, Reason: r.Reason})
		}
	}
	return out, nil
}
