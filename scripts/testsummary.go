//go:build ignore

// testsummary reads `go test -json` on standard input and prints what a
// plain `go test` prints (a line per package, and the whole output of every
// test that failed), then a count of the tests that passed, failed and
// were skipped, with the skips grouped by their reason, so that skipped
// tests cannot pass unnoticed. It exits 1 when a test or a build failed.
//
//	go test -json ./... | go run scripts/testsummary.go
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"strings"
)

// event is one line of `go test -json` (cmd/test2json).
type event struct {
	Action  string
	Package string
	Test    string
	Output  string
}

// location is the "file_test.go:12: " that t.Log and t.Skip put before a
// message.
var location = regexp.MustCompile(`^\s+\S+\.go:\d+: `)

func main() {
	failed, err := summarize(os.Stdin, os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "testsummary:", err)
		os.Exit(2)
	}
	if failed {
		os.Exit(1)
	}
}

func summarize(r io.Reader, w io.Writer) (failed bool, err error) {
	output := map[string][]string{} // package + test -> its output lines
	counts := map[string]int{}      // pass, fail, skip
	reasons := map[string]int{}     // skip reason -> tests
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if json.Unmarshal(line, &e) != nil || e.Action == "" {
			fmt.Fprintln(w, string(line)) // not an event: e.g. a build error
			continue
		}
		key := e.Package + " " + e.Test
		switch {
		case e.Action == "build-output":
			fmt.Fprint(w, e.Output)
		case e.Action == "build-fail":
			failed = true
		case e.Action == "output" && e.Test != "":
			output[key] = append(output[key], e.Output)
		case e.Action == "output":
			// A package's own lines: keep its summary ("ok", "FAIL", "?")
			// and anything printed outside a test.
			if o := e.Output; o != "PASS\n" && o != "FAIL\n" && !strings.HasPrefix(o, "=== ") {
				fmt.Fprint(w, o)
			}
		case e.Test != "" && (e.Action == "pass" || e.Action == "fail" || e.Action == "skip"):
			counts[e.Action]++
			if e.Action == "fail" {
				failed = true
				fmt.Fprint(w, strings.Join(output[key], ""))
			}
			if e.Action == "skip" {
				reasons[skipReason(output[key])]++
			}
			delete(output, key)
		case e.Test == "" && e.Action == "fail":
			failed = true
		}
	}
	if err := sc.Err(); err != nil {
		return true, err
	}
	fmt.Fprintf(w, "\ntests and subtests: %d passed, %d failed, %d skipped\n", counts["pass"], counts["fail"], counts["skip"])
	type reason struct {
		text string
		n    int
	}
	var rs []reason
	for t, n := range reasons {
		rs = append(rs, reason{t, n})
	}
	sort.Slice(rs, func(i, j int) bool { return rs[i].n > rs[j].n || rs[i].n == rs[j].n && rs[i].text < rs[j].text })
	for _, r := range rs {
		fmt.Fprintf(w, "  skipped %5d: %s\n", r.n, r.text)
	}
	return failed, nil
}

// skipReason is the last logged message of a skipped test: its Skip
// message, without the file and line.
func skipReason(lines []string) string {
	for i := len(lines) - 1; i >= 0; i-- {
		if loc := location.FindString(lines[i]); loc != "" {
			return strings.TrimSpace(lines[i][len(loc):])
		}
	}
	return "(no reason given)"
}
