package main

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/toolguard/toolguard/internal/browsertest"
)

// The example end to end in a real browser: the run parks, a person opens
// the inbox, reviews the request and approves it, and the run resumes by
// itself and drafts the refund once.
func TestApproveInBrowser(t *testing.T) {
	out := decideInBrowser(t, "button.approve", "inbox-approved.png", "checked the order: a duplicate", "")
	for _, want := range []string{
		`approval:  create_refund_draft {"order_ref":"ORDER-7","reason":"duplicate"} needs a human's yes`,
		"inbox:     the run is parked; open http://",
		`guard:     create_refund_draft OK (delivery fresh, recovery none) {"draft_id":"DRAFT-1"`,
		"assistant: Done: refund draft DRAFT-1 for ORDER-7 (duplicate) is created.",
		"status completed",
		"drafts:    1 created downstream",
		"approvals: approved create_refund_draft for user-1 by lead-1",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("transcript lacks %q:\n%s", want, out)
		}
	}
}

// Denied: the model is told once, asks again, is denied without the person
// being asked again, and the run ends with no draft.
func TestDenyInBrowser(t *testing.T) {
	const note = "customer already refunded by phone"
	out := decideInBrowser(t, "button.deny", "inbox-denied.png", note, "this order was refunded another way")
	for _, want := range []string{
		"approvals: denied create_refund_draft for user-1 by lead-1",
		"approval:  create_refund_draft denied by the human's earlier answer in this run",
		"guard:     create_refund_draft APPROVAL_REQUIRED (delivery fresh, recovery request_approval): A human declined this action (this order was refunded another way).",
		"drafts:    0 created downstream",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("transcript lacks %q:\n%s", want, out)
		}
	}
	// The internal note is the team's: it never reaches the model, whose
	// every input and output the transcript shows.
	if strings.Contains(out, note) {
		t.Errorf("the internal note reached the transcript:\n%s", out)
	}
}

// decideInBrowser runs the example, opens its inbox in Chromium, reviews
// the one request, clicks button, waits for the run to end and returns its
// output.
func decideInBrowser(t *testing.T, button, shot, note, message string) string {
	t.Setenv("OPENAI_API_KEY", "")
	t.Setenv("TOOLGUARD_REDIS_URL", "")
	t.Setenv("REDIS_URL", "")
	bctx := browsertest.Browser(t, 2*time.Minute)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	urls := make(chan string, 1)
	done := make(chan error, 1)
	var out strings.Builder
	go func() {
		done <- run(ctx, &out, config{ln: browsertest.Listen(t), onURL: func(u string) { urls <- u }, exit: true})
	}()
	url := <-urls
	// The run parks soon after the inbox is up: look until its request
	// is listed.
	for i := 0; ; i++ {
		if err := chromedp.Do(bctx, chromedp.Navigate(url)); err != nil {
			t.Fatal(err)
		}
		n, err := chromedp.Run(bctx, chromedp.Evaluate[int](`document.querySelectorAll("a.review").length`))
		if err != nil {
			t.Fatal(err)
		}
		if n == 1 {
			break
		}
		if i == 50 {
			t.Fatal("no request listed in the inbox")
		}
		time.Sleep(100 * time.Millisecond)
	}
	list, err := chromedp.Run(bctx, chromedp.Text(chromedp.CSS("main")))
	if err != nil {
		t.Fatal(err)
	}
	// The list says what the action is, in the tool's own words, and
	// labels each argument with its description.
	if !strings.Contains(list, "Create a refund draft") || !strings.Contains(list, "ORDER-7") || !strings.Contains(list, "user-1") {
		t.Fatalf("inbox list:\n%s", list)
	}
	browsertest.Screenshot(t, bctx, "inbox-list.png")
	if err := chromedp.Do(bctx, chromedp.Click(chromedp.CSS("a.review")), chromedp.WaitVisible(chromedp.CSS(button))); err != nil {
		t.Fatal(err)
	}
	type page struct {
		Main, Resource    string
		FingerprintHidden bool
		NoteLabel, Msg    string
	}
	got, err := chromedp.Run(bctx, chromedp.Evaluate[page](`({
		Main: document.querySelector("main").innerText,
		Resource: (document.querySelector("#resource") || {parentElement: {innerText: ""}}).parentElement.innerText,
		FingerprintHidden: [...document.querySelectorAll("details")].every(d => !d.open) &&
			document.querySelector("details").textContent.indexOf("fingerprint") >= 0 &&
			document.querySelector("details").innerText.indexOf("sha256") < 0 &&
			document.querySelector("details").getBoundingClientRect().height < 40,
		NoteLabel: document.querySelector("label[for=note]").innerText,
		Msg: document.querySelector("label[for=message]").innerText,
	})`))
	if err != nil {
		t.Fatal(err)
	}
	// The host's details of the order, the tool's description, argument
	// descriptions as labels, the fingerprint behind a disclosure, and two
	// fields no one mistakes for each other.
	for _, want := range []string{"Order status\npaid", "Customer\nuser-1"} {
		if !strings.Contains(got.Resource, want) {
			t.Errorf("the order's details lack %q:\n%s", want, got.Resource)
		}
	}
	if !strings.Contains(got.Main, "Create a refund draft") || !strings.Contains(got.Main, "The order to refund.") || strings.Contains(got.Main, "Intent fingerprint\nsha256") {
		t.Errorf("request page:\n%s", got.Main)
	}
	if !got.FingerprintHidden {
		t.Error("the fingerprint is not behind a closed disclosure")
	}
	if !strings.Contains(got.NoteLabel, "never sent to the agent") || !strings.Contains(got.Msg, "The agent reads this") {
		t.Errorf("the two fields are labelled %q and %q", got.NoteLabel, got.Msg)
	}
	browsertest.Screenshot(t, bctx, "inbox-request.png")
	step(t, bctx, "type a note", chromedp.SetValue(chromedp.CSS("#note"), note))
	if message != "" {
		step(t, bctx, "type a message", chromedp.SetValue(chromedp.CSS("#message"), message))
	}
	step(t, bctx, "click "+button, chromedp.Click(chromedp.CSS(button)))
	step(t, bctx, "see the decision", chromedp.WaitVisible(chromedp.CSS(".note.ok")))
	decided, err := chromedp.Run(bctx, chromedp.Text(chromedp.CSS("main")))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(decided, "Internal note\n"+note) || message != "" && !strings.Contains(decided, "Told to the agent\n"+message) {
		t.Errorf("the decided request:\n%s", decided)
	}
	browsertest.Screenshot(t, bctx, shot)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("%v\n%s", err, out.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the run did not end after the decision")
	}
	return out.String()
}

