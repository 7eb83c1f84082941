package approvals_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/toolguard/toolguard/agentloop"
	"github.com/toolguard/toolguard/approvals"
	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/internal/redistest"
	"github.com/toolguard/toolguard/toolset"
)

type PayIn struct {
	Amount int     `json:"amount"`
	Card   PayCard `json:"card"`
}

type PayCard struct {
	Holder string `json:"holder"`
	Number string `json:"number" toolguard:"secret"`
}

const payCard = "4111111111111111"

// TestInboxWithholdsSecretArguments: a member that holds a declared secret
// is withheld from the approver even where the tool logs it: neither its
// value nor its fingerprint (a short secret's SHA-256 is guessed) is on
// the page, in the request's JSON or in Redis; the other logged members
// are shown.
func TestInboxWithholdsSecretArguments(t *testing.T) {
	_, rdb := redistest.Mini(t)
	pay := toolset.Write("pay", "Pay with a card.", func(context.Context, *guard.Invocation, PayIn) (string, error) { return "", nil },
		&toolset.Options[PayIn, string]{NeedsApproval: true, LoggedArguments: []string{"amount", "card"}})
	queue, err := approvals.NewQueue(rdb, approvals.Options{Tools: toolset.MustNew(pay)})
	if err != nil {
		t.Fatal(err)
	}
	args, _ := json.Marshal(PayIn{Amount: 4200, Card: PayCard{Holder: "Ada", Number: payCard}})
	r, err := queue.Ask(ctxT(t), "run-1", agentloop.ApprovalRequest{CallID: "c1", Tool: "pay", Arguments: args,
		Principal: user1, Fingerprint: guard.Fingerprint("pay", args), OperationID: "op-1"})
	if err != nil {
		t.Fatal(err)
	}
	cardJSON, _ := json.Marshal(PayCard{Holder: "Ada", Number: payCard})
	sum := sha256.Sum256(cardJSON)
	leaks := []string{payCard, hex.EncodeToString(sum[:])}
	fields := map[string]approvals.Field{}
	for _, f := range r.Arguments {
		fields[f.Name] = f
	}
	if f := fields["card"]; !f.Secret || !f.Hidden || f.Value != nil || f.Fingerprint != "" {
		t.Errorf("card field = %+v, want a withheld secret", f)
	}
	if f := fields["amount"]; f.Hidden || string(f.Value) != "4200" {
		t.Errorf("amount field = %+v, want shown", f)
	}
	page := get(t, inboxFor(t, queue, leadA)+"r/"+r.ID)
	if !strings.Contains(page, "4200") || !strings.Contains(page, "a secret: withheld") {
		t.Errorf("the page does not show the amount and the withheld card:\n%s", page)
	}
	reqJSON, _ := json.Marshal(r)
	var stored strings.Builder
	for _, k := range rdb.Keys(context.Background(), "*").Val() {
		stored.WriteString(rdb.Dump(context.Background(), k).Val())
	}
	for where, text := range map[string]string{"the page": page, "the request": string(reqJSON), "Redis": stored.String()} {
		for _, leak := range leaks {
			if strings.Contains(text, leak) {
				t.Errorf("%s holds %q", where, leak)
			}
		}
	}
}

func get(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s\n%s", url, resp.Status, b)
	}
	return string(b)
}
