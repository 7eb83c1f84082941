package secretscan_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/toolguard/toolguard/guard"
	"github.com/toolguard/toolguard/secretscan"
	"github.com/toolguard/toolguard/toolset"
)

// ticket is one support ticket as an API returns it.
type ticket struct {
	ID        int64    `json:"id"`
	UUID      string   `json:"uuid"`
	Subject   string   `json:"subject"`
	Body      string   `json:"body"`
	Requester string   `json:"requester_email"`
	URL       string   `json:"url"`
	Commit    string   `json:"commit"`
	Created   string   `json:"created_at"`
	Amount    float64  `json:"amount"`
	Tags      []string `json:"tags"`
}

// ticketPage is a page of tickets.
type ticketPage struct {
	Tickets []ticket `json:"tickets"`
	Next    string   `json:"next_page"`
}

// ticketsJSON is a realistic tool output of about size bytes: a page of
// support tickets as an API returns them (ids, UUIDs, timestamps, emails,
// URLs, prose that mentions keys, tokens and passwords), with no secret.
func ticketsJSON(size int) []byte {
	var page ticketPage
	for i := 0; ; i++ {
		page.Tickets = append(page.Tickets, ticket{
			ID:        int64(48213977 + i),
			UUID:      fmt.Sprintf("6f1c2a7e-9b4d-4c1e-8f3a-%012x", 0x2d5b7c9e0a14+i*7919),
			Subject:   "Cannot rotate the API key after the password reset",
			Body:      "Hello, since yesterday the token refresh fails with 401 and the access key page shows an error. Order 4111111111111112, invoice INV-2025-000" + fmt.Sprint(i) + ". Thanks, Ada",
			Requester: fmt.Sprintf("user%d@example.com", i),
			URL:       fmt.Sprintf("https://support.example.com/api/v2/tickets/%d.json", 48213977+i),
			Commit:    fmt.Sprintf("a94a8fe5ccb19ba61c4c0873d391e987982f%04x", i),
			Created:   "2026-01-05T09:12:44Z",
			Amount:    129.90,
			Tags:      []string{"billing", "auth", "priority-high"},
		})
		if b, _ := json.Marshal(page); len(b) >= size {
			page.Next = "https://support.example.com/api/v2/tickets.json?page=3"
			b, _ = json.Marshal(page)
			return b
		}
	}
}

// jsonStrings returns the strings and numbers of raw, as the guard hands
// them to a Detector.
func jsonStrings(t testing.TB, raw []byte) []string {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.UseNumber()
	var tree any
	if err := dec.Decode(&tree); err != nil {
		t.Fatal(err)
	}
	return strs(tree, nil)
}

// strs collects the strings and numbers of a JSON value, as the guard
// hands them to a Detector.
func strs(v any, out []string) []string {
	switch t := v.(type) {
	case string:
		out = append(out, t)
	case json.Number:
		out = append(out, string(t))
	case map[string]any:
		for _, m := range t {
			out = strs(m, out)
		}
	case []any:
		for _, m := range t {
			out = strs(m, out)
		}
	}
	return out
}

// BenchmarkFind: the cost of a 4 KB tool output, per KB: "text" scans it
// as one text (the worst case, a tool that returns a document), "strings"
// scans each of its strings and numbers, as the guard does.
func BenchmarkFind(b *testing.B) {
	d, err := secretscan.New(secretscan.Options{})
	if err != nil {
		b.Fatal(err)
	}
	raw := ticketsJSON(4096)
	values := jsonStrings(b, raw)
	kb := float64(len(raw)) / 1024
	b.Run("text", func(b *testing.B) {
		text := string(raw)
		if got := d.Find(text); len(got) != 0 {
			b.Fatalf("found %q in an output with no secret", got)
		}
		b.SetBytes(int64(len(raw)))
		for b.Loop() {
			d.Find(text)
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/kb, "ns/KB")
	})
	b.Run("strings", func(b *testing.B) {
		b.SetBytes(int64(len(raw)))
		for b.Loop() {
			for _, s := range values {
				if got := d.Find(s); len(got) != 0 {
					b.Fatalf("found %q in %q", got, s)
				}
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/kb, "ns/KB")
	})
}

// BenchmarkDispatch: the cost bound, a read tool's dispatch
// (guard.MemStore) that returns a page of support tickets of 1 KB and of 100 KB,
// through a guard without a Detector and one with the default Detector,
// the two interleaved in one loop so that both see the same machine:
// plain-ns/op and detect-ns/op are each one dispatch, x is their ratio
// (the goal: at most 2 at 1 KB, 3 at 100 KB). find-ns/op is, in the same
// loop, one Find over the output's whole JSON text, and one-pass-x what
// x would be if detection cost that and nothing more (a guard that asks
// the Detector about the output's text once, and parses it only where
// something is found).
func BenchmarkDispatch(b *testing.B) {
	d, err := secretscan.New(secretscan.Options{})
	if err != nil {
		b.Fatal(err)
	}
	for _, size := range []int{1 << 10, 100 << 10} {
		b.Run(fmt.Sprintf("%dKB", size>>10), func(b *testing.B) {
			var out ticketPage
			if err := json.Unmarshal(ticketsJSON(size), &out); err != nil {
				b.Fatal(err)
			}
			tool := toolset.Read("list_tickets", "List support tickets.",
				func(context.Context, *guard.Invocation, ticketIn) (ticketPage, error) { return out, nil }, nil)
			set := toolset.MustNew(tool)
			plain := guard.New(set, guard.NewMemStore(guard.MemStoreOptions{}), guard.Options{})
			detect := guard.New(set, guard.NewMemStore(guard.MemStoreOptions{}), guard.Options{Detector: d})
			call := guard.Call{
				Principal: guard.Principal{TenantID: "t1", SubjectID: "agent"},
				Proposal:  guard.Proposal{Name: "list_tickets", Arguments: []byte(`{"id":"T-1"}`)},
			}
			run := func(g *guard.Guard, i int) time.Duration {
				c := call
				c.Context.CallID = "call-" + strconv.Itoa(i)
				start := time.Now()
				res, err := g.Dispatch(context.Background(), c)
				el := time.Since(start)
				if err != nil || res.Code != guard.CodeOK {
					b.Fatalf("%v %v", res, err)
				}
				return el
			}
			raw, err := json.Marshal(out)
			if err != nil {
				b.Fatal(err)
			}
			text := string(raw)
			if found := d.Find(text); len(found) > 0 {
				b.Fatalf("found %q in an output with no secret", found)
			}
			var tPlain, tDetect, tFind time.Duration
			i := 0
			for b.Loop() {
				tPlain += run(plain, i)
				tDetect += run(detect, i)
				start := time.Now()
				d.Find(text)
				tFind += time.Since(start)
				i++
			}
			b.ReportMetric(float64(tPlain.Nanoseconds())/float64(i), "plain-ns/op")
			b.ReportMetric(float64(tDetect.Nanoseconds())/float64(i), "detect-ns/op")
			b.ReportMetric(float64(tDetect)/float64(tPlain), "x")
			b.ReportMetric(float64(tFind.Nanoseconds())/float64(i), "find-ns/op")
			b.ReportMetric(float64(tPlain+tFind)/float64(tPlain), "one-pass-x")
		})
	}
}
