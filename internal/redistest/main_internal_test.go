package redistest

import (
	"strings"
	"testing"
)

// The package's skip line names every reason a test was skipped for, the
// browser's beside Redis's, each with how to run it instead.
func TestSkipReportNamesEveryReason(t *testing.T) {
	skips.Lock()
	saved, savedHints := skips.byReason, skips.hints
	skips.byReason, skips.hints = nil, nil
	skips.Unlock()
	t.Cleanup(func() {
		skips.Lock()
		skips.byReason, skips.hints = saved, savedHints
		skips.Unlock()
	})
	t.Run("redis", func(t *testing.T) { noteSkip(t, EnvURL+" not set", skipHint) })
	t.Run("browser", func(t *testing.T) { noteSkip(t, "no chromium binary", "apt-get install -y chromium") })
	line := skipReport()
	for _, want := range []string{"2 tests", EnvURL + " not set", "no chromium binary", skipHint, "apt-get install -y chromium",
		"TestSkipReportNamesEveryReason/browser", "TestSkipReportNamesEveryReason/redis"} {
		if !strings.Contains(line, want) {
			t.Errorf("skip line %q does not name %q", line, want)
		}
	}
}
