package main

import (
	"context"
	"strings"
	"testing"

	"github.com/alicebob/miniredis/v2"

	"github.com/toolguard/toolguard/internal/pgtest"
)

func TestRefundAgentApproved(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "")
	t.Setenv("TOOLGUARD_REDIS_URL", "")
	t.Setenv("REDIS_URL", "")
	var out strings.Builder
	if err := run(context.Background(), &out, nil, ptr(true), settings{}); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	for _, want := range []string{
		"approval:  create_refund_draft approved by flag -approve",
		`guard:     create_refund_draft OK (delivery fresh, recovery none) {"draft_id":"DRAFT-1"`,
		`guard:     create_refund_draft OK (delivery local_replay, recovery none) {"draft_id":"DRAFT-1"`,
		"assistant: Done: refund draft DRAFT-1 for ORDER-7 (duplicate) is created.",
		"drafts:    1 created downstream",
		"audit:     4 records, hash chain verified",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("transcript lacks %q:\n%s", want, s)
		}
	}
}

func TestRefundAgentDenied(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "")
	t.Setenv("TOOLGUARD_REDIS_URL", "")
	t.Setenv("REDIS_URL", "")
	var out strings.Builder
	if err := run(context.Background(), &out, nil, ptr(false), settings{}); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	if !strings.Contains(s, "drafts:    0 created downstream") || !strings.Contains(s, "denied by flag -approve") ||
		!strings.Contains(s, "assistant: I could not draft the refund: APPROVAL_REQUIRED") {
		t.Errorf("denied run:\n%s", s)
	}
}

func TestRefundAgentTerminal(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "")
	t.Setenv("TOOLGUARD_REDIS_URL", "")
	t.Setenv("REDIS_URL", "")
	var out strings.Builder
	if err := run(context.Background(), &out, strings.NewReader("y\n"), nil, settings{}); err != nil {
		t.Fatal(err)
	}
	if s := out.String(); !strings.Contains(s, "[y/N] ") || !strings.Contains(s, "drafts:    1 created downstream") {
		t.Errorf("terminal approval:\n%s", s)
	}
}

// TestRefundAgentRerunIsFresh runs the agent twice against one Redis, as a
// user re-running the example against a real server does: the second run is
// a run of its own (fresh call ids and run id), so it drafts again instead
// of replaying the first run's results, and its output agrees with itself.
// The first run finds the server through the REDIS_URL alias.
func TestRefundAgentRerunIsFresh(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "")
	mr := miniredis.RunT(t)
	url := "redis://" + mr.Addr() + "/0"
	runOnce := func(env string) string {
		t.Setenv("TOOLGUARD_REDIS_URL", "")
		t.Setenv("REDIS_URL", "")
		t.Setenv(env, url)
		var out strings.Builder
		if err := run(context.Background(), &out, nil, ptr(true), settings{}); err != nil {
			t.Fatal(err)
		}
		return out.String()
	}
	first, second := runOnce("REDIS_URL"), runOnce("TOOLGUARD_REDIS_URL")
	if !strings.Contains(first, "(from REDIS_URL)") || !strings.Contains(second, "(from TOOLGUARD_REDIS_URL)") {
		t.Errorf("store lines do not name the variable:\n%s\n%s", first, second)
	}
	for _, want := range []string{
		"guard:     get_order OK (delivery fresh, recovery none)",
		`guard:     create_refund_draft OK (delivery fresh, recovery none) {"draft_id":"DRAFT-1"`,
		"drafts:    1 created downstream",
		"audit:     8 records (4 from this run, 4 from earlier runs), hash chain verified",
	} {
		if !strings.Contains(second, want) {
			t.Errorf("second run lacks %q:\n%s", want, second)
		}
	}
	if runID := func(s string) string { _, r, _ := strings.Cut(s, "run:       "); return r[:20] }; runID(first) == runID(second) {
		t.Errorf("both runs have the run id %s", runID(first))
	}
}

// Every provider, streamed or not, prints the same transcript offline:
// DRAFT-1 created once, the repeated call replayed.
func TestRefundAgentEveryProvider(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "")
	t.Setenv("OPENAI_BASE_URL", "")
	t.Setenv("ANTHROPIC_API_KEY", "")
	t.Setenv("GEMINI_API_KEY", "")
	t.Setenv("GOOGLE_API_KEY", "")
	t.Setenv("TOOLGUARD_REDIS_URL", "")
	t.Setenv("REDIS_URL", "")
	var first string
	for _, p := range []string{"responses", "chat", "anthropic", "gemini"} {
		for _, stream := range []bool{false, true} {
			var out strings.Builder
			if err := run(context.Background(), &out, nil, ptr(true), settings{provider: p, stream: stream}); err != nil {
				t.Fatalf("%s stream %v: %v", p, stream, err)
			}
			s := out.String()
			for _, want := range []string{
				`guard:     create_refund_draft OK (delivery fresh, recovery none) {"draft_id":"DRAFT-1"`,
				`guard:     create_refund_draft OK (delivery local_replay, recovery none) {"draft_id":"DRAFT-1"`,
				"assistant: Done: refund draft DRAFT-1 for ORDER-7 (duplicate) is created.\n",
				"drafts:    1 created downstream",
			} {
				if !strings.Contains(s, want) {
					t.Errorf("%s stream %v lacks %q:\n%s", p, stream, want, s)
				}
			}
			// Past the provider line, the transcripts agree.
			_, body, _ := strings.Cut(s, "user:")
			body, _, _ = strings.Cut(body, "run:")
			want := first
			if p == "gemini" {
				// genai hands arguments over decoded: the model's member
				// order is not kept.
				want = strings.ReplaceAll(want, `{"reason":"duplicate","order_ref":"ORDER-7"}`, `{"order_ref":"ORDER-7","reason":"duplicate"}`)
			}
			if first == "" {
				first = body
			} else if body != want {
				t.Errorf("%s stream %v transcript differs:\n%s\nwant\n%s", p, stream, body, want)
			}
		}
	}
	var out strings.Builder
	if err := run(context.Background(), &out, nil, ptr(true), settings{provider: "bedrock"}); err == nil {
		t.Error("an unknown provider ran")
	}
}

func ptr(b bool) *bool { return &b }

// With no terminal and no -approve, nobody said yes: the draft is denied,
// and the program says why.
func TestRefundAgentDeniesByDefault(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "")
	t.Setenv("TOOLGUARD_REDIS_URL", "")
	t.Setenv("REDIS_URL", "")
	var out strings.Builder
	if err := run(context.Background(), &out, nil, nil, settings{}); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	if !strings.Contains(s, "no terminal and no -approve flag: denied by default") ||
		!strings.Contains(s, "drafts:    0 created downstream") {
		t.Errorf("default run:\n%s", s)
	}
}

// TestRefundAgentOnPostgres: the same run with its records in Postgres
// (-store postgres://…), no Redis.
func TestRefundAgentOnPostgres(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "")
	t.Setenv("TOOLGUARD_REDIS_URL", "")
	t.Setenv("REDIS_URL", "")
	var out strings.Builder
	if err := run(context.Background(), &out, nil, ptr(true), settings{store: pgtest.NewDB(t)}); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	for _, want := range []string{
		"store:     Postgres",
		`guard:     create_refund_draft OK (delivery fresh, recovery none) {"draft_id":"DRAFT-1"`,
		`guard:     create_refund_draft OK (delivery local_replay, recovery none) {"draft_id":"DRAFT-1"`,
		"drafts:    1 created downstream",
		"audit:     4 records, hash chain verified",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("transcript lacks %q:\n%s", want, s)
		}
	}
}
