// Package browsertest runs tests in a real headless Chromium through the
// DevTools protocol (github.com/chromedp/chromedp). It finds Debian's
// chromium (or the binary named by TOOLGUARD_CHROMIUM) and skips the test,
// saying how to install one, when there is none. CI installs chromium
// (.ci/run). The package is meant to be imported from _test.go files only.
package browsertest

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/toolguard/toolguard/internal/redistest"
)

// EnvChromium names a variable holding the path of a Chromium binary to use
// instead of the one found on PATH.
const EnvChromium = "TOOLGUARD_CHROMIUM"

// Binary returns the Chromium to run, "" when there is none.
func Binary() string {
	if p := os.Getenv(EnvChromium); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// Browser starts a headless Chromium for the test and returns a context
// that drives one tab of it; both end with the test (or after timeout).
// It skips the test when no Chromium is installed.
func Browser(t *testing.T, timeout time.Duration) context.Context {
	t.Helper()
	bin := Binary()
	if bin == "" {
		redistest.Skip(t, "no chromium binary", "apt-get install -y chromium, or set "+EnvChromium+"; .ci/run installs it")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(bin),
		chromedp.NoSandbox, // CI runs as root, where Chromium's sandbox cannot start
		chromedp.DisableGPU,
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900),
	)
	ctx, cancelTimeout := context.WithTimeout(context.Background(), timeout)
	actx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	bctx, cancelBrowser := chromedp.NewContext(actx, chromedp.WithLogf(t.Logf))
	t.Cleanup(func() { cancelBrowser(); cancelAlloc(); cancelTimeout() })
	if err := chromedp.Do(bctx); err != nil {
		t.Fatalf("browsertest: starting %s: %v", bin, err)
	}
	return bctx
}

// Screenshot saves a PNG of the whole page under the test's artifact
// directory (TOOLGUARD_ARTIFACTS, default testdata/artifacts below the
// package) and returns its path.
func Screenshot(t *testing.T, ctx context.Context, name string) string {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("browsertest: screenshot: %v", err)
	}
	dir := os.Getenv("TOOLGUARD_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join("testdata", "artifacts")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)
	return path
}

// Listen listens on the first free loopback port of 19200–19279, the range
// these tests may use, and closes the listener when the test ends.
func Listen(t *testing.T) net.Listener {
	t.Helper()
	for port := 19200; port < 19280; port++ {
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err == nil {
			t.Cleanup(func() { _ = ln.Close() })
			return ln
		}
	}
	t.Fatal("browsertest: no free port in 127.0.0.1:19200-19279")
	return nil
}

// Serve serves h on a port of Listen and returns its base URL.
func Serve(t *testing.T, h http.Handler) string {
	t.Helper()
	ln := Listen(t)
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return "http://" + ln.Addr().String()
}
