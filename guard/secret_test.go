package guard_test

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/idem"
	"github.com/toolguard/toolguard/internal/redistest"
	"github.com/toolguard/toolguard/toolset"
)

const (
	vaultKey   = "sk-live-VAULTED-0123456789abcdef"
	cardNumber = "4111111111111111"
	resetLink  = "https://example.com/reset?token=RESET-TOKEN-42"
)

type rotateIn struct {
	Service string `json:"service"`
	// The card to charge; the audit keeps its hash.
	Card cardIn `json:"card"`
}

type cardIn struct {
	Holder string `json:"holder"`
	Number string `json:"number" toolguard:"secret"`
}

type rotateOut struct {
	Service string     `json:"service"`
	APIKey  string     `json:"api_key" toolguard:"secret"`
	Links   []linkOut  `json:"links"`
	Owner   *ownerInfo `json:"owner"`
}

type linkOut struct {
	Kind string `json:"kind"`
	URL  string `json:"url" toolguard:"secret"`
}

type ownerInfo struct {
	Name string `json:"name"`
}

var secretKey = []byte(strings.Repeat("a", 32))

func secretTools(t *testing.T, receipts map[string]rotateOut) *toolset.Set {
	rotate := toolset.Write("rotate_key", "Rotate a service's API key.",
		func(_ context.Context, inv *guard.Invocation, in rotateIn) (rotateOut, error) {
			out := rotateOut{Service: in.Service, APIKey: vaultKey, Links: []linkOut{{Kind: "reset", URL: resetLink}, {Kind: "none"}},
				Owner: &ownerInfo{Name: in.Card.Holder}}
			receipts[inv.IdempotencyKey] = out
			return out, nil
		}, &toolset.Options[rotateIn, rotateOut]{LoggedArguments: []string{"service", "card"},
			Receipt: func(_ context.Context, inv *guard.Invocation) (rotateOut, bool, error) {
				out, ok := receipts[inv.IdempotencyKey]
				return out, ok, nil
			}})
	return toolset.MustNew(rotate)
}

// allStored returns every value the Redis server holds, as text.
func allStored(t *testing.T, rdb redis.UniversalClient) string {
	t.Helper()
	ctx := context.Background()
	keys, err := rdb.Keys(ctx, "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, k := range keys {
		switch rdb.Type(ctx, k).Val() {
		case "string":
			b.WriteString(rdb.Get(ctx, k).Val())
		case "stream":
			for _, m := range rdb.XRange(ctx, k, "-", "+").Val() {
				for f, v := range m.Values {
					b.WriteString(f)
					b.WriteString(v.(string))
				}
			}
		default:
			t.Fatalf("key %s of type %s", k, rdb.Type(ctx, k).Val())
		}
	}
	return b.String()
}

