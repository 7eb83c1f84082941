package approvals_test

import (
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/toolguard/toolguard/approvals"
	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/host"
	"github.com/toolguard/toolguard/internal/redistest"
)

func guardCode(output string) guard.Code {
	var r guard.Result
	_ = json.Unmarshal([]byte(output), &r)
	return r.Code
}

// TestParkShowsOnlySafeArguments: a parked request names the exact intent,
// shows the members the tool logs, and lists in the tenant's inbox only.
func TestParkShowsOnlySafeArguments(t *testing.T) {
	redistest.ForEachBackend(t, func(t *testing.T, rdb redis.UniversalClient) {
		w := newWorld(t, rdb, refundTurns()...)
		ctx := ctxT(t)
		res, reqs := w.park(ctx)
		if len(reqs) != 1 {
			t.Fatalf("%d requests", len(reqs))
		}
		r := reqs[0]
		pr := res.Pending[0]
		if r.Tool != "create_refund_draft" || r.Fingerprint != pr.Fingerprint || r.RunID != res.RunID ||
			r.RequestedBy != "user-1" || r.Status != approvals.StatusPending || r.OperationID != pr.OperationID {
			t.Fatalf("request %+v, pending %+v", r, pr)
		}
		if len(r.Arguments) != 2 || string(r.Arguments[0].Value) != `"ORDER-7"` || string(r.Arguments[1].Value) != `"duplicate"` {
			t.Fatalf("arguments %+v", r.Arguments)
		}
		list, err := w.store.Pending(ctx, "tenant-a", 0)
		if err != nil || len(list) != 1 || list[0].ID != r.ID {
			t.Fatalf("pending %v %v", list, err)
		}
		if list, _ := w.store.Pending(ctx, "tenant-b", 0); len(list) != 0 {
			t.Fatalf("tenant-b sees %v", list)
		}
		if _, err := w.store.Get(ctx, "tenant-b", r.ID); !errors.Is(err, approvals.ErrNotFound) {
			t.Fatalf("tenant-b get: %v", err)
		}
	})
}

// A tool that does not mark a member safe to show gets its fingerprint.
func TestHiddenArguments(t *testing.T) {
	_, rdb := redistest.Mini(t)
	store, err := approvals.NewQueue(rdb, approvals.Options{}) // no Tools: nothing is shown
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	args := []byte(`{"card":"4111111111111111","order_ref":"ORDER-7"}`)
	r, err := store.Ask(ctx, "run-1", host.ApprovalRequest{CallID: "c1", Tool: "charge", Arguments: args, Principal: user1,
		Fingerprint: guard.Fingerprint("charge", args), OperationID: "op-1"})
	if err != nil {
		t.Fatal(err)
	}
	got, err := store.Get(ctx, "tenant-a", r.ID)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(got)
	if strings.Contains(string(b), "4111") || len(got.Arguments) != 2 || !got.Arguments[0].Hidden ||
		!strings.HasPrefix(got.Arguments[0].Fingerprint, "sha256:") {
		t.Fatalf("stored %s", b)
	}
}

// Two approvers deciding at once: one decision, the other told who won.
func TestConcurrentDecisions(t *testing.T) {
	redistest.ForEachBackend(t, func(t *testing.T, rdb redis.UniversalClient) {
		w := newWorld(t, rdb, refundTurns()...)
		ctx := ctxT(t)
		_, reqs := w.park(ctx)
		var wg sync.WaitGroup
		var mu sync.Mutex
		var wins, lost int
		for i := range 8 {
			wg.Go(func() {
				who := leadA
				if i%2 == 1 {
					who = leadA2
				}
				_, err := w.store.Decide(ctx, who, reqs[0].ID, host.Decision{Approved: i%3 != 0}, false)
				var de *approvals.DecidedError
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					wins++
				case errors.As(err, &de):
					lost++
				default:
					t.Error(err)
				}
			})
		}
		wg.Wait()
		if wins != 1 || lost != 7 {
			t.Fatalf("%d decisions recorded, %d refused", wins, lost)
		}
		recs, err := w.store.Audit(ctx, "tenant-a")
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) != 2 || recs[0].Event != "requested" || recs[1].DecidedBy == "" || recs[1].RequestedBy != "user-1" {
			t.Fatalf("audit %+v", recs)
		}
	})
}

func TestDecideRefusals(t *testing.T) {
	_, rdb := redistest.Mini(t)
	w := newWorld(t, rdb, refundTurns()...)
	ctx := ctxT(t)
	_, reqs := w.park(ctx)
	id := reqs[0].ID
	if _, err := w.store.Decide(ctx, leadB, id, host.Decision{Approved: true}, false); !errors.Is(err, approvals.ErrNotFound) {
		t.Errorf("other tenant: %v", err)
	}
	self := guard.Principal{TenantID: "tenant-a", SubjectID: "user-1", Roles: []string{approvals.DefaultRole}}
	if _, err := w.store.Decide(ctx, self, id, host.Decision{Approved: true}, false); !errors.Is(err, approvals.ErrOwnRequest) {
		t.Errorf("own request: %v", err)
	}
	if _, err := w.store.Decide(ctx, leadA, "apr_000000000000000000000000", host.Decision{}, false); !errors.Is(err, approvals.ErrNotFound) {
		t.Errorf("unknown id: %v", err)
	}
	w.now = w.now.Add(2 * time.Hour)
	if _, err := w.store.Decide(ctx, leadA, id, host.Decision{Approved: true}, false); !errors.Is(err, approvals.ErrExpired) {
		t.Errorf("expired: %v", err)
	}
	r, err := w.store.Get(ctx, "tenant-a", id)
	if err != nil || r.Status != approvals.StatusExpired || r.DecidedBy != "" {
		t.Fatalf("after expiry %+v %v", r, err)
	}
	if _, err := w.store.Decide(ctx, leadA, id, host.Decision{}, false); !errors.Is(err, approvals.ErrExpired) {
		t.Errorf("decided after expiry: %v", err)
	}
}
