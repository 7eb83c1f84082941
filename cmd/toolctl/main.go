// Command toolctl is the operator's way out of writes whose outcome nobody
// knows: it lists a tenant's unknown and stuck operations, and resolves one
// by hand, audited with the operator's name; and out of an eviction: it
// reports what Redis took, and acknowledges it so that the stores work
// again. It works on the Redis store (idem) and on the Postgres store
// (pgstore): -store names the server, a redis:// URL or a comma-separated
// cluster list (with -prefix), or a postgres:// URL (with -schema); -redis
// is -store's older name.
//
//	toolctl list      [-store URL|ADDRS] [-prefix P | -schema S] -tenant T [-json]
//	toolctl resolve   [-store URL|ADDRS] [-prefix P | -schema S] -tenant T -subject S (-key K | -op OP)
//	                  -as committed -data JSON | -as not_started   -by OPERATOR [-force]
//	toolctl gaps      [-store URL|ADDRS] [-prefix P | -schema S] [-tenant T]
//	toolctl evictions [-store URL|ADDRS] [-prefix P]
//	toolctl ack       [-store URL|ADDRS] [-prefix P] -by OPERATOR [-window D]
//	toolctl retention -store postgres://… [-schema S]
//
// list prints the writes whose outcome is unknown (OUTCOME_UNKNOWN that no
// receipt settled) and those stuck in a reservation whose lease ran out
// (compared with this machine's clock), one a line; -json prints one JSON
// object a line instead.
//
// resolve settles one of them, named by its subject and its key as list
// prints it (-key) or its operation id (-op). -as committed stores -data
// (the write's result, JSON) as its committed result: a retry replays it
// and a status query answers it. -as not_started releases its key: a
// retry runs the write. Either is appended to the tenant's audit log first
// (action "resolve", the operator from -by, the outcome). A committed
// operation is never resolved; one whose lease has not run out only with
// -force, when its holder is known to be gone.
//
// gaps reports which tenants' audit chains have gaps, and since which
// sequence number: after the server evicted keys (idem.ErrEvicted), or lost
// them some other way. It verifies the chain of -tenant, or of every tenant
// whose audit log the server holds (found with SCAN), as guard.VerifyAudit does,
// and prints a line for each tenant: "gap" with the first sequence number
// that breaks and why, or "whole" with its record count. On Postgres it
// finds the tenants in the store's chain heads; "verify" is its other name.
//
// evictions reports what the server lost to evictions no operator has
// acknowledged (idem.Store.Evictions): a line per master ("server", its
// address, policy, evicted-key count and the most of those keys a store
// heard evicted), "unheard" when no store heard them all (then any tenant
// may have lost records: a store's next check writes back what it heard,
// if its marker went), a line per tenant that lost keys
// ("tenant", its id, the audit sequence ranges Redis took, "head lost" when
// its chain head went, "named" when a store heard one of its keys
// evicted), and on standard error whether an eviction waits for an
// acknowledgement. While one waits, every store refuses every call
// (UNAVAILABLE): check the named tenants' recent writes downstream first,
// then acknowledge.
//
// ack acknowledges it (idem.Store.AckEvictions), as -by, once every master
// is back to noeviction: it prints the same report, resets the masters'
// statistics (CONFIG RESETSTAT: evicted_keys counts from zero again),
// clears the marker, and marks the tenants that lost records (every
// tenant, when unheard) for -window (default 168h, idem's default TTL):
// there a write whose key has no record asks its tool's receipt before it
// runs. The stores accept the server at their next check.
//
// retention deletes, on Postgres, what the store's retention let go by now
// (pgstore.Store.Sweep: bindings, records, indexes and budget tokens past
// their TTL; audit logs are kept), and prints how many rows went. The store
// sweeps on its own (pgstore.Options.SweepEvery); this runs one by hand, or
// from cron where the store's own sweeps are off. Redis forgets by its TTLs,
// and Postgres evicts nothing: evictions and ack are Redis's.
//
// Exit status: 0 success (for gaps: no gap; for evictions: none waits), 1
// a resolution refused (already committed, in progress, not found, changed
// meanwhile), a chain with a gap, or an eviction that waits for an
// acknowledgement, 2 a usage or connection error (for ack: a master whose
// policy may still evict).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/idem"
	"github.com/toolguard/toolguard/internal/pgopen"
	"github.com/toolguard/toolguard/internal/redisconn"
	"github.com/toolguard/toolguard/pgstore"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr, time.Now))
}

