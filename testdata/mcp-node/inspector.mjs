// The MCP Inspector's CLI (npm @modelcontextprotocol/inspector, pinned in
// package-lock.json), a client no one here wrote, against
// examples/mcp-server over streamable HTTP as an OAuth resource server of
// the local authorization server (authserver.mjs):
//
//   node inspector.mjs SERVER_BINARY [HTTP_PORT [AUTH_PORT]]
//
// With a JWT the authorization server issued for the server's resource,
// the Inspector lists the tools and calls get_order and the status tool
// (tool left out, as its listed schema allows); without one, and told not
// to log in (--stored-auth-only), it is refused. Each Inspector run has a
// home of its own, removed afterwards. Exits non-zero on the first failed
// check.
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import assert from 'node:assert/strict';
import { startMCPServer } from './server.mjs';
import { startAuthServer } from './authserver.mjs';

const [bin, portArg, authPortArg] = process.argv.slice(2);
if (!bin) {
  console.error('usage: node inspector.mjs SERVER_BINARY [HTTP_PORT [AUTH_PORT]]');
  process.exit(2);
}
const port = Number(portArg || 19163);
const authPort = Number(authPortArg || port + 1);
let checks = 0;
const check = (what, fn) => { fn(); checks++; console.log(`ok  ${what}`); };

const startServer = (as) => startMCPServer(bin, ['-http', `127.0.0.1:${port}`, '-issuer', as.issuer, '-jwks', as.jwksUrl]);

// inspector runs the Inspector CLI with args and resolves with its exit
// code, standard output and standard error, and the result it wrote to its
// --output file (the whole result, also of a tool whose result is isError,
// for which the CLI exits 5 and prints only an error envelope).
function inspector(args) {
  const home = mkdtempSync(join(tmpdir(), 'inspector-home-'));
  const out = join(home, 'result.json');
  return new Promise((resolve) => {
    execFile('npx', ['--no-install', '@modelcontextprotocol/inspector', '--cli', ...args, '--output', out],
      { env: { ...process.env, HOME: home, MCP_CATALOG_PATH: join(home, 'mcp.json'), npm_config_update_notifier: 'false' }, timeout: 60000 },
      (err, stdout, stderr) => {
        let result;
        try {
          result = JSON.parse(readFileSync(out, 'utf8'));
        } catch {
          result = undefined;
        }
        rmSync(home, { recursive: true, force: true });
        resolve({ code: err ? (err.code ?? 1) : 0, stdout, stderr, result });
      });
  });
}

// json returns the result of a run that exited code (0: success, 5: a tool
// result with isError).
function json(run, code = 0) {
  assert.equal(run.code, code, `inspector exited ${run.code}: ${run.stdout} ${run.stderr}`);
  assert.ok(run.result, run.stdout);
  return run.result;
}

const as = await startAuthServer(authPort);
const { proc, url } = await startServer(as);
try {
  const token = as.sign(as.claims(url, 'orders:read orders:refund'));
  const auth = ['--transport', 'http', '--header', `Authorization: Bearer ${token}`, '--format', 'json'];

  const list = json(await inspector(['--server-url', url, ...auth, '--method', 'tools/list']));
  check('inspector: tools/list with a token', () => {
    const names = list.tools.map((t) => t.name).sort();
    assert.deepEqual(names, ['create_refund_draft', 'get_order', 'query_operation_status']);
    const status = list.tools.find((t) => t.name === 'query_operation_status');
    assert.deepEqual(status.inputSchema.required, ['operation_id']);
  });

  const got = json(await inspector(['--server-url', url, ...auth, '--method', 'tools/call', '--tool-name', 'get_order', '--tool-arg', 'order_ref=ORDER-7']));
  check('inspector: tools/call get_order with a token', () => {
    assert.equal(got.structuredContent.code, 'OK', JSON.stringify(got));
    assert.deepEqual(got.structuredContent.data, { order_ref: 'ORDER-7', status: 'paid' });
  });

  const st = json(await inspector(['--server-url', url, ...auth, '--method', 'tools/call', '--tool-name', 'query_operation_status', '--tool-arg', 'operation_id=op-never']), 5);
  check('inspector: the status tool with operation_id alone is NOT_FOUND, not INVALID_ARGUMENTS', () => {
    assert.equal(st.structuredContent.code, 'NOT_FOUND', JSON.stringify(st));
  });

  const none = await inspector(['--server-url', url, '--transport', 'http', '--stored-auth-only', '--format', 'json', '--method', 'tools/list']);
  check('inspector: without a token, not logging in, it is refused', () => {
    assert.notEqual(none.code, 0, none.stdout);
    assert.doesNotMatch(none.stdout, /get_order/);
    assert.match(none.stdout + none.stderr, /auth_required/, `${none.stdout} ${none.stderr}`);
  });
  console.log(`mcp-inspector: all ${checks} checks passed`);
} catch (err) {
  console.error('mcp-inspector: FAILED:', err);
  process.exitCode = 1;
} finally {
  proc.kill('SIGINT');
  await as.close();
}
