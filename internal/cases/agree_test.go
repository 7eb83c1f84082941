package cases_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/idem"
	"github.com/toolguard/toolguard/internal/canon"
	"github.com/toolguard/toolguard/internal/cases"
	"github.com/toolguard/toolguard/internal/orders"
	"github.com/toolguard/toolguard/internal/pgtest"
	"github.com/toolguard/toolguard/internal/redistest"
	"github.com/toolguard/toolguard/pgstore"
)

// EnvAgreeCases sets how many random cases TestStoresAgree runs (default
// 150), and EnvAgreeSeed its seed (default: a new one, logged).
const (
	EnvAgreeCases = "TOOLGUARD_AGREE_CASES"
	EnvAgreeSeed  = "TOOLGUARD_AGREE_SEED"
)

// TestStoresAgree runs random cases, sequences of dispatches and status
// queries no one chose, on every store, each case in a fresh world of
// each: guard.MemStore, the reference, and idem on miniredis, on real
// Redis and on a real Redis Cluster (when TOOLGUARD_REDIS_URL and
// TOOLGUARD_REDIS_CLUSTER name them), and pgstore (on Postgres, a schema
// a case; the first 60 cases unless EnvAgreeCases is set). The ids,
// keys, arguments, grants, faults and times of a case come from small
// pools, so that steps collide: the same call id with other arguments,
// a key reused for another intent, a grant presented twice, a status
// query of an operation that failed before it ran. Every store must
// answer every step with the reference's model result, the same side
// effects, and the same audit record (sequence number, code, delivery,
// side effect, and body but for the grant's id, which each run mints
// anew), or, where the reference refused the call as a host error, the
// same error. The case file runner's own checks hold too: one audit
// record a step, and a chain that verifies.
func TestStoresAgree(t *testing.T) {
	n := 150
	if v := os.Getenv(EnvAgreeCases); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			t.Fatalf("%s=%q: want a number of cases", EnvAgreeCases, v)
		}
	}
	seed := rand.Uint64()
	if v := os.Getenv(EnvAgreeSeed); v != "" {
		var err error
		if seed, err = strconv.ParseUint(v, 10, 64); err != nil {
			t.Fatalf("%s=%q: want a number", EnvAgreeSeed, v)
		}
	}
	t.Logf("%d cases; seed %d (%s=%d replays them)", n, seed, EnvAgreeSeed, seed)
	rng := rand.New(rand.NewPCG(seed, seed))
	random := make([]*cases.Case, n)
	for i := range random {
		random[i] = randomCase(rng, i)
	}

	ctx := context.Background()
	refs := make([]*cases.CaseReport, n)
	var steps, hostErrors int
	codes := map[string]int{}
	for i, c := range random {
		refs[i] = cases.Run(ctx, c, cases.World{Store: guard.NewMemStore(guard.MemStoreOptions{})})
		steps += len(refs[i].Steps)
		for _, s := range refs[i].Steps {
			var r struct{ Code string }
			_ = json.Unmarshal(s.Result, &r)
			codes[r.Code]++
		}
		if err := refs[i].Err; err != nil {
			if !strings.HasPrefix(err.Error(), "step ") {
				t.Fatalf("case %s on the reference: %v", c.ID, err)
			}
			hostErrors++
		}
	}
	t.Logf("%d cases, %d steps on the reference; %d cases ended in a host error; codes %v", n, steps, hostErrors, codes)

	// Each store opens its backend in its subtest: one the machine lacks
	// skips there, and the others still run.
	// pgstore makes a schema a case (about 0.2 s here): by default it runs
	// the first 60 cases, and all of them when EnvAgreeCases is set.
	pgCases := min(n, 60)
	if os.Getenv(EnvAgreeCases) != "" {
		pgCases = n
	}
	stores := []struct {
		name  string
		cases int
		open  func(t *testing.T) func(t *testing.T, i int) guard.AuditStore
	}{
		{"idem-miniredis", n, func(t *testing.T) func(*testing.T, int) guard.AuditStore {
			_, rdb := redistest.Mini(t)
			return func(t *testing.T, i int) guard.AuditStore { return idemStore(t, rdb, i) }
		}},
		{"idem-redis", n, func(t *testing.T) func(*testing.T, int) guard.AuditStore {
			rdb := redistest.Standalone(t)
			return func(t *testing.T, i int) guard.AuditStore { return idemStore(t, rdb, i) }
		}},
		{"idem-cluster", n, func(t *testing.T) func(*testing.T, int) guard.AuditStore {
			rdb := redistest.Cluster(t)
			return func(t *testing.T, i int) guard.AuditStore { return idemStore(t, rdb, i) }
		}},
		{"pgstore", pgCases, func(t *testing.T) func(*testing.T, int) guard.AuditStore {
			pool := pgtest.Pool(t, pgtest.NewDB(t), 4)
			return func(t *testing.T, i int) guard.AuditStore {
				s, err := pgstore.New(ctx, pool, pgstore.Options{Schema: fmt.Sprintf("agree_%d", i)})
				if err != nil {
					t.Fatal(err)
				}
				return s
			}
		}},
	}
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			open := st.open(t)
			disagreements := 0
			for i, c := range random[:st.cases] {
				got := cases.Run(ctx, c, cases.World{Store: open(t, i)})
				if diff := disagree(refs[i], got); diff != "" {
					disagreements++
					t.Errorf("case %s: %s disagrees with guard.MemStore: %s\nthe case (seed %d):\n%s", c.ID, st.name, diff, seed, describe(c, refs[i]))
					if disagreements == 3 {
						t.Fatalf("%s: stopping at 3 disagreements", st.name)
					}
				}
			}
		})
	}
}

