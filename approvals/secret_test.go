package approvals_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/redis/go-redis/v9"

	tgopenai "github.com/toolguard/toolguard/adapters/openai"
	"github.com/toolguard/toolguard/agentloop"
	"github.com/toolguard/toolguard/approvals"
	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/host"
	"github.com/toolguard/toolguard/idem"
	"github.com/toolguard/toolguard/internal/fakemodel"
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
	r, err := queue.Ask(ctxT(t), "run-1", host.ApprovalRequest{CallID: "c1", Tool: "pay", Arguments: args,
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

// sekretKeys is the tests' detector: "sk-proj-" and the letters and digits
// after it.
type sekretKeys struct{}

var sekretRE = regexp.MustCompile(`sk-proj-[A-Za-z0-9]+`)

func (sekretKeys) Find(text string) []string { return sekretRE.FindAllString(text, -1) }

type payMemoIn struct {
	Amount int     `json:"amount"`
	Card   PayCard `json:"card"`
	Memo   string  `json:"memo"`
	Ref    string  `json:"ref"`
}

const (
	userKey = "sk-proj-USERPASTEDKEY0123"
	memoKey = "sk-proj-MEMOKEY0123456789"
	refKey  = "sk-proj-HIDDENREFKEY01234"
)

// parkedWorld is a run of a scripted model that calls "pay", a write that
// needs approval, with a declared secret (the card number), a key in a
// member the inbox shows (memo) and one in a member it hides (ref), after
// a user message that holds a key too; the run is parked on a queue with
// key and the sekretKeys detector.
type parkedWorld struct {
	srv   *fakemodel.OpenAIServer
	loop  *agentloop.Loop
	queue *approvals.Queue
	paid  []PayCard
	res   *agentloop.RunResult
	reqs  []*approvals.Request
}

func parkPay(t *testing.T, rdb redis.UniversalClient, prefix string, key []byte) *parkedWorld {
	t.Helper()
	w := &parkedWorld{}
	args, _ := json.Marshal(payMemoIn{Amount: 4200, Card: PayCard{Holder: "Ada", Number: payCard}, Memo: "use " + memoKey, Ref: refKey})
	w.srv = fakemodel.NewOpenAI(fakemodel.Turn{Calls: []fakemodel.Call{{Name: "pay", Arguments: string(args)}}}, fakemodel.Turn{Text: "paid"})
	t.Cleanup(w.srv.Close)
	pay := toolset.Write("pay", "Pay with a card.", func(_ context.Context, _ *guard.Invocation, in payMemoIn) (string, error) {
		w.paid = append(w.paid, in.Card)
		return "paid", nil
	}, &toolset.Options[payMemoIn, string]{NeedsApproval: true, LoggedArguments: []string{"amount", "card", "memo"}})
	tools := toolset.MustNew(pay)
	signer, _ := guard.NewSigner(key)
	client := oai.NewClient(option.WithBaseURL(w.srv.BaseURL()), option.WithAPIKey("test"), option.WithMaxRetries(0))
	store, err := idem.New(rdb, idem.Options{Prefix: prefix + "idem:"})
	if err != nil {
		t.Fatal(err)
	}
	w.loop = agentloop.New(tgopenai.NewModel(client, tgopenai.ModelOptions{}), tools, agentloop.Options{Store: store, Signer: signer,
		Guard: guard.Options{SecretKey: key, Detector: sekretKeys{}}})
	w.queue, err = approvals.NewQueue(rdb, approvals.Options{Prefix: prefix, Tools: tools, SecretKey: key, Detector: sekretKeys{}})
	if err != nil {
		t.Fatal(err)
	}
	if w.res, err = w.loop.Run(ctxT(t), user1, "pay order 7 with my card; my key is "+userKey); err != nil || w.res.Status != agentloop.StatusPaused {
		t.Fatalf("run: %v %v", w.res, err)
	}
	if w.reqs, err = w.queue.Park(ctxT(t), w.res); err != nil {
		t.Fatal(err)
	}
	return w
}

// TestParkedRunSealed: a run parked for approval holds the card number the
// model wrote (declared secret), keys in the arguments and the user's
// message; Redis holds none of them, in any key or value (read raw: every
// key, field, member and entry), nor the card's fingerprint. The worker of
// a queue with the same secret key resumes it, and the tool gets the real
// card number; a queue with another key cannot open it (ErrSealed), nor
// can a run whose sealed state was moved to another run's record.
func TestParkedRunSealed(t *testing.T) {
	redistest.ForEachBackend(t, func(t *testing.T, rdb redis.UniversalClient) {
		key := bytes.Repeat([]byte("s"), 32)
		prefix := redistest.Prefix(t)
		w := parkPay(t, rdb, prefix, key)
		cardJSON, _ := json.Marshal(PayCard{Holder: "Ada", Number: payCard})
		sum := sha256.Sum256(cardJSON)
		raw := redistest.Contents(t, rdb, prefix+"*")
		for _, leak := range []string{payCard, userKey, memoKey, refKey, "PASTEDKEY", "MEMOKEY", "HIDDENREFKEY", hex.EncodeToString(sum[:])} {
			if strings.Contains(raw, leak) {
				t.Errorf("Redis holds %q", leak)
			}
		}
		if !strings.Contains(raw, "tgseal1:") {
			t.Error("no sealed state in Redis")
		}

		// Another process with another key claims it and cannot open it.
		// (Its clock runs an hour late, so that its claim's lease is over
		// for the next worker.)
		late := time.Now().Add(-time.Hour)
		other, err := approvals.NewQueue(rdb, approvals.Options{Prefix: prefix, SecretKey: bytes.Repeat([]byte("x"), 32),
			Clock: guard.ClockFunc(func() time.Time { return late })})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.queue.Decide(ctxT(t), leadA, w.reqs[0].ID, host.Decision{Approved: true}, false); err != nil {
			t.Fatal(err)
		}
		var errs []error
		done := func(_ string, _ *agentloop.RunResult, err error) { errs = append(errs, err) }
		if n, _ := (&approvals.Worker{Queue: other, Loop: w.loop, Lease: time.Minute, Done: done}).Once(ctxT(t)); n != 1 ||
			!errors.Is(errs[0], approvals.ErrSealed) || len(w.paid) != 0 {
			t.Fatalf("a queue with another key: %d %v, paid %v", n, errs, w.paid)
		}
		errs = nil
		if n, err := (&approvals.Worker{Queue: w.queue, Loop: w.loop, Done: done}).Once(ctxT(t)); n != 1 || err != nil || errs[0] != nil {
			t.Fatalf("resume: %d %v %v", n, err, errs)
		}
		if len(w.paid) != 1 || w.paid[0].Number != payCard {
			t.Errorf("the tool got %v, want the real card number", w.paid)
		}
	})
}

// TestSealedStateBoundToItsRun: a sealed state copied into another run's
// record (the same tenant's) does not open there.
func TestSealedStateBoundToItsRun(t *testing.T) {
	_, rdb := redistest.Mini(t)
	key := bytes.Repeat([]byte("s"), 32)
	prefix := redistest.Prefix(t)
	a := parkPay(t, rdb, prefix, key)
	b := parkPay(t, rdb, prefix, key)
	ctx := ctxT(t)
	var runA, runB string
	for _, k := range rdb.Keys(ctx, prefix+"*:run:*").Val() {
		id, _ := rdb.HGet(ctx, k, "requests").Result()
		switch id {
		case a.reqs[0].ID:
			runA = k
		case b.reqs[0].ID:
			runB = k
		}
	}
	if runA == "" || runB == "" {
		t.Fatal("parked runs not found")
	}
	rdb.HSet(ctx, runB, "state", rdb.HGet(ctx, runA, "state").Val())
	if _, err := b.queue.Decide(ctx, leadA, b.reqs[0].ID, host.Decision{Approved: true}, false); err != nil {
		t.Fatal(err)
	}
	var errs []error
	if n, _ := (&approvals.Worker{Queue: b.queue, Loop: b.loop, Done: func(_ string, _ *agentloop.RunResult, err error) {
		errs = append(errs, err)
	}}).Once(ctx); n != 1 || !errors.Is(errs[0], approvals.ErrSealed) || len(a.paid)+len(b.paid) != 0 {
		t.Fatalf("a moved state: %d %v", n, errs)
	}
}

// TestInboxWithholdsDetectedSecrets: a key the model pasted into an
// argument the tool shows is shown as its placeholder, in one the tool
// hides it makes the member a withheld secret; neither member has a
// fingerprint; the page, the JSON API and Redis hold neither key.
func TestInboxWithholdsDetectedSecrets(t *testing.T) {
	_, rdb := redistest.Mini(t)
	key := bytes.Repeat([]byte("s"), 32)
	w := parkPay(t, rdb, redistest.Prefix(t), key)
	r := w.reqs[0]
	fields := map[string]approvals.Field{}
	for _, f := range r.Arguments {
		fields[f.Name] = f
	}
	h, _ := guard.SecretHash(key, memoKey)
	if f := fields["memo"]; f.Hidden || f.Secret || f.Fingerprint != "" || string(f.Value) != `"use `+guard.SecretPlaceholder(h)+`"` {
		t.Errorf("memo = %+v", f)
	}
	if f := fields["ref"]; !f.Hidden || !f.Secret || f.Fingerprint != "" || f.Value != nil {
		t.Errorf("ref = %+v", f)
	}
	if f := fields["amount"]; f.Hidden || string(f.Value) != "4200" || f.Fingerprint == "" {
		t.Errorf("amount = %+v", f)
	}
	base := inboxFor(t, w.queue, leadA)
	page := get(t, base+"r/"+r.ID)
	list := get(t, base)
	api := get(t, base+"api/requests/"+r.ID)
	apiList := get(t, base+"api/requests")
	if !strings.Contains(page, guard.SecretPlaceholder(h)) || !strings.Contains(api, guard.SecretPlaceholder(h)) {
		t.Errorf("the placeholder is not shown:\n%s\n%s", page, api)
	}
	for where, text := range map[string]string{"the page": page, "the list": list, "the API": api, "the API's list": apiList,
		"Redis": redistest.Contents(t, rdb, "*")} {
		for _, leak := range []string{memoKey, refKey, userKey, payCard} {
			if strings.Contains(text, leak) {
				t.Errorf("%s holds %q", where, leak)
			}
		}
	}
}