// Past the run's end the example keeps serving its inbox (until
// interrupted), and the list shows the decided request's outcome.
func TestServesAfterTheRun(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "")
	t.Setenv("TOOLGUARD_REDIS_URL", "")
	t.Setenv("REDIS_URL", "")
	bctx := browsertest.Browser(t, 2*time.Minute)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	urls := make(chan string, 1)
	done := make(chan error, 1)
	out := &syncBuffer{}
	go func() {
		done <- run(ctx, out, config{ln: browsertest.Listen(t), onURL: func(u string) { urls <- u }})
	}()
	url := <-urls
	var id string
	for i := 0; id == "" && i < 50; i++ {
		time.Sleep(100 * time.Millisecond)
		if err := chromedp.Do(bctx, chromedp.Navigate(url)); err != nil {
			t.Fatal(err)
		}
		id, _ = chromedp.Run(bctx, chromedp.Evaluate[string](`(document.querySelector("a.review") || {}).getAttribute?.("href") || ""`))
	}
	if id == "" {
		t.Fatal("no request listed")
	}
	step(t, bctx, "open", chromedp.Click(chromedp.CSS("a.review")))
	step(t, bctx, "approve", chromedp.Click(chromedp.CSS("button.approve")))
	for i := 0; !strings.Contains(out.String(), "still serving"); i++ {
		if i == 100 {
			t.Fatalf("the example did not say it keeps serving:\n%s", out.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := chromedp.Do(bctx, chromedp.Navigate(url)); err != nil {
		t.Fatal(err)
	}
	list, err := chromedp.Run(bctx, chromedp.Text(chromedp.CSS("main")))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(list, "Decided recently") || !strings.Contains(list, "approved by lead-1") || !strings.Contains(list, "Nothing waits") {
		t.Errorf("the list after the run:\n%s", list)
	}
	browsertest.Screenshot(t, bctx, "inbox-decided-list.png")
	select {
	case err := <-done:
		t.Fatalf("the example ended with the run: %v", err)
	default:
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("interrupted: %v", err)
	}
}

// syncBuffer is a strings.Builder safe for the example's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// step runs one browser action with its own deadline, naming it on failure.
func step(t *testing.T, bctx context.Context, what string, a chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(bctx, 15*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, a); err != nil {
		browsertest.Screenshot(t, bctx, "failed.png")
		t.Fatalf("%s: %v", what, err)
	}
}
