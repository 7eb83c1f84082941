// An MCP client nobody here wrote: the official TypeScript SDK, against
// examples/mcp-server over stdio and over streamable HTTP.
//
//   node check.mjs SERVER_BINARY [HTTP_PORT]
//
// Over each transport it lists the tools, reads an order (structured result
// checked), reads another tenant's order (NOT_FOUND), drafts a refund that
// the script's elicitation handler approves once (it runs once; calling
// again with the same idempotency key replays without asking), and has a
// second refund declined; the same refund repeated three times without
// _meta, as this SDK sends calls, runs once and asks once (the session is
// the scope). Exits non-zero on the first failed check.
import { spawn } from 'node:child_process';
import assert from 'node:assert/strict';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';

const [bin, portArg] = process.argv.slice(2);
if (!bin) {
  console.error('usage: node check.mjs SERVER_BINARY [HTTP_PORT]');
  process.exit(2);
}
const port = Number(portArg || 19161);
let checks = 0;
const check = (what, fn) => { fn(); checks++; console.log(`ok  ${what}`); };

function newClient() {
  const client = new Client({ name: 'toolguard-node-check', version: '1.0.0' },
    { capabilities: { elicitation: {} } });
  const state = { asked: 0, answer: 'accept', messages: [] };
  client.setRequestHandler(ElicitRequestSchema, async (req) => {
    state.asked++;
    state.messages.push(req.params.message);
    if (state.answer === 'accept') return { action: 'accept', content: { approve: true } };
    return { action: state.answer };
  });
  return { client, state };
}

// modelResult returns the structured model result after checking that the
// text content and isError agree with it.
function modelResult(r) {
  const res = r.structuredContent;
  assert.ok(res, 'structuredContent present');
  assert.equal(res.contract, 'tool-model-result-v2');
  assert.deepEqual(JSON.parse(r.content[0].text), res, 'text content is the structured result');
  assert.equal(Boolean(r.isError), res.code !== 'OK', 'isError iff code is not OK');
  return res;
}

async function exercise(label, client, state) {
  const { tools } = await client.listTools();
  const byName = Object.fromEntries(tools.map((t) => [t.name, t]));
  check(`${label}: tools/list`, () => {
    for (const n of ['get_order', 'create_refund_draft', 'query_operation_status']) assert.ok(byName[n], `tool ${n}`);
    assert.deepEqual(byName.get_order.inputSchema.required, ['order_ref']);
    assert.equal(byName.get_order.outputSchema.properties.contract.const, 'tool-model-result-v2');
    assert.equal(byName.get_order.annotations.readOnlyHint, true);
    assert.equal(byName.create_refund_draft.annotations.readOnlyHint, false);
  });

  let res = modelResult(await client.callTool({ name: 'get_order', arguments: { order_ref: 'ORDER-7' } }));
  check(`${label}: get_order ORDER-7`, () => {
    assert.equal(res.code, 'OK');
    assert.deepEqual(res.data, { order_ref: 'ORDER-7', status: 'paid' });
  });
  res = modelResult(await client.callTool({ name: 'get_order', arguments: { order_ref: 'ORDER-9' } }));
  check(`${label}: another tenant's order is NOT_FOUND`, () => assert.equal(res.code, 'NOT_FOUND'));

  const key = `node-refund-${label}-${process.pid}`;
  const refund = { name: 'create_refund_draft', arguments: { order_ref: 'ORDER-7', reason: 'duplicate' },
    _meta: { 'toolguard/idempotency_key': key } };
  res = modelResult(await client.callTool(refund));
  const first = res;
  check(`${label}: refund approved by elicitation runs`, () => {
    assert.equal(res.code, 'OK', JSON.stringify(res));
    assert.equal(res.delivery, 'fresh');
    assert.equal(state.asked, 1);
    assert.match(state.messages[0], /create_refund_draft/);
    assert.match(state.messages[0], /"order_ref":"ORDER-7"/);
  });
  res = modelResult(await client.callTool(refund));
  check(`${label}: the same refund again replays, not asked again`, () => {
    assert.equal(res.code, 'OK');
    assert.equal(res.delivery, 'local_replay');
    assert.deepEqual(res.data, first.data);
    assert.equal(state.asked, 1);
  });

  // The same refund three times without _meta, as this SDK sends it: the
  // session is the scope, so it is one operation, approved once.
  const plain = { name: 'create_refund_draft', arguments: { order_ref: 'ORDER-7', reason: 'not_received' } };
  const repeats = [];
  for (let i = 0; i < 3; i++) repeats.push(modelResult(await client.callTool(plain)));
  check(`${label}: an approved refund repeated without _meta runs once, asked once`, () => {
    assert.deepEqual(repeats.map((r) => `${r.code}/${r.delivery}`), ['OK/fresh', 'OK/local_replay', 'OK/local_replay'],
      JSON.stringify(repeats));
    assert.ok(repeats[0].data.draft_id, JSON.stringify(repeats[0]));
    for (const r of repeats) assert.deepEqual(r.data, repeats[0].data, 'one draft');
    assert.notDeepEqual(repeats[0].data, first.data, 'another draft than the keyed refund');
    assert.equal(state.asked, 2);
  });

  state.answer = 'decline';
  res = modelResult(await client.callTool({ name: 'create_refund_draft', arguments: { order_ref: 'ORDER-7', reason: 'damaged' } }));
  check(`${label}: a declined refund is APPROVAL_REQUIRED, declined`, () => {
    assert.equal(res.code, 'APPROVAL_REQUIRED');
    assert.match(res.message, /declined/);
    assert.equal(state.asked, 3);
  });
}

