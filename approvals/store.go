package approvals

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/redis/go-redis/v9"

	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/host"
	"github.com/toolguard/toolguard/internal/redisconn"
	"github.com/toolguard/toolguard/toolset"
)

// RequestStatus is where an approval request stands.
type RequestStatus string

// The request statuses.
const (
	StatusPending  RequestStatus = "pending"
	StatusApproved RequestStatus = "approved"
	StatusDenied   RequestStatus = "denied"
	StatusExpired  RequestStatus = "expired" // nobody decided before ExpiresAt
)

// Request is one write waiting for (or past) a human's decision.
type Request struct {
	ID       string `json:"id"`
	TenantID string `json:"tenant_id"`
	// RunID is the agent run that asked; empty when the host gave none.
	RunID  string `json:"run_id,omitempty"`
	CallID string `json:"call_id"`
	Tool   string `json:"tool"`
	// Description is the tool's description, as the model was given it
	// ("" when Options.Tools does not know the tool or it has none).
	Description string `json:"description,omitempty"`
	// Arguments are the canonical arguments, member by member, shown only
	// where the tool marks them safe to show.
	Arguments []Field `json:"arguments"`
	// Fingerprint is guard.Fingerprint of the tool and the whole canonical
	// arguments: the intent a grant is bound to.
	Fingerprint string `json:"fingerprint"`
	OperationID string `json:"operation_id"`
	// RequestedBy is the subject the agent acts for.
	RequestedBy string    `json:"requested_by"`
	CreatedAt   time.Time `json:"created_at"`
	ExpiresAt   time.Time `json:"expires_at"`

	Status    RequestStatus `json:"status"`
	DecidedBy string        `json:"decided_by,omitempty"`
	DecidedAt time.Time     `json:"decided_at,omitzero"`
	// Reason is what the model is told of a denial (the approver's
	// message for it), or why it was denied without a human.
	Reason string `json:"reason,omitempty"`
	// Note is the approver's internal note: for approvers and the audit
	// log, never told to the model.
	Note string `json:"note,omitempty"`
}

// Options configures a Queue.
type Options struct {
	// Prefix starts every key; default "toolguard:approvals:".
	Prefix string
	// Tools tells which argument members each tool marks safe to show
	// (guard.Tool's LoggedArguments). Without it, or for a tool it does not
	// know, every member is shown only as its fingerprint.
	Tools guard.Tools
	// TTL is how long a request waits for a decision; default 1 hour.
	TTL time.Duration
	// Retain is how long a request is kept after it expires, for the
	// record; default 7 days. Parked runs are kept as long after their
	// requests expire, and a denial is remembered for the run as long.
	Retain time.Duration
	// Clock tells the time; default guard.SystemClock.
	Clock guard.Clock
	// SecretKey is the host's secret key, the guard's (guard.Options.
	// SecretKey): it keys the placeholders of the secrets the inbox
	// withholds, and the key each parked run's state is sealed with is
	// derived from it (seal.go). Every process that parks or resumes runs
	// on one Redis needs the same key. Empty: a random key of this
	// Queue's, so only this Queue resumes the runs it parked.
	SecretKey []byte
	// Detector, the guard's (guard.Options.Detector), finds secrets in the
	// argument members a request shows: each is shown as its placeholder,
	// and no member that holds one has a fingerprint. Nil: only the
	// secrets the tool declares are withheld.
	Detector guard.Detector
}

// Queue keeps approval requests and parked runs in Redis. It is safe for
// concurrent use, by many processes.
type Queue struct {
	rdb    redis.UniversalClient
	prefix string
	tools  guard.Tools
	ttl    time.Duration
	retain time.Duration
	clock  guard.Clock
	// secretKey seals parked runs; redactor withholds the secrets the
	// detector finds in the requests' arguments.
	secretKey []byte
	redactor  *guard.Redactor
}

