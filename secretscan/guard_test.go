package secretscan_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/secretscan"
	"github.com/toolguard/toolguard/toolset"
)

type ticketIn struct {
	ID string `json:"id"`
}

type ticketOut struct {
	Subject string   `json:"subject"`
	Body    string   `json:"body"`
	Tags    []string `json:"tags"`
}

// TestGuardWithholds: end to end, a guard with the Detector over guard.MemStore.
// A read tool's output carries, undeclared, an OpenAI project key and a
// card number inside the text of a support ticket. The model result (its
// Data and its JSON, first and replayed from the store) holds neither,
// and holds the keyed placeholder of each instead, in place; the rest of
// the text is untouched. The audit log (which records the call, not its
// output) holds neither and still verifies.
func TestGuardWithholds(t *testing.T) {
	key := "sk-proj-" + fake(urlsafe, 74) + "T3BlbkFJ" + fake(urlsafe, 74)
	const card = "4242 4242 4242 4242"
	tool := toolset.Read("get_ticket", "Read a support ticket.",
		func(_ context.Context, _ *guard.Invocation, in ticketIn) (ticketOut, error) {
			return ticketOut{
				Subject: "Integration broken",
				Body:    "Hi, our key " + key + " stopped working; bill the card " + card + " for the upgrade. Order 4111111111111112.",
				Tags:    []string{"billing", key},
			}, nil
		}, nil)
	d, err := secretscan.New(secretscan.Options{})
	if err != nil {
		t.Fatal(err)
	}
	secretKey := []byte("an audit key of thirty-two bytes!")
	store := guard.NewMemStore(guard.MemStoreOptions{})
	g := guard.New(toolset.MustNew(tool), store, guard.Options{Detector: d, SecretKey: secretKey})
	call := guard.Call{
		Principal: guard.Principal{TenantID: "t1", SubjectID: "agent"},
		Proposal:  guard.Proposal{Name: "get_ticket", Arguments: []byte(`{"id":"T-1"}`)},
		Context:   guard.ExecutionContext{CallID: "call-1"},
	}
	kh, _ := guard.SecretHash(secretKey, key)
	ch, _ := guard.SecretHash(secretKey, card)
	want := ticketOut{
		Subject: "Integration broken",
		Body: "Hi, our key " + guard.SecretPlaceholder(kh) + " stopped working; bill the card " +
			guard.SecretPlaceholder(ch) + " for the upgrade. Order 4111111111111112.",
		Tags: []string{"billing", guard.SecretPlaceholder(kh)},
	}
	for _, round := range []string{"first", "replayed"} {
		res, err := g.Dispatch(context.Background(), call)
		if err != nil {
			t.Fatal(err)
		}
		if res.Code != guard.CodeOK {
			t.Fatalf("%s: %s %s", round, res.Code, res.String())
		}
		for what, text := range map[string]string{"Data": string(res.Data), "String()": res.String()} {
			if strings.Contains(text, key) || strings.Contains(text, card) || strings.Contains(text, "4242424242424242") {
				t.Errorf("%s: the result's %s leaks: %s", round, what, text)
			}
			if !strings.Contains(text, guard.SecretPlaceholder(kh)) || !strings.Contains(text, guard.SecretPlaceholder(ch)) {
				t.Errorf("%s: the result's %s lacks the placeholders: %s", round, what, text)
			}
		}
		var got ticketOut
		if err := json.Unmarshal(res.Data, &got); err != nil {
			t.Fatal(err)
		}
		if got.Subject != want.Subject || got.Body != want.Body || strings.Join(got.Tags, "|") != strings.Join(want.Tags, "|") {
			t.Errorf("%s: Data = %+v\nwant %+v", round, got, want)
		}
	}
	recs, _, err := store.Audit(context.Background(), "t1", 0, 100)
	if err != nil || len(recs) == 0 {
		t.Fatalf("Audit = %d records, %v", len(recs), err)
	}
	for _, r := range recs {
		if b := string(r.Body); strings.Contains(b, key) || strings.Contains(b, card) {
			t.Errorf("audit record %d leaks: %s", r.Seq, b)
		}
	}
	if n, err := guard.VerifyAudit(context.Background(), store, "t1"); err != nil || n != int64(len(recs)) {
		t.Errorf("guard.VerifyAudit = %d, %v", n, err)
	}
}