// TestDeclaredSecrets: a tool whose output declares secrets (a key, the
// URLs of a list) and whose input declares one (a card number inside a
// logged member). The model result, its replay, a status query answered
// from the receipt and everything the store holds carry placeholders, never
// the values; the audit record keeps the card number's keyed hash, which
// an auditor checks against a known value, and the chain verifies.
func TestDeclaredSecrets(t *testing.T) {
	receipts := map[string]rotateOut{}
	tools := secretTools(t, receipts)
	spec := tools.Lookup("rotate_key").Spec()
	if strings.Join(spec.SecretArguments, ",") != "card.number" || strings.Join(spec.SecretOutput, ",") != "api_key,links[].url" {
		t.Fatalf("secret paths: arguments %v, output %v", spec.SecretArguments, spec.SecretOutput)
	}
	_, rdb := redistest.Mini(t)
	store, err := idem.New(rdb, idem.Options{})
	if err != nil {
		t.Fatal(err)
	}
	g := guard.New(tools, store, guard.Options{SecretKey: secretKey})
	p := guard.Principal{TenantID: "t1", SubjectID: "u1"}
	args := `{"service":"billing","card":{"holder":"Ada","number":"` + cardNumber + `"}}`
	call := guard.Call{Principal: p, Proposal: guard.Proposal{Name: "rotate_key", Arguments: []byte(args)},
		Context: guard.ExecutionContext{CallID: "c1", IdempotencyKey: "k1"}}
	keyHash, _ := guard.SecretHash(secretKey, vaultKey)
	linkHash, _ := guard.SecretHash(secretKey, resetLink)
	// Only the secrets change: the rest stands as the tool wrote it.
	want := `{"service":"billing","api_key":"` + guard.SecretPlaceholder(keyHash) + `","links":[{"kind":"reset","url":"` + guard.SecretPlaceholder(linkHash) +
		`"},{"kind":"none","url":""}],"owner":{"name":"Ada"}}`
	for i, delivery := range []guard.Delivery{guard.DeliveryFresh, guard.DeliveryLocalReplay} {
		res, err := g.Dispatch(context.Background(), call)
		if err != nil {
			t.Fatal(err)
		}
		if res.Code != guard.CodeOK || res.Delivery != delivery || string(res.Data) != want {
			t.Fatalf("dispatch %d: %s %s %s\nwant data %s", i, res.Code, res.Delivery, res.Data, want)
		}
	}

	held := allStored(t, rdb)
	for _, secret := range []string{vaultKey, cardNumber, resetLink, "RESET-TOKEN"} {
		if strings.Contains(held, secret) {
			t.Errorf("the store holds the secret %q", secret)
		}
	}

	recs, _, err := store.Audit(context.Background(), "t1", 0, 10)
	if err != nil || len(recs) == 0 {
		t.Fatalf("audit: %d records, %v", len(recs), err)
	}
	var body struct {
		Arguments struct {
			Service string `json:"service"`
			Card    struct {
				Holder string            `json:"holder"`
				Number map[string]string `json:"number"`
			} `json:"card"`
		} `json:"arguments"`
	}
	if err := json.Unmarshal(recs[0].Body, &body); err != nil {
		t.Fatal(err)
	}
	known, _ := guard.SecretHash(secretKey, cardNumber)
	if body.Arguments.Service != "billing" || body.Arguments.Card.Holder != "Ada" || body.Arguments.Card.Number["hmac-sha256"] != known {
		t.Errorf("audited arguments = %s; want the card number as its keyed hash %s", recs[0].Body, known)
	}
	if other, _ := guard.SecretHash(secretKey, "4000000000000002"); other == known {
		t.Error("another card number has the same hash")
	}
	if n, err := guard.VerifyAudit(context.Background(), store, "t1"); err != nil || n != int64(len(recs)) {
		t.Errorf("guard.VerifyAudit = %d, %v", n, err)
	}
	// A status query answered from the receipt (a write whose record the
	// store lost) withholds them too.
	lost := guard.Call{Principal: p, Proposal: guard.Proposal{Name: "rotate_key", Arguments: []byte(args)},
		Context: guard.ExecutionContext{CallID: "c2", IdempotencyKey: "k2"}}
	if _, err := g.Dispatch(context.Background(), lost); err != nil {
		t.Fatal(err)
	}
	rdb.FlushAll(context.Background()) // the store lost everything; the receipts remain
	st, err := g.QueryStatus(context.Background(), guard.StatusCall{Principal: p, OperationID: "c2", Tool: "rotate_key",
		Context: guard.ExecutionContext{CallID: "s1", IdempotencyKey: "k2"}})
	if err != nil {
		t.Fatal(err)
	}
	if st.Code != guard.CodeOK || strings.Contains(string(st.Data), vaultKey) || !strings.Contains(string(st.Data), guard.SecretPlaceholder(keyHash)) {
		t.Errorf("status from the receipt: %s %s %s", st.Code, st.Delivery, st.Data)
	}
}

// TestSecretsWithoutKey: without Options.SecretKey the guard withholds
// secrets all the same, with a key of its own.
func TestSecretsWithoutKey(t *testing.T) {
	g, _ := newGuard(t, secretTools(t, map[string]rotateOut{}), guard.Options{})
	res := dispatch(t, g, "rotate_key", `{"service":"s","card":{"holder":"h","number":"1"}}`, "c1")
	if res.Code != guard.CodeOK || strings.Contains(string(res.Data), vaultKey) || !strings.Contains(string(res.Data), "[secret withheld; hmac-sha256:") {
		t.Errorf("result = %s %s", res.Code, res.Data)
	}
}

// keyPattern is a detector of test keys: "sk-" and 20 or more letters and
// digits, and the number 4111111111111111.
type keyPattern struct{}

