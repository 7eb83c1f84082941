package approvals_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/toolguard/toolguard/approvals"
	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/host"
	"github.com/toolguard/toolguard/internal/browsertest"
	"github.com/toolguard/toolguard/internal/redistest"
	"github.com/toolguard/toolguard/toolset"
)

// NoteIn is the input of a tool whose note the approver may read.
type NoteIn struct {
	Note string `json:"note" jsonschema:"description=What to say."`
}

// hostile is a request whose shown argument tries every trick on the page.
var hostile = `<script>window.__pwned=1</script>"><img src=x onerror="window.__pwned=2">` +
	"\u202eevil\u202c zero\u200bwidth " + strings.Repeat("A", 100<<10)

// inboxFor serves an inbox on store that signs everyone in as p, and
// returns its URL.
func inboxFor(t *testing.T, store *approvals.Queue, p guard.Principal) string {
	t.Helper()
	in, err := approvals.NewInbox(approvals.InboxOptions{Queue: store,
		Authenticate: func(*http.Request) (guard.Principal, error) { return p, nil }})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/approvals/", http.StripPrefix("/approvals", in))
	return browsertest.Serve(t, mux) + "/approvals/"
}

// askHostile stores a request of tenant-a with the hostile note.
func askHostile(t *testing.T) (*approvals.Queue, *approvals.Request) {
	t.Helper()
	_, rdb := redistest.Mini(t)
	note := toolset.Write("send_note", "Send a note.", func(context.Context, *guard.Invocation, NoteIn) (string, error) { return "", nil },
		&toolset.Options[NoteIn, string]{NeedsApproval: true, LoggedArguments: []string{"note"}})
	store, err := approvals.NewQueue(rdb, approvals.Options{Tools: toolset.MustNew(note)})
	if err != nil {
		t.Fatal(err)
	}
	args, _ := json.Marshal(NoteIn{Note: hostile})
	r, err := store.Ask(ctxT(t), "run-1", host.ApprovalRequest{CallID: "c1", Tool: "send_note", Arguments: args,
		Principal: user1, Fingerprint: guard.Fingerprint("send_note", args), OperationID: "op-1"})
	if err != nil {
		t.Fatal(err)
	}
	return store, r
}

// Hostile arguments show as inert text: no element is made from them, no
// script runs, invisible characters are named, a long value is cut.
func TestInboxHostileArgumentsInBrowser(t *testing.T) {
	store, r := askHostile(t)
	base := inboxFor(t, store, leadA)
	bctx := browsertest.Browser(t, time.Minute)
	for _, page := range []string{base, base + "r/" + r.ID} {
		if err := chromedp.Do(bctx, chromedp.Navigate(page)); err != nil {
			t.Fatal(err)
		}
		type probe struct {
			Pwned         bool
			Scripts, Imgs int
			Text          string
			CCs           []string
		}
		got, err := chromedp.Run(bctx, chromedp.Evaluate[probe](`({
			Pwned: window.__pwned !== undefined,
			Scripts: document.scripts.length,
			Imgs: document.images.length,
			Text: document.querySelector("main").innerText,
			CCs: [...document.querySelectorAll(".cc")].map(e => e.textContent)})`))
		if err != nil {
			t.Fatal(err)
		}
		if got.Pwned || got.Scripts != 0 || got.Imgs != 0 {
			t.Fatalf("%s: script ran %v, %d scripts, %d images", page, got.Pwned, got.Scripts, got.Imgs)
		}
		if !strings.Contains(got.Text, `<script>window.__pwned=1</script>"><img src=x onerror="window.__pwned=2">`) {
			t.Fatalf("%s: the note is not shown as text:\n%.600s", page, got.Text)
		}
		if strings.Join(got.CCs, ",") != "U+202E,U+202C,U+200B" {
			t.Fatalf("%s: invisible characters shown as %v", page, got.CCs)
		}
		if !strings.Contains(got.Text, "more characters not shown") || len(got.Text) > 20000 {
			t.Fatalf("%s: the 100 KB value is not cut (%d bytes of text)", page, len(got.Text))
		}
	}
	browsertest.Screenshot(t, bctx, "hostile-request.png")
}