// NewStore returns a store on a Redis server or cluster. The client must
// have ContextTimeoutEnabled, so that calls honour their context's
// deadline.
func NewQueue(rdb redis.UniversalClient, opts Options) (*Queue, error) {
	if rdb == nil {
		return nil, errors.New("approvals: NewStore needs a Redis client")
	}
	if !redisconn.ContextTimeoutEnabled(rdb) {
		return nil, errors.New("approvals: the Redis client needs ContextTimeoutEnabled: true, so that calls honour their deadline")
	}
	s := &Queue{rdb: rdb, prefix: opts.Prefix, tools: opts.Tools, ttl: opts.TTL, retain: opts.Retain, clock: opts.Clock,
		secretKey: bytes.Clone(opts.SecretKey)}
	if len(s.secretKey) == 0 {
		s.secretKey = make([]byte, 32)
		_, _ = rand.Read(s.secretKey)
	}
	s.redactor = guard.NewRedactor(s.secretKey, opts.Detector)
	if s.prefix == "" {
		s.prefix = "toolguard:approvals:"
	}
	if s.ttl <= 0 {
		s.ttl = time.Hour
	}
	if s.retain <= 0 {
		s.retain = 7 * 24 * time.Hour
	}
	if s.clock == nil {
		s.clock = guard.SystemClock
	}
	return s, nil
}

func newID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return "apr_" + hex.EncodeToString(b[:])
}

// newRequest describes an agentloop request for approvers, at now.
func (s *Queue) newRequest(runID string, req host.ApprovalRequest, now time.Time) *Request {
	var (
		logged      []string
		secrets     []string
		description string
		props       map[string]any
	)
	if s.tools != nil {
		if t := s.tools.Lookup(req.Tool); t != nil {
			logged, secrets = t.Spec().LoggedArguments, t.Spec().SecretArguments
			// A toolset tool also says what it does and what each
			// argument means: what the model was told, shown to the
			// approver.
			if d, ok := t.(toolset.Declared); ok {
				description = d.Description()
				props, _ = d.Schema().Map()["properties"].(map[string]any)
			}
		}
	}
	fields := s.shownFields(req.Arguments, logged, secrets)
	for i := range fields {
		if p, ok := props[fields[i].Name].(map[string]any); ok {
			fields[i].Description, _ = p["description"].(string)
		}
	}
	return &Request{
		ID: newID(), TenantID: req.Principal.TenantID, RunID: runID, CallID: req.CallID, Tool: req.Tool, Description: description,
		Arguments: fields, Fingerprint: req.Fingerprint, OperationID: req.OperationID,
		RequestedBy: req.Principal.SubjectID, CreatedAt: now.UTC(), ExpiresAt: now.Add(s.ttl).UTC(), Status: StatusPending,
	}
}

func ms(t time.Time) string { return strconv.FormatInt(t.UnixMilli(), 10) }

// requestArgs are the script arguments describing one new request.
func requestArgs(r *Request) ([]any, error) {
	b, err := json.Marshal(r)
	if err != nil {
		return nil, err
	}
	return []any{r.ID, string(b), ms(r.ExpiresAt), r.OperationID, r.Tool, r.Fingerprint, r.RequestedBy, r.RunID}, nil
}

// Errors of Get and Decide.
var (
	// ErrNotFound: no such request in the tenant (or in any).
	ErrNotFound = errors.New("approvals: no such request")
	// ErrExpired: nobody decided the request before it expired.
	ErrExpired = errors.New("approvals: the request expired before anyone decided it")
	// ErrOwnRequest: the approver asked for it and may not approve it.
	ErrOwnRequest = errors.New("approvals: nobody approves their own request")
	// ErrNotApprover: the principal lacks the role that decides.
	ErrNotApprover = errors.New("approvals: you do not have the role that decides requests")
)

// DecidedError is returned by Decide for a request someone already
// decided.
type DecidedError struct {
	Status    RequestStatus
	DecidedBy string
	DecidedAt time.Time
}

// Error says who decided and when.
func (e *DecidedError) Error() string {
	return fmt.Sprintf("approvals: already %s by %s at %s", e.Status, e.DecidedBy, e.DecidedAt.UTC().Format(time.RFC3339))
}

// Ask stores a request for the agentloop request and returns it. runID may
// be empty. Use Park for a paused run; Ask serves hosts that wait inline
// (Waiter).
func (s *Queue) Ask(ctx context.Context, runID string, req host.ApprovalRequest) (*Request, error) {
	if err := req.Principal.Validate(); err != nil {
		return nil, err
	}
	now := s.clock.Now()
	r := s.newRequest(runID, req, now)
	args, err := requestArgs(r)
	if err != nil {
		return nil, err
	}
	k := s.keys(r.TenantID)
	argv := append([]any{ms(now), s.retain.Milliseconds()}, args...)
	if err := askScript.Run(ctx, s.rdb, []string{k.req(r.ID), k.pending(), k.audit()}, argv...).Err(); err != nil {
		return nil, fmt.Errorf("approvals: ask: %w", err)
	}
	return r, nil
}