func (keyPattern) Find(text string) []string {
	var out []string
	for _, f := range strings.Fields(strings.NewReplacer(",", " ", ".", " ", `"`, " ").Replace(text)) {
		if (strings.HasPrefix(f, "sk-") && len(f) >= 23) || f == "4111111111111111" {
			out = append(out, f)
		}
	}
	return out
}

type noteOut struct {
	Note  string          `json:"note"`
	Card  json.RawMessage `json:"card"`
	Other []string        `json:"other"`
}

// TestDetectedSecrets: secrets no tool declared, found by the detector in
// the strings (and numbers) of an output, are withheld the same way, in
// place; what the detector does not find is left as it is.
func TestDetectedSecrets(t *testing.T) {
	const leaked = "sk-proj-UNDECLARED0123456789"
	tool := toolset.Read("lookup", "Look something up.", func(context.Context, *guard.Invocation, in) (noteOut, error) {
		return noteOut{Note: "the key is " + leaked + ", keep it safe", Card: json.RawMessage(`4111111111111111`),
			Other: []string{"sk-short", leaked}}, nil
	}, nil)
	g, _ := newGuard(t, toolset.MustNew(tool), guard.Options{SecretKey: secretKey, Detector: keyPattern{}})
	res := dispatch(t, g, "lookup", `{"n":1}`, "c1")
	h, _ := guard.SecretHash(secretKey, leaked)
	c, _ := guard.SecretHash(secretKey, "4111111111111111")
	want := `{"note":"the key is ` + guard.SecretPlaceholder(h) + `, keep it safe","card":"` + guard.SecretPlaceholder(c) + `","other":["sk-short","` +
		guard.SecretPlaceholder(h) + `"]}`
	if res.Code != guard.CodeOK || string(res.Data) != want {
		t.Errorf("result = %s %s\nwant %s", res.Code, res.Data, want)
	}
}

type account struct {
	Name string `json:"name"`
	Key  string `json:"key" toolguard:"secret"`
}

type treeNode struct {
	Label    string     `json:"label"`
	Token    string     `json:"token" toolguard:"secret"`
	Children []treeNode `json:"children,omitempty"`
}

type stringer interface{ String() string }

type keyed struct {
	Name string `json:"name"`
	Key  string `json:"key" toolguard:"secret"`
}

func (keyed) String() string { return "keyed" }

type Hidden struct {
	Key string `json:"hidden_key" toolguard:"secret"`
}

type odd struct {
	*Hidden
	Dotted string `json:"a.b[]" toolguard:"secret"`
	Plain  string `json:"plain"`
}

