package redistest

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"golang.org/x/term"
)

// Main runs a package's tests; call it from TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(redistest.Main(m)) }
//
// When tests were skipped for want of a real Redis (or of redis-server to
// start one), it names them in one line, with the reason and how to run
// them: on standard error, which go test shows with -v or on failure, and,
// because plain "go test ./..." shows nothing of a package that passed, on
// the terminal go test was started from, if it has one (a CI job has none;
// scripts/test.sh counts and names skips from go test -json instead).
func Main(m *testing.M) int {
	code := m.Run()
	if line := skipReport(); line != "" {
		fmt.Fprint(os.Stderr, line)
		if !term.IsTerminal(int(os.Stdout.Fd())) { // go test in package list mode: output held back
			if tty, err := os.OpenFile("/dev/tty", os.O_WRONLY, 0); err == nil {
				_, _ = io.WriteString(tty, line)
				_ = tty.Close()
			}
		}
	}
	return code
}

// skips are the tests skipped for want of Redis or a browser, by reason,
// and how to run them instead, by reason.
var skips struct {
	sync.Mutex
	byReason map[string][]string
	hints    map[string]string
}

// noteSkip records that tb is skipped for reason, and hint says how to run
// it instead.
func noteSkip(tb testing.TB, reason, hint string) {
	skips.Lock()
	defer skips.Unlock()
	if skips.byReason == nil {
		skips.byReason, skips.hints = map[string][]string{}, map[string]string{}
	}
	skips.byReason[reason] = append(skips.byReason[reason], tb.Name())
	skips.hints[reason] = hint
}

// skipReport is the line Main prints, or "" when nothing was skipped.
func skipReport() string {
	skips.Lock()
	defer skips.Unlock()
	if len(skips.byReason) == 0 {
		return ""
	}
	var reasons, names, hints []string
	for r, ns := range skips.byReason {
		reasons = append(reasons, r)
		names = append(names, ns...)
		if h := skips.hints[r]; !slices.Contains(hints, h) {
			hints = append(hints, h)
		}
	}
	sort.Strings(reasons)
	sort.Strings(names)
	sort.Strings(hints)
	const shown = 5
	list := strings.Join(names[:min(shown, len(names))], ", ")
	if len(names) > shown {
		list += fmt.Sprintf(" and %d more", len(names)-shown)
	}
	pkg := strings.TrimSuffix(filepath.Base(os.Args[0]), ".test")
	return fmt.Sprintf("SKIP %s: %d tests (%s; %s): %s\n", pkg, len(names), strings.Join(reasons, ", "), strings.Join(hints, "; "), list)
}