// Denied reports whether a human denied the operation earlier (within the
// Retain period): the same intent in the same run, with agentloop's
// default keys.
func (s *Queue) Denied(ctx context.Context, tenantID, operationID string) (bool, error) {
	n, err := s.rdb.Exists(ctx, s.keys(tenantID).denied(operationID)).Result()
	return n == 1, err
}

// Get returns the tenant's request, ErrNotFound if the tenant has none
// with the id. A pending request past its expiry reads as expired.
func (s *Queue) Get(ctx context.Context, tenantID, id string) (*Request, error) {
	if !validRequestID(id) {
		return nil, ErrNotFound
	}
	v, err := s.rdb.HGetAll(ctx, s.keys(tenantID).req(id)).Result()
	if err != nil {
		return nil, fmt.Errorf("approvals: get: %w", err)
	}
	return s.decode(v)
}

func (s *Queue) decode(v map[string]string) (*Request, error) {
	if v["json"] == "" {
		return nil, ErrNotFound
	}
	var r Request
	if err := json.Unmarshal([]byte(v["json"]), &r); err != nil {
		return nil, fmt.Errorf("approvals: stored request: %w", err)
	}
	r.Status = RequestStatus(v["status"])
	r.DecidedBy, r.Reason, r.Note = v["by"], v["reason"], v["note"]
	if at, err := strconv.ParseInt(v["at"], 10, 64); err == nil && r.Status != StatusPending {
		r.DecidedAt = time.UnixMilli(at).UTC()
	}
	if r.Status == StatusPending && !s.clock.Now().Before(r.ExpiresAt) {
		r.Status = StatusExpired
	}
	return &r, nil
}

func validRequestID(id string) bool {
	if len(id) != 28 || id[:4] != "apr_" {
		return false
	}
	_, err := hex.DecodeString(id[4:])
	return err == nil
}

// Pending lists the tenant's requests waiting for a decision, oldest
// expiry first, at most limit (0: 100).
func (s *Queue) Pending(ctx context.Context, tenantID string, limit int) ([]*Request, error) {
	if limit <= 0 {
		limit = 100
	}
	k := s.keys(tenantID)
	ids, err := s.rdb.ZRangeArgs(ctx, redis.ZRangeArgs{Key: k.pending(), ByScore: true,
		Start: "(" + ms(s.clock.Now()), Stop: "+inf", Count: int64(limit)}).Result()
	if err != nil {
		return nil, fmt.Errorf("approvals: list: %w", err)
	}
	cmds := make([]*redis.MapStringStringCmd, len(ids))
	if len(ids) > 0 {
		_, err = s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i, id := range ids {
				cmds[i] = p.HGetAll(ctx, k.req(id))
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("approvals: list: %w", err)
		}
	}
	out := make([]*Request, 0, len(ids))
	for _, c := range cmds {
		r, err := s.decode(c.Val())
		if errors.Is(err, ErrNotFound) {
			continue // gone since the listing
		}
		if err != nil {
			return nil, err
		}
		if r.Status == StatusPending {
			out = append(out, r)
		}
	}
	return out, nil
}

// maxReasonBytes bounds a decision's reason.
const maxReasonBytes = 2000

// Decide records the approver's decision on the tenant's request, once:
// of two decisions at once, one is recorded and the other gets a
// *DecidedError naming it. A request past its expiry is refused with
// ErrExpired (and recorded as expired). The approver must be of the
// request's tenant (else ErrNotFound) and may not decide their own request
// unless selfApproval. Roles are the caller's to check (Inbox does). Of d,
// Approved, Reason and Note count (both optional, kept and audited; only
// the reason of a denial is ever told to the model); the approver is the
// principal given, and Approver and Expired are not read.
func (s *Queue) Decide(ctx context.Context, approver guard.Principal, id string, d host.Decision, selfApproval bool) (*Request, error) {
	r, err := s.Get(ctx, approver.TenantID, id)
	if err != nil {
		return nil, err
	}
	if r.RequestedBy == approver.SubjectID && !selfApproval {
		return nil, ErrOwnRequest
	}
	d.Reason, d.Note = truncate(d.Reason, maxReasonBytes), truncate(d.Note, maxReasonBytes)
	outcome := StatusDenied
	if d.Approved {
		outcome = StatusApproved
	}
	return s.settle(ctx, r, outcome, approver.SubjectID, d.Reason, d.Note)
}