// TestDeclaredSecretsByValue: a field tagged secret is withheld wherever
// it sits in the value the tool returns: in a map's values, in an `any`
// or other interface field (a struct, a pointer, a slice, a map of them),
// in a JSONText, at the root of an output that is a slice, a map or an
// interface, at every level of a type that holds itself, and under a name
// with the path syntax's own characters. The value leaves no trace in the
// model result, and what is not secret is left.
func TestDeclaredSecretsByValue(t *testing.T) {
	n := 0
	secret := func() string { n++; return "SECRET-VALUE-" + strconv.Itoa(n) }
	acct := func() account { return account{Name: "visible", Key: secret()} }
	deep := func() treeNode {
		leaf := treeNode{Label: "visible", Token: secret()}
		for range 5 {
			leaf = treeNode{Label: "visible", Token: secret(), Children: []treeNode{leaf, {Label: "visible"}}}
		}
		return leaf
	}
	type anyOut struct {
		Extra any `json:"extra"`
	}
	type mapOut struct {
		Accounts map[string]account `json:"accounts"`
	}
	type ifaceOut struct {
		S stringer `json:"s"`
	}
	type textOut struct {
		Body toolset.JSONText[account] `json:"body"`
	}
	cases := map[string]func() any{
		"map values":         func() any { return mapOut{Accounts: map[string]account{"a": acct(), "b.c": acct()}} },
		"any struct":         func() any { return anyOut{Extra: acct()} },
		"any pointer":        func() any { a := acct(); return anyOut{Extra: &a} },
		"any slice":          func() any { return anyOut{Extra: []account{acct(), acct()}} },
		"any map of any":     func() any { return anyOut{Extra: map[string]any{"x": acct(), "y": []any{acct(), "visible"}}} },
		"any JSONText":       func() any { return anyOut{Extra: toolset.JSONText[account]{Value: acct()}} },
		"interface":          func() any { return ifaceOut{S: keyed{Name: "visible", Key: secret()}} },
		"JSONText":           func() any { return textOut{Body: toolset.JSONText[account]{Value: acct()}} },
		"root slice":         func() any { return []account{acct(), acct()} },
		"root map":           func() any { return map[string]account{"visible": acct()} },
		"root any":           func() any { return acct() },
		"tree":               func() any { return deep() },
		"names to escape":    func() any { return odd{Hidden: &Hidden{Key: secret()}, Dotted: secret(), Plain: "visible"} },
		"nil embedded":       func() any { return odd{Dotted: secret(), Plain: "visible"} },
		"key without a name": func() any { return anyOut{Extra: map[string]account{"": acct(), "z": {Name: "other"}}} },
	}
	for name, make := range cases {
		t.Run(name, func(t *testing.T) {
			var made []string
			tool := toolset.Read("give", "Give.", func(context.Context, *guard.Invocation, in) (any, error) {
				first := n
				v := make()
				for i := first + 1; i <= n; i++ {
					made = append(made, "SECRET-VALUE-"+strconv.Itoa(i))
				}
				return v, nil
			}, nil)
			g, _ := newGuard(t, toolset.MustNew(tool), guard.Options{SecretKey: secretKey})
			res := dispatch(t, g, "give", `{"n":1}`, "c1")
			if res.Code != guard.CodeOK || len(made) == 0 {
				t.Fatalf("%s %s (%d secrets)", res.Code, res.Data, len(made))
			}
			data := string(res.Data)
			if strings.Contains(data, "SECRET-VALUE") {
				t.Errorf("a secret reached the model: %s", data)
			}
			if name == "key without a name" {
				// A member encoding/json names "" cannot be named by a
				// path: every member of the map it stands in is withheld.
				var got struct{ Extra map[string]string }
				if err := json.Unmarshal(res.Data, &got); err != nil || len(got.Extra) != 2 ||
					!strings.HasPrefix(got.Extra[""], "[secret withheld") || !strings.HasPrefix(got.Extra["z"], "[secret withheld") {
					t.Errorf("the map's members were not withheld: %s", data)
				}
				return
			}
			if !strings.Contains(data, "visible") {
				t.Errorf("what is not secret was withheld: %s", data)
			}
			for _, s := range made {
				h, _ := guard.SecretHash(secretKey, s)
				if !strings.Contains(data, guard.SecretPlaceholder(h)) {
					t.Errorf("no placeholder for %s: %s", s, data)
				}
			}
		})
	}
}

type loginIn struct {
	User     string            `json:"user"`
	Password string            `json:"password" toolguard:"secret"`
	Note     string            `json:"note"`
	Tags     []string          `json:"tags"`
	Extra    map[string]string `json:"-"`
}