// A form POST without the page's CSRF token, or with another approver's,
// or from another site, is refused and decides nothing.
func TestInboxRefusesForgedPosts(t *testing.T) {
	store, r := askHostile(t)
	base := inboxFor(t, store, leadA)
	other := inboxFor(t, store, leadA2)
	page := func(u string) string {
		resp, err := http.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b strings.Builder
		_ = resp.Write(&b)
		return b.String()
	}
	token := func(html string) string {
		_, after, _ := strings.Cut(html, `name="csrf" value="`)
		tok, _, _ := strings.Cut(after, `"`)
		return tok
	}
	tokOther := token(page(other + "r/" + r.ID))
	if tokOther == "" {
		t.Fatal("no CSRF token in the page")
	}
	post := func(tok string, hdr map[string]string) int {
		req, _ := http.NewRequest("POST", base+"r/"+r.ID, strings.NewReader(url.Values{"csrf": {tok}, "decision": {"approve"}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for name, code := range map[string]int{
		"no token":              post("", nil),
		"forged token":          post("1700000000.AAAA", nil),
		"another's token":       post(tokOther, nil),
		"cross-site, own token": post(token(page(base+"r/"+r.ID)), map[string]string{"Sec-Fetch-Site": "cross-site"}),
	} {
		if code != http.StatusForbidden {
			t.Errorf("%s: %d, want 403", name, code)
		}
	}
	if got, _ := store.Get(ctxT(t), "tenant-a", r.ID); got.Status != approvals.StatusPending {
		t.Fatalf("a forged post decided: %s", got.Status)
	}
	if code := post(token(page(base+"r/"+r.ID)), nil); code != http.StatusSeeOther {
		t.Fatalf("the page's own form: %d", code)
	}
}

// An approver of tenant-b cannot see or decide tenant-a's request: 404,
// as for a request that does not exist.
func TestInboxOtherTenantIsNotFound(t *testing.T) {
	store, r := askHostile(t)
	b := inboxFor(t, store, leadB)
	get := func(u string) (int, string) {
		resp, err := http.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var sb strings.Builder
		_ = resp.Write(&sb)
		return resp.StatusCode, sb.String()
	}
	if code, body := get(b); code != 200 || strings.Contains(body, r.ID) || !strings.Contains(body, "Nothing waits") {
		t.Fatalf("tenant-b list: %d", code)
	}
	code1, body1 := get(b + "r/" + r.ID)
	code2, body2 := get(b + "r/apr_000000000000000000000000")
	if code1 != 404 || code2 != 404 || strings.Contains(body1, "send_note") || strings.Count(body1, "no such request") != strings.Count(body2, "no such request") {
		t.Fatalf("tenant-b page: %d %d", code1, code2)
	}
	if code, _ := get(b + "api/requests/" + r.ID); code != 404 {
		t.Fatalf("tenant-b API get: %d", code)
	}
	req, _ := http.NewRequest("POST", b+"api/requests/"+r.ID+"/decision", strings.NewReader(`{"approve":true}`))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 404 {
		t.Fatalf("tenant-b API decide: %d", resp.StatusCode)
	}
	if got, _ := store.Get(ctxT(t), "tenant-a", r.ID); got.Status != approvals.StatusPending {
		t.Fatalf("tenant-b decided: %s", got.Status)
	}
}

// The host's details show beside the request as text: markup in them is
// inert, only an http(s) URL becomes a link, and a hook that fails leaves
// the page usable, saying so. The tool's and arguments' descriptions label
// what the approver reads.
func TestInboxDetails(t *testing.T) {
	store, r := askHostile(t)
	var fail atomic.Bool
	in, err := approvals.NewInbox(approvals.InboxOptions{Queue: store,
		Authenticate: func(*http.Request) (guard.Principal, error) { return leadA, nil },
		Details: func(_ context.Context, req *approvals.Request) ([]approvals.Detail, error) {
			if fail.Load() {
				return nil, errors.New("order service down")
			}
			return []approvals.Detail{
				{Label: "Customer <b>", Text: `<img src=x onerror="window.__pwned=3">`, URL: "javascript:window.__pwned=4"},
				{Label: "Order", Text: "ORDER-7", URL: "https://shop.example/orders/ORDER-7"},
			}, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/approvals/", http.StripPrefix("/approvals", in))
	base := browsertest.Serve(t, mux) + "/approvals/"
	bctx := browsertest.Browser(t, time.Minute)
	if err := chromedp.Do(bctx, chromedp.Navigate(base+"r/"+r.ID)); err != nil {
		t.Fatal(err)
	}
	type probe struct {
		Pwned      bool
		Imgs       int
		Links      []string
		Text, Desc string
		Label      string
	}
	got, err := chromedp.Run(bctx, chromedp.Evaluate[probe](`({
		Pwned: !!window.__pwned,
		Imgs: document.querySelectorAll("main img").length,
		Links: [...document.querySelectorAll("#resource ~ dl a")].map(a => a.href),
		Text: document.querySelector("#resource").parentElement.innerText,
		Desc: document.querySelector(".desc").innerText,
		Label: document.querySelector("tbody th").innerText,
	})`))
	if err != nil {
		t.Fatal(err)
	}
	if got.Pwned || got.Imgs != 0 || len(got.Links) != 1 || got.Links[0] != "https://shop.example/orders/ORDER-7" {
		t.Errorf("details made elements: %+v", got)
	}
	if !strings.Contains(got.Text, "Customer <b>") || !strings.Contains(got.Text, `<img src=x onerror="window.__pwned=3">`) {
		t.Errorf("details text %q", got.Text)
	}
	if got.Desc != "Send a note." || !strings.HasPrefix(got.Label, "What to say.") {
		t.Errorf("description %q, argument label %q", got.Desc, got.Label)
	}
	fail.Store(true)
	if err := chromedp.Do(bctx, chromedp.Navigate(base+"r/"+r.ID)); err != nil {
		t.Fatal(err)
	}
	page, err := chromedp.Run(bctx, chromedp.Text(chromedp.CSS("main")))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(page, "could not be read just now") || !strings.Contains(page, "Approve") {
		t.Errorf("with the hook failing:\n%s", page)
	}
}