async function overStdio() {
  const { client, state } = newClient();
  const transport = new StdioClientTransport({ command: bin, args: [], stderr: 'inherit' });
  await client.connect(transport);
  try {
    await exercise('stdio', client, state);
  } finally {
    await client.close();
  }
}

// startHTTP starts the server over HTTP and resolves with its URL and token
// once it says it listens.
function startHTTP() {
  const proc = spawn(bin, ['-http', `127.0.0.1:${port}`], { stdio: ['ignore', 'inherit', 'pipe'] });
  return new Promise((resolve, reject) => {
    let buf = '';
    const timer = setTimeout(() => reject(new Error(`server did not start: ${buf}`)), 30000);
    proc.on('exit', (code) => reject(new Error(`server exited ${code}: ${buf}`)));
    proc.stderr.on('data', (d) => {
      process.stderr.write(d);
      buf += d;
      const m = buf.match(/listening on (\S+) .* bearer token (\S+)/);
      if (m) {
        clearTimeout(timer);
        resolve({ proc, url: m[1], token: m[2] });
      }
    });
  });
}

async function overHTTP() {
  const { proc, url, token } = await startHTTP();
  try {
    const bad = new Client({ name: 'intruder', version: '1.0.0' });
    let refused = false;
    try {
      await bad.connect(new StreamableHTTPClientTransport(new URL(url),
        { requestInit: { headers: { Authorization: 'Bearer not-the-token' } } }));
    } catch {
      refused = true;
    }
    check('http: a wrong bearer token is refused', () => assert.ok(refused));

    const { client, state } = newClient();
    await client.connect(new StreamableHTTPClientTransport(new URL(url),
      { requestInit: { headers: { Authorization: `Bearer ${token}` } } }));
    try {
      await exercise('http', client, state);
    } finally {
      await client.close();
    }
  } finally {
    proc.kill('SIGINT');
  }
}

try {
  await overStdio();
  await overHTTP();
  console.log(`mcp-node: all ${checks} checks passed`);
} catch (err) {
  console.error('mcp-node: FAILED:', err);
  process.exit(1);
}