const usage = `usage: toolctl list      [-store URL|ADDRS] [-prefix P | -schema S] -tenant T [-json]
       toolctl resolve   [-store URL|ADDRS] [-prefix P | -schema S] -tenant T -subject S (-key K | -op OP)
                         (-as committed -data JSON | -as not_started) -by OPERATOR [-force]
       toolctl gaps      [-store URL|ADDRS] [-prefix P | -schema S] [-tenant T]
       toolctl evictions [-store URL|ADDRS] [-prefix P]
       toolctl ack       [-store URL|ADDRS] [-prefix P] -by OPERATOR [-window D]
       toolctl retention -store postgres://… [-schema S]`

// run runs the command; now is the clock leases are compared with.
func run(args []string, stdout, stderr io.Writer, now func() time.Time) int {
	fail := func(msg string) int {
		fmt.Fprintln(stderr, "toolctl: "+msg)
		return 2
	}
	if len(args) == 0 || !slices.Contains([]string{"list", "resolve", "gaps", "verify", "evictions", "ack", "retention"}, args[0]) {
		fmt.Fprintln(stderr, usage)
		return fail("the first argument is list, resolve, gaps (verify), evictions, ack or retention")
	}
	cmd := args[0]
	if cmd == "verify" {
		cmd = "gaps"
	}
	fs := flag.NewFlagSet("toolctl "+cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	storeAddr := fs.String("store", "redis://127.0.0.1:6379/0", "the store's server: a redis:// URL, a comma-separated host:port list for a Redis Cluster, or a postgres:// URL")
	fs.StringVar(storeAddr, "redis", "redis://127.0.0.1:6379/0", "the same as -store (its older name)")
	prefix := fs.String("prefix", "tg:", "Redis: the store's key prefix (idem.Options.Prefix)")
	schema := fs.String("schema", "toolguard", "Postgres: the store's schema (pgstore.Options.Schema)")
	var tenant *string
	if cmd != "evictions" && cmd != "ack" && cmd != "retention" {
		tenant = fs.String("tenant", "", "the tenant id (required)")
	}
	var (
		asJSON                         *bool
		subject, key, op, as, data, by *string
		force                          *bool
		window                         *time.Duration
	)
	switch cmd {
	case "gaps", "evictions", "retention":
	case "ack":
		by = fs.String("by", "", "who acknowledges the eviction (required)")
		window = fs.Duration("window", idem.DefaultTTL, "how long the tenants that lost records ask receipts before a write whose key has no record runs")
	case "list":
		asJSON = fs.Bool("json", false, "print one JSON object a line")
	default:
		subject = fs.String("subject", "", "the subject whose operation it is (required)")
		key = fs.String("key", "", "the operation's idempotency key, as list prints it")
		op = fs.String("op", "", "the operation id (instead of -key)")
		as = fs.String("as", "", "committed (the write took place) or not_started (it did not)")
		data = fs.String("data", "", "with -as committed: the write's result, JSON")
		by = fs.String("by", "", "who resolves it, for the audit log (required)")
		force = fs.Bool("force", false, "resolve a reservation whose lease has not run out (its holder is known to be gone)")
	}
	fs.Usage = func() {
		fmt.Fprintln(stderr, usage)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	switch {
	case fs.NArg() > 0:
		return fail(fmt.Sprintf("unexpected arguments %q", fs.Args()))
	case tenant != nil && *tenant == "" && cmd != "gaps":
		return fail("-tenant is required")
	case cmd == "ack" && *by == "":
		return fail("-by is required: the acknowledgement names who made it")
	case cmd == "retention" && !pgopen.Is(*storeAddr):
		return fail("retention is for the Postgres store (-store postgres://…): Redis forgets by its TTLs")
	case (cmd == "evictions" || cmd == "ack") && pgopen.Is(*storeAddr):
		return fail(cmd + " is for the Redis store: Postgres evicts nothing")
	}
	var res guard.Resolution
	if cmd == "resolve" {
		res = guard.Resolution{TenantID: *tenant, SubjectID: *subject, IdempotencyKey: *key, OperationID: *op,
			Outcome: guard.Outcome(*as), Data: []byte(*data), Operator: *by, Force: *force}
		switch {
		case *subject == "":
			return fail("-subject is required")
		case (*key == "") == (*op == ""):
			return fail("name the operation with -key or -op (one of them)")
		case *by == "":
			return fail("-by is required: the audit log names who resolved the operation")
		case res.Outcome != guard.OutcomeCommitted && res.Outcome != guard.OutcomeNotStarted:
			return fail("-as is committed or not_started")
		case res.Outcome == guard.OutcomeCommitted && *data == "":
			return fail("-as committed needs -data: the write's result, JSON")
		case res.Outcome == guard.OutcomeNotStarted && *data != "":
			return fail("-as not_started takes no -data")
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var store operatorStore
	if pgopen.Is(*storeAddr) {
		pool, err := pgopen.Open(*storeAddr, 2)
		if err != nil {
			return fail("-store: " + err.Error())
		}
		defer pool.Close()
		s, err := pgstore.New(ctx, pool, pgstore.Options{Schema: *schema, SweepEvery: -1})
		if err != nil {
			return fail("-schema: " + err.Error())
		}
		if cmd == "retention" {
			n, err := s.Sweep(ctx, now())
			if err != nil {
				fmt.Fprintf(stderr, "toolctl: %v\n", err)
				return 2
			}
			fmt.Fprintf(stdout, "swept %d rows past their retention\n", n)
			return 0
		}
		store = s
	} else {
		rdb, err := redisconn.Open(*storeAddr, 0)
		if err != nil {
			return fail("-store: " + err.Error())
		}
		defer rdb.Close()
		s, err := idem.New(rdb, idem.Options{Prefix: *prefix})
		if err != nil {
			return fail("-prefix: " + err.Error())
		}
		switch cmd {
		case "evictions":
			return evictions(ctx, s, stdout, stderr)
		case "ack":
			return ack(ctx, s, *by, *window, now(), stdout, stderr)
		}
		store = s
	}
	switch cmd {
	case "list":
		return list(ctx, store, *tenant, now(), *asJSON, stdout, stderr)
	case "gaps":
		return gaps(ctx, store, *tenant, stdout, stderr)
	}
	res.Now = now()
	return resolve(ctx, store, res, stdout, stderr)
}

// operatorStore is what toolctl does with a store, Redis (*idem.Store) or
// Postgres (*pgstore.Store): both list and settle with guard's types.
type operatorStore interface {
	guard.AuditLog
	AuditTenants(ctx context.Context) ([]string, error)
	Unsettled(ctx context.Context, tenant string, now time.Time) ([]guard.Unsettled, error)
	Resolve(ctx context.Context, r guard.Resolution) (*guard.Result, error)
}

// unsettled lists the tenant's unsettled writes as toolctl prints them.
func unsettled(ctx context.Context, s operatorStore, tenant string, now time.Time) ([]listed, error) {
	us, err := s.Unsettled(ctx, tenant, now)
	out := make([]listed, 0, len(us))
	for _, u := range us {
		out = append(out, listed{State: string(u.State), Subject: u.SubjectID, OperationID: u.OperationID, Tool: u.Tool,
			IdempotencyKey: u.IdempotencyKey, CallID: u.CallID, Record: u.Record, lease: u.LeaseExpiry})
	}
	return out, err
}

// settle resolves one write; a resolution the store refused is a refusal.
func settle(ctx context.Context, s operatorStore, r guard.Resolution) (*guard.Result, error) {
	res, err := s.Resolve(ctx, r)
	switch {
	case errors.Is(err, guard.ErrAlreadyCommitted), errors.Is(err, guard.ErrLeaseActive),
		errors.Is(err, guard.ErrNoRecord), errors.Is(err, guard.ErrRecordChanged):
		return nil, refusal{err}
	}
	return res, err
}

// refusal is a resolution the store refused: exit status 1.
type refusal struct{ error }

func (r refusal) Unwrap() error { return r.error }

// listed is one line of list -json.
type listed struct {
	State          string    `json:"state"`
	Subject        string    `json:"subject"`
	OperationID    string    `json:"operation_id"`
	Tool           string    `json:"tool"`
	IdempotencyKey string    `json:"idempotency_key"`
	CallID         string    `json:"call_id"`
	LeaseExpired   string    `json:"lease_expired,omitempty"`
	Record         string    `json:"record,omitempty"` // Redis: the record's key
	lease          time.Time // when a stuck reservation's lease ran out
}

func list(ctx context.Context, s operatorStore, tenant string, now time.Time, asJSON bool, stdout, stderr io.Writer) int {
	us, err := unsettled(ctx, s, tenant, now)
	if err != nil {
		fmt.Fprintf(stderr, "toolctl: listing tenant %q: %v\n", tenant, err)
		return 2
	}
	tw := tabwriter.NewWriter(stdout, 2, 8, 2, ' ', 0)
	if !asJSON && len(us) > 0 {
		fmt.Fprintln(tw, "STATE\tSUBJECT\tOPERATION\tTOOL\tKEY\tCALL\tLEASE EXPIRED")
	}
	enc := json.NewEncoder(stdout)
	for _, l := range us {
		if !l.lease.IsZero() {
			l.LeaseExpired = l.lease.UTC().Format(time.RFC3339)
		}
		if asJSON {
			_ = enc.Encode(l)
			continue
		}
		lease := l.LeaseExpired
		if lease == "" {
			lease = "-"
		}
		fmt.Fprintf(tw, "%s\t%q\t%q\t%s\t%q\t%q\t%s\n", l.State, l.Subject, l.OperationID, l.Tool, l.IdempotencyKey, l.CallID, lease)
	}
	_ = tw.Flush()
	fmt.Fprintf(stderr, "toolctl: tenant %q: %d unsettled operations\n", tenant, len(us))
	return 0
}

func resolve(ctx context.Context, s operatorStore, r guard.Resolution, stdout, stderr io.Writer) int {
	res, err := settle(ctx, s, r)
	var refused refusal
	switch {
	case errors.Is(err, idem.ErrNotReplicated):
		fmt.Fprintf(stderr, "toolctl: warning: %v (the resolution was applied)\n", err)
	case errors.As(err, &refused):
		fmt.Fprintf(stderr, "toolctl: refused: %v\n", refused.error)
		return 1
	case err != nil:
		fmt.Fprintf(stderr, "toolctl: %v\n", err)
		return 2
	}
	name := fmt.Sprintf("key %q", r.IdempotencyKey)
	if r.IdempotencyKey == "" {
		name = fmt.Sprintf("operation %q", r.OperationID)
	}
	fmt.Fprintf(stdout, "resolved tenant %q subject %q %s as %s by %s: %s", r.TenantID, r.SubjectID, name, r.Outcome, r.Operator, res.Code)
	if len(res.Data) > 0 {
		fmt.Fprintf(stdout, " %s", res.Data)
	}
	fmt.Fprintln(stdout)
	return 0
}

// gaps verifies the audit chain of tenant, or of every tenant the server
// holds an audit log of, and prints a line for each.
func gaps(ctx context.Context, s operatorStore, tenant string, stdout, stderr io.Writer) int {
	tenants := []string{tenant}
	if tenant == "" {
		var err error
		if tenants, err = s.AuditTenants(ctx); err != nil {
			fmt.Fprintf(stderr, "toolctl: finding the tenants: %v\n", err)
			return 2
		}
	}
	broken := 0
	for _, t := range tenants {
		n, err := guard.VerifyAudit(ctx, s, t)
		var ce *guard.AuditChainError
		switch {
		case errors.As(err, &ce):
			broken++
			fmt.Fprintf(stdout, "gap\t%q\tsince sequence %d\t%s\n", t, ce.Seq, ce.Reason)
		case err != nil:
			fmt.Fprintf(stderr, "toolctl: tenant %q: %v\n", t, err)
			return 2
		default:
			fmt.Fprintf(stdout, "whole\t%q\t%d records\n", t, n)
		}
	}
	fmt.Fprintf(stderr, "toolctl: %d of %d tenants' audit chains have gaps\n", broken, len(tenants))
	if broken > 0 {
		return 1
	}
	return 0
}

// evictions prints what the server lost to evictions no operator has
// acknowledged.
func evictions(ctx context.Context, s *idem.Store, stdout, stderr io.Writer) int {
	r, err := s.Evictions(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "toolctl: reading the evictions: %v\n", err)
		return 2
	}
	printEvictions(r, stdout)
	if !r.Pending() {
		fmt.Fprintln(stderr, "toolctl: no eviction waits for an acknowledgement")
		return 0
	}
	fmt.Fprintf(stderr, "toolctl: an eviction waits for an acknowledgement (%d tenants lost keys); every store refuses every call until "+
		"toolctl ack: check the tenants' recent writes downstream first\n", len(r.Tenants))
	return 1
}

// ack acknowledges the evictions as by.
func ack(ctx context.Context, s *idem.Store, by string, window time.Duration, now time.Time, stdout, stderr io.Writer) int {
	r, err := s.AckEvictions(ctx, by, window, now)
	if err != nil {
		fmt.Fprintf(stderr, "toolctl: %v\n", err)
		return 2
	}
	printEvictions(r, stdout)
	fmt.Fprintf(stdout, "acknowledged\tby %s\tat %s\twrites of the tenants above ask receipts until %s\n", r.AckedBy,
		r.AckedAt.UTC().Format(time.RFC3339), r.AckedAt.Add(window).UTC().Format(time.RFC3339))
	fmt.Fprintf(stderr, "toolctl: acknowledged: %d tenants lost keys; the stores accept the server at their next check\n", len(r.Tenants))
	return 0
}

// printEvictions prints a report, a line per master and per tenant.
func printEvictions(r *idem.EvictionReport, w io.Writer) {
	for _, sv := range r.Servers {
		fmt.Fprintf(w, "server\t%s\t%s\tevicted_keys %d\theard %d\n", sv.Addr, sv.Policy, sv.EvictedKeys, sv.Heard)
	}
	if !r.Since.IsZero() {
		fmt.Fprintf(w, "noticed\t%s\n", r.Since.UTC().Format(time.RFC3339Nano))
	}
	if r.Unheard {
		fmt.Fprintln(w, "unheard\tno store heard every evicted key: any tenant may have lost records, and ack treats every tenant as one that did")
	}
	for _, t := range r.Tenants {
		var what []string
		if len(t.Lost) > 0 {
			ranges := make([]string, len(t.Lost))
			for i, sr := range t.Lost {
				ranges[i] = sr.String()
			}
			what = append(what, "lost "+strings.Join(ranges, ","))
		}
		if t.HeadLost {
			what = append(what, "head lost")
		}
		if t.Named {
			what = append(what, "named")
		}
		fmt.Fprintf(w, "tenant\t%q\t%s\n", t.TenantID, strings.Join(what, "\t"))
	}
}
