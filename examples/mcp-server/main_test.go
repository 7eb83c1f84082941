package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// nodeCheck is the directory of the Node client check.
const nodeCheck = "../../testdata/mcp-node"

// A client no one here wrote: the official TypeScript SDK (pinned in
// testdata/mcp-node/package-lock.json) runs check.mjs against this server,
// over stdio and over streamable HTTP (port 19185) as an OAuth resource
// server of check.mjs's local authorization server (port 19186): metadata
// from the 401, JWTs refused and accepted, the SDK's own OAuth client, a
// 403 for a missing scope, the status tool's schema. It needs node and the
// check's node_modules (`npm ci` in testdata/mcp-node); without them the
// test skips and says so. .ci/run installs both and runs the check itself.
func TestNodeClient(t *testing.T) {
	node := nodeModules(t, "sdk")
	bin := filepath.Join(t.TempDir(), "mcp-server")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	cmd := exec.Command(node, "check.mjs", bin, "19185", "19186")
	cmd.Dir = nodeCheck
	cmd.Env = append(os.Environ(), "TOOLGUARD_REDIS_URL=", "REDIS_URL=") // the embedded store
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "mcp-node: all 21 checks passed") {
		t.Fatalf("node check: %v\n%s", err, out)
	}
}

// nodeModules returns node's path, and skips the test unless node and
// testdata/mcp-node's @modelcontextprotocol/<pkg> are installed.
func nodeModules(t *testing.T, pkg string) string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed: install nodejs and npm, then run `npm ci` in testdata/mcp-node")
	}
	if _, err := os.Stat(filepath.Join(nodeCheck, "node_modules", "@modelcontextprotocol", pkg)); err != nil {
		t.Skip("testdata/mcp-node/node_modules is missing @modelcontextprotocol/" + pkg + ": run `npm ci` in testdata/mcp-node")
	}
	return node
}