// idemStore is a Redis store under a prefix of case i's own.
func idemStore(t *testing.T, rdb redis.UniversalClient, i int) guard.AuditStore {
	s, err := idem.New(rdb, idem.Options{Prefix: fmt.Sprintf("%sagree%d:", redistest.Prefix(t), i)})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// disagree says how got differs from ref, step by step, or "".
func disagree(ref, got *cases.CaseReport) string {
	errText := func(r *cases.CaseReport) string {
		if r.Err == nil {
			return ""
		}
		return r.Err.Error()
	}
	if errText(ref) != errText(got) {
		return fmt.Sprintf("the case ended in %q, the reference's in %q", errText(got), errText(ref))
	}
	if len(ref.Steps) != len(got.Steps) {
		return fmt.Sprintf("%d steps ran, the reference's %d", len(got.Steps), len(ref.Steps))
	}
	for i, r := range ref.Steps {
		g := got.Steps[i]
		if a, b := canonical(g.Result), canonical(r.Result); a != b {
			return fmt.Sprintf("step %s answered %s, the reference %s", r.StepID, a, b)
		}
		if g.SideEffects != r.SideEffects {
			return fmt.Sprintf("step %s left %d side effects, the reference %d", r.StepID, g.SideEffects, r.SideEffects)
		}
		if fmt.Sprint(g.Mismatch) != fmt.Sprint(r.Mismatch) {
			return fmt.Sprintf("step %s: %v, the reference %v", r.StepID, g.Mismatch, r.Mismatch)
		}
		if len(g.Audit) != len(r.Audit) {
			return fmt.Sprintf("step %s wrote %d audit records, the reference %d", r.StepID, len(g.Audit), len(r.Audit))
		}
		for j := range r.Audit {
			ga, ra := g.Audit[j], r.Audit[j]
			if ga.Seq != ra.Seq || ga.Code != ra.Code || ga.Delivery != ra.Delivery || ga.SideEffect != ra.SideEffect ||
				withoutGrantID(ga.Body) != withoutGrantID(ra.Body) {
				return fmt.Sprintf("step %s's audit record %d %s %s %s %s, the reference's %d %s %s %s %s", r.StepID,
					ga.Seq, ga.Code, ga.Delivery, ga.SideEffect, ga.Body, ra.Seq, ra.Code, ra.Delivery, ra.SideEffect, ra.Body)
			}
		}
	}
	return ""
}

// withoutGrantID is an audit body, canonical, with its grant's id blanked:
// each run of a case mints its grants anew, with ids of their own (and so
// the records' hashes differ too; the runner verifies each chain).
func withoutGrantID(body json.RawMessage) string {
	var b map[string]any
	if err := json.Unmarshal(body, &b); err != nil {
		return string(body)
	}
	if a, ok := b["approval"].(map[string]any); ok && a["grant_id"] != nil {
		a["grant_id"] = "…"
	}
	out, _ := json.Marshal(b)
	return canonical(out)
}

func canonical(v json.RawMessage) string {
	c, _, err := canon.Parse(v, canon.Limits{MaxBytes: len(v) + 1})
	if err != nil {
		return string(v)
	}
	return string(c)
}

// describe writes a case a step a line, with the reference's answer.
func describe(c *cases.Case, ref *cases.CaseReport) string {
	var b strings.Builder
	fmt.Fprintf(&b, "principal %+v\n", c.Principal)
	for j, s := range c.Steps {
		key := "null"
		if k := s.ExecutionContext.IdempotencyKey; k != nil {
			key = strconv.Quote(*k)
		}
		fmt.Fprintf(&b, "%s %s %q %s call=%q op=%q key=%s approval=%s failure=%s now=%v",
			s.StepID, s.Action, s.Proposal.Name, s.Proposal.Arguments, s.ExecutionContext.CallID, s.ExecutionContext.OperationID,
			key, s.Approval, s.Failure, *s.Now)
		if s.StatusRefFrom != nil {
			fmt.Fprintf(&b, " status_of=%s", *s.StatusRefFrom)
		}
		if j < len(ref.Steps) {
			var r struct{ Code, Delivery string }
			_ = json.Unmarshal(ref.Steps[j].Result, &r)
			fmt.Fprintf(&b, " → %s %s", r.Code, r.Delivery)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// The pools random cases draw from: a few of each, so that steps collide.
var (
	agreeArgs = map[string][]string{
		"get_order": {`{"order_ref":"ORDER-7"}`, `{"order_ref":"ORDER-7"}`, `{"order_ref":"ORDER-8"}`, `{"order_ref":"ORDER-9"}`,
			`{}`, `{"order_ref":7}`, `{"order_ref":"ORDER-7","is_admin":true}`},
		"create_refund_draft": {`{"order_ref":"ORDER-7","reason":"duplicate"}`, `{"order_ref":"ORDER-7","reason":"duplicate"}`,
			`{"order_ref":"ORDER-7","reason":"damaged"}`, `{"order_ref":"ORDER-8","reason":"duplicate"}`,
			`{"order_ref":"ORDER-9","reason":"duplicate"}`, `{"order_ref":"ORDER-7"}`, `{"reason":"duplicate","order_ref":"ORDER-7"}`},
		"delete_everything": {`{}`},
		"":                  {`{}`},
		"refund_everything": {`{"order_ref":"ORDER-7"}`},
	}
	agreeTools = slices.Concat(slices.Repeat([]string{"get_order"}, 6), slices.Repeat([]string{"create_refund_draft"}, 10),
		[]string{"delete_everything", "delete_everything", "", "refund_everything"})
	agreeApprovals = []string{"none", "none", "none", "valid", "valid", "valid", "expired", "mismatched"}
)

// randomCase is case i: a principal and 1 to 8 steps drawn from the pools.
func randomCase(rng *rand.Rand, i int) *cases.Case {
	pick := func(xs ...string) string { return xs[rng.IntN(len(xs))] }
	c := &cases.Case{ID: fmt.Sprintf("random-%d", i), Principal: cases.CasePrincipal{
		TenantID: "tenant-a", SubjectID: "user-1", Roles: []string{}}}
	if rng.IntN(4) == 0 { // a principal who owns other orders, or none
		c.Principal.TenantID, c.Principal.SubjectID = pick("tenant-a", "tenant-b"), pick("user-1", "user-2")
	}
	if rng.IntN(4) == 0 {
		c.Principal.Roles = []string{orders.SupportRole}
	}
	now := 1000.0
	for j := range 1 + rng.IntN(8) {
		s := cases.Step{StepID: fmt.Sprintf("s%d", j), Action: "dispatch", Approval: pick(agreeApprovals...),
			Failure: string(orders.NoFailure), Expected: map[string]json.RawMessage{}}
		if rng.IntN(3) == 0 {
			s.Failure = string(orders.Failures()[rng.IntN(len(orders.Failures()))])
		}
		now += []float64{0, 0.001, 1, 30, 400}[rng.IntN(5)]
		s.Now = new(float64)
		*s.Now = now
		tool := pick(agreeTools...)
		if j > 0 && rng.IntN(5) == 0 {
			s.Action = "query_status"
			ref := c.Steps[rng.IntN(j)]
			s.StatusRefFrom = &ref.StepID
			if rng.IntN(4) != 0 {
				tool = ref.Proposal.Name
			}
		}
		s.Proposal = cases.StepProposal{Name: tool, Arguments: json.RawMessage(pick(agreeArgs[tool]...))}
		key := pick("", "", "null", "key-1", "key-2")
		s.ExecutionContext = cases.StepContext{Provider: "openai", APIFamily: "responses", AdapterRevision: "openai-responses-v1",
			ResponseID: "response-" + pick("1", "2"), CallID: pick("", "call-1", "call-2", "call-"+s.StepID, "call-"+s.StepID),
			OperationID: pick("", "", "", "op-1", "op-2")}
		if key != "null" {
			s.ExecutionContext.IdempotencyKey = &key
		}
		c.Steps = append(c.Steps, s)
	}
	return c
}