// TestTypedErrorMessageWithheld: a tool's typed error, whose message the
// model is shown (an upstream error's text, say), passes the redaction
// before it is answered, stored or audited: what the detector finds, and
// the values the model gave for declared argument secrets (a schema error
// or an upstream echoing the password), are withheld; the rest of the
// message stands.
func TestTypedErrorMessageWithheld(t *testing.T) {
	const leaked = "sk-proj-LEAKEDINERROR0123456789"
	login := toolset.Write("login", "Log in.", func(_ context.Context, _ *guard.Invocation, in loginIn) (string, error) {
		return "", guard.NewError(guard.CodeNotFound, "upstream said: bad password "+in.Password+" for key "+leaked+" - try again")
	}, &toolset.Options[loginIn, string]{LoggedArguments: []string{"user", "note", "tags"}})
	_, rdb := redistest.Mini(t)
	store, err := idem.New(rdb, idem.Options{})
	if err != nil {
		t.Fatal(err)
	}
	g := guard.New(toolset.MustNew(login), store, guard.Options{SecretKey: secretKey, Detector: keyPattern{}})
	res := dispatch(t, g, "login", `{"user":"ada","password":"hunter2-PW","note":"my key is `+leaked+`","tags":["`+leaked+`"]}`, "c1")
	pw, _ := guard.SecretHash(secretKey, "hunter2-PW")
	key, _ := guard.SecretHash(secretKey, leaked)
	want := "upstream said: bad password " + guard.SecretPlaceholder(pw) + " for key " + guard.SecretPlaceholder(key) + " - try again"
	if res.Code != guard.CodeNotFound || res.Message != want {
		t.Errorf("result = %s %q\nwant message %q", res.Code, res.Message, want)
	}
	// Replayed from the store: the same.
	res = dispatch(t, g, "login", `{"user":"ada","password":"hunter2-PW","note":"my key is `+leaked+`","tags":["`+leaked+`"]}`, "c1")
	if res.Message != want {
		t.Errorf("replay: %q", res.Message)
	}
	held := allStored(t, rdb)
	for _, s := range []string{leaked, "hunter2-PW", "LEAKEDINERROR"} {
		if strings.Contains(held, s) {
			t.Errorf("the store holds %q", s)
		}
	}
	// The logged arguments the model wrote keep their shape, the key
	// withheld in each.
	recs, _, _ := store.Audit(context.Background(), "TENANT-SECRET", 0, 10)
	if len(recs) == 0 {
		t.Fatal("no audit record")
	}
	var body struct {
		Arguments struct {
			User string   `json:"user"`
			Note string   `json:"note"`
			Tags []string `json:"tags"`
		} `json:"arguments"`
	}
	if err := json.Unmarshal(recs[0].Body, &body); err != nil {
		t.Fatal(err)
	}
	if a := body.Arguments; a.User != "ada" || a.Note != "my key is "+guard.SecretPlaceholder(key) || len(a.Tags) != 1 || a.Tags[0] != guard.SecretPlaceholder(key) {
		t.Errorf("audited arguments: %s", recs[0].Body)
	}
	if n, err := guard.VerifyAudit(context.Background(), store, "TENANT-SECRET"); err != nil || n != int64(len(recs)) {
		t.Errorf("guard.VerifyAudit = %d, %v", n, err)
	}
}

// TestSchemaErrorWithholdsArgumentSecret: a schema error quotes what the
// model wrote; a declared argument secret in it is withheld.
func TestSchemaErrorWithholdsArgumentSecret(t *testing.T) {
	type pinIn struct {
		PIN string `json:"pin" toolguard:"secret" jsonschema:"pattern=^[0-9]{4}$"`
	}
	tool := toolset.Read("check_pin", "Check a PIN.", func(context.Context, *guard.Invocation, pinIn) (bool, error) { return true, nil }, nil)
	g, _ := newGuard(t, toolset.MustNew(tool), guard.Options{SecretKey: secretKey})
	res := dispatch(t, g, "check_pin", `{"pin":"PIN-LEAKS-9"}`, "c1")
	if res.Code != guard.CodeInvalidArguments || strings.Contains(res.Message, "PIN-LEAKS") || !strings.Contains(res.Message, "[secret withheld") {
		t.Errorf("result = %s %q", res.Code, res.Message)
	}
}

// TestReceiptSecretsByValue: a status query answered from the tool's
// receipt withholds the secrets the receipt's value places (an `any`).
func TestReceiptSecretsByValue(t *testing.T) {
	type out struct {
		Extra any `json:"extra"`
	}
	const key = "RECEIPT-SECRET-VALUE"
	w := toolset.Write("w", "Write.", func(context.Context, *guard.Invocation, in) (out, error) {
		return out{Extra: account{Name: "n", Key: key}}, nil
	}, &toolset.Options[in, out]{Receipt: func(context.Context, *guard.Invocation) (out, bool, error) {
		return out{Extra: []any{account{Name: "n", Key: key}}}, true, nil
	}})
	g, _ := newGuard(t, toolset.MustNew(w), guard.Options{SecretKey: secretKey})
	p := guard.Principal{TenantID: "t1", SubjectID: "u1"}
	st, err := g.QueryStatus(context.Background(), guard.StatusCall{Principal: p, OperationID: "op", Tool: "w",
		Context: guard.ExecutionContext{CallID: "s1", IdempotencyKey: "k"}})
	if err != nil {
		t.Fatal(err)
	}
	h, _ := guard.SecretHash(secretKey, key)
	if st.Code != guard.CodeOK || strings.Contains(string(st.Data), key) || !strings.Contains(string(st.Data), guard.SecretPlaceholder(h)) {
		t.Errorf("status from the receipt: %s %s", st.Code, st.Data)
	}
}
