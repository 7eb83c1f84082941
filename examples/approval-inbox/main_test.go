package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/toolguard/toolguard/internal/browsertest"
)

// The example end to end in a real browser: the run parks, a person opens
// the inbox, reviews the request and approves it, and the run resumes by
// itself and drafts the refund once.
func TestApproveInBrowser(t *testing.T) {
	out := decideInBrowser(t, "button.approve", "approved-request.png")
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
	out := decideInBrowser(t, "button.deny", "denied-request.png")
	for _, want := range []string{
		"approvals: denied create_refund_draft for user-1 by lead-1",
		"approval:  create_refund_draft denied by the human's earlier answer in this run",
		"assistant: I could not draft the refund: APPROVAL_REQUIRED.",
		"drafts:    0 created downstream",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("transcript lacks %q:\n%s", want, out)
		}
	}
}

// decideInBrowser runs the example, opens its inbox in Chromium, reviews
// the one request, clicks button, waits for the run to end and returns its
// output.
func decideInBrowser(t *testing.T, button, shot string) string {
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
		done <- run(ctx, &out, config{ln: browsertest.Listen(t), onURL: func(u string) { urls <- u }})
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
	if !strings.Contains(list, "create_refund_draft") || !strings.Contains(list, "ORDER-7") || !strings.Contains(list, "user-1") {
		t.Fatalf("inbox list:\n%s", list)
	}
	browsertest.Screenshot(t, bctx, "inbox-list.png")
	if err := chromedp.Do(bctx, chromedp.Click(chromedp.CSS("a.review")), chromedp.WaitVisible(chromedp.CSS(button))); err != nil {
		t.Fatal(err)
	}
	browsertest.Screenshot(t, bctx, "inbox-request.png")
	step(t, bctx, "type a reason", chromedp.SetValue(chromedp.CSS("#reason"), "checked with the customer"))
	step(t, bctx, "click "+button, chromedp.Click(chromedp.CSS(button)))
	step(t, bctx, "see the decision", chromedp.WaitVisible(chromedp.CSS(".note.ok")))
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
