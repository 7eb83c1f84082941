package idem_test

import (
	"context"
	"encoding/json"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/guard/guardtest"
	"github.com/toolguard/toolguard/idem"
	"github.com/toolguard/toolguard/internal/redistest"
	"github.com/toolguard/toolguard/toolset"
)

type chargeIn struct {
	Key string `json:"key"`
}

// TestBudgetUnderLoad: 64 agents of one tenant write at once against the
// tenant's budget of 100 executions (cost 1 each): exactly 100 run, every
// other call is BUDGET_EXHAUSTED and audited, on miniredis, the server
// and the cluster. Replays of the calls that ran cost nothing: they are
// answered from their records, and the budget stays spent.
func TestBudgetUnderLoad(t *testing.T) {
	redistest.ForEachBackend(t, func(t *testing.T, rdb redis.UniversalClient) {
		const agents, each, limit = 64, 5, 100
		var ran atomic.Int64
		tool := toolset.Write("charge", "Charge a card.", func(context.Context, *guard.Invocation, chargeIn) (json.RawMessage, error) {
			ran.Add(1)
			return json.RawMessage(`{"charged":true}`), nil
		}, &toolset.Options[chargeIn, json.RawMessage]{Budget: &toolset.Budget[chargeIn]{Cost: 1}})
		s, err := idem.New(rdb, idem.Options{Prefix: redistest.Prefix(t)})
		if err != nil {
			t.Fatal(err)
		}
		g := guard.New(toolset.MustNew(tool), s, guard.Options{TenantBudget: guard.TenantBudget{Limit: limit, Period: time.Hour}})
		p := guard.Principal{TenantID: "budget-tenant", SubjectID: "u"}
		call := func(a, i int) guard.Call {
			id := "a" + strconv.Itoa(a) + "-" + strconv.Itoa(i)
			return guard.Call{Principal: p, Proposal: guard.Proposal{Name: "charge", Arguments: []byte(`{"key":"` + id + `"}`)},
				Context: guard.ExecutionContext{CallID: id, IdempotencyKey: id}}
		}
		var (
			mu     sync.Mutex
			codes  = map[guard.Code]int{}
			okOnes []guard.Call
			wg     sync.WaitGroup
		)
		for a := range agents {
			wg.Go(func() {
				for i := range each {
					c := call(a, i)
					ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
					res, err := g.Dispatch(ctx, c)
					cancel()
					if err != nil {
						t.Errorf("dispatch: %v", err)
						return
					}
					mu.Lock()
					codes[res.Code]++
					if res.Code == guard.CodeOK {
						okOnes = append(okOnes, c)
					}
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		if codes[guard.CodeOK] != limit || codes[guard.CodeBudgetExhausted] != agents*each-limit || ran.Load() != limit {
			t.Fatalf("answers %v, %d ran; want %d OK and %d BUDGET_EXHAUSTED, %d ran", codes, ran.Load(), limit, agents*each-limit, limit)
		}
		for _, c := range okOnes[:10] {
			res, err := g.Dispatch(context.Background(), c)
			if err != nil || res.Code != guard.CodeOK || res.Delivery != guard.DeliveryLocalReplay {
				t.Fatalf("replay: %v, %v", res, err)
			}
		}
		if ran.Load() != limit {
			t.Fatalf("replays ran the tool: %d runs", ran.Load())
		}
		if refused := guardtest.AuditedCodes(t, s, p.TenantID)[guard.CodeBudgetExhausted]; refused != agents*each-limit {
			t.Errorf("%d refusals audited, want %d", refused, agents*each-limit)
		}
	})
}
