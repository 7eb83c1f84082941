package secretscan_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/toolguard/toolguard/secretscan"
)

// ticketsJSON is a realistic tool output of about size bytes: a page of
// support tickets as an API returns them (ids, UUIDs, timestamps, emails,
// URLs, prose that mentions keys, tokens and passwords), with no secret.
func ticketsJSON(size int) []byte {
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
	var page struct {
		Tickets []ticket `json:"tickets"`
		Next    string   `json:"next_page"`
	}
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
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.UseNumber()
	var tree any
	if err := dec.Decode(&tree); err != nil {
		b.Fatal(err)
	}
	values := strs(tree, nil)
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