// truncate cuts s to at most n bytes, at a character boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// settle runs the decide script for r.
func (s *Queue) settle(ctx context.Context, r *Request, outcome RequestStatus, by, reason, note string) (*Request, error) {
	k := s.keys(r.TenantID)
	now := s.clock.Now()
	res, err := decideScript.Run(ctx, s.rdb,
		[]string{k.req(r.ID), k.pending(), k.audit(), k.run(r.RunID), k.ready(), k.denied(r.OperationID)},
		r.ID, ms(now), string(outcome), by, reason, s.retain.Milliseconds(), r.RunID, r.Tool, r.Fingerprint, r.RequestedBy, note).StringSlice()
	if err != nil {
		return nil, fmt.Errorf("approvals: decide: %w", err)
	}
	switch res[0] {
	case "missing":
		return nil, ErrNotFound
	case "ok":
		r.Status, r.DecidedBy, r.DecidedAt, r.Reason, r.Note = outcome, by, now.UTC(), reason, note
		return r, nil
	case "expired":
		return nil, ErrExpired
	}
	at, _ := strconv.ParseInt(res[2], 10, 64)
	if RequestStatus(res[0]) == StatusExpired {
		return nil, ErrExpired
	}
	return nil, &DecidedError{Status: RequestStatus(res[0]), DecidedBy: res[1], DecidedAt: time.UnixMilli(at)}
}

// AuditRecord is one entry of a tenant's approvals audit stream.
type AuditRecord struct {
	ID string `json:"id"` // the stream entry id
	// Event is "requested", "approved", "denied", "expired" or
	// "denied_again" (an intent denied earlier in the run).
	Event       string `json:"event"`
	RequestID   string `json:"request_id"`
	RunID       string `json:"run_id,omitempty"`
	Tool        string `json:"tool"`
	Fingerprint string `json:"fingerprint"`
	RequestedBy string `json:"requested_by"`
	DecidedBy   string `json:"decided_by,omitempty"`
	Reason      string `json:"reason,omitempty"`
	// Note is the approver's internal note, never told to the model.
	Note string    `json:"note,omitempty"`
	At   time.Time `json:"at"`
}

// recent returns the tenant's latest n decisions (approved, denied,
// expired, denied again), newest first.
func (s *Queue) recent(ctx context.Context, tenantID string, n int) ([]AuditRecord, error) {
	msgs, err := s.rdb.XRevRangeN(ctx, s.keys(tenantID).audit(), "+", "-", int64(4*n)).Result()
	if err != nil {
		return nil, fmt.Errorf("approvals: audit: %w", err)
	}
	var out []AuditRecord
	for _, m := range msgs {
		r := auditRecord(m)
		if r.Event != "requested" && len(out) < n {
			out = append(out, r)
		}
	}
	return out, nil
}

// Audit returns the tenant's approvals audit records, oldest first: every
// request made and every decision, with who asked and who decided. The
// stream is the package's own (key "<prefix>{a<tenant>}:audit"), apart from
// the guard's hash-chained tool-audit-v2 log; it is kept until the host
// trims it.
func (s *Queue) Audit(ctx context.Context, tenantID string) ([]AuditRecord, error) {
	msgs, err := s.rdb.XRange(ctx, s.keys(tenantID).audit(), "-", "+").Result()
	if err != nil {
		return nil, fmt.Errorf("approvals: audit: %w", err)
	}
	out := make([]AuditRecord, 0, len(msgs))
	for _, m := range msgs {
		out = append(out, auditRecord(m))
	}
	return out, nil
}

func auditRecord(m redis.XMessage) AuditRecord {
	str := func(k string) string { v, _ := m.Values[k].(string); return v }
	at, _ := strconv.ParseInt(str("at"), 10, 64)
	return AuditRecord{ID: m.ID, Event: str("event"), RequestID: str("request"), RunID: str("run"),
		Tool: str("tool"), Fingerprint: str("fingerprint"), RequestedBy: str("requested_by"),
		DecidedBy: str("decided_by"), Reason: str("reason"), Note: str("note"), At: time.UnixMilli(at).UTC()}
}
