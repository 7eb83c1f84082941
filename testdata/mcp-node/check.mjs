// An MCP client nobody here wrote: the official TypeScript SDK, against
// examples/mcp-server over stdio and over streamable HTTP.
//
//   node check.mjs SERVER_BINARY [HTTP_PORT [AUTH_PORT]]
//
// Over each transport it lists the tools, reads an order (structured result
// checked), reads another tenant's order (NOT_FOUND), drafts a refund that
// the script's elicitation handler approves once (it runs once; calling
// again with the same idempotency key replays without asking), and has a
// second refund declined; the same refund repeated three times without
// _meta, as this SDK sends calls, runs once and asks once (the session is
// the scope); the status tool takes what its listed schema allows.
//
// Over HTTP the server is an OAuth resource server of a local
// authorization server (authserver.mjs, on AUTH_PORT, default HTTP_PORT+1):
// without a token it answers 401, whose WWW-Authenticate leads to the
// metadata naming that authorization server; tokens for another audience,
// expired or of another issuer are refused; the SDK's own OAuth client
// (client_credentials) discovers the authorization server from the 401
// and gets a token for the server's resource; with a JWT the checks above
// pass; a token without orders:refund gets 403 insufficient_scope for a
// refund; the static development token (-token) is still accepted. Exits
// non-zero on the first failed check.
import assert from 'node:assert/strict';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { extractWWWAuthenticateParams, discoverOAuthProtectedResourceMetadata } from '@modelcontextprotocol/sdk/client/auth.js';
import { ClientCredentialsProvider } from '@modelcontextprotocol/sdk/client/auth-extensions.js';
import { startMCPServer } from './server.mjs';
import { modelResult } from './modelresult.mjs';
import { startAuthServer, CLIENT } from './authserver.mjs';

const [bin, portArg, authPortArg] = process.argv.slice(2);
if (!bin) {
  console.error('usage: node check.mjs SERVER_BINARY [HTTP_PORT [AUTH_PORT]]');
  process.exit(2);
}
const port = Number(portArg || 19161);
const authPort = Number(authPortArg || port + 1);
const devToken = `dev-${process.pid}`;
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

  // The status tool's listed schema is what the server validates: tool may
  // be left out (read as null), operation_id may not.
  const statusRes = [];
  for (const args of [{ operation_id: 'op-never' }, { operation_id: 'op-never', tool: null }, {}, { operation_id: 7 }]) {
    statusRes.push(modelResult(await client.callTool({ name: 'query_operation_status', arguments: args })).code);
  }
  check(`${label}: query_operation_status takes what its schema allows`, () => {
    assert.deepEqual(byName.query_operation_status.inputSchema.required, ['operation_id']);
    assert.deepEqual(statusRes, ['NOT_FOUND', 'NOT_FOUND', 'INVALID_ARGUMENTS', 'INVALID_ARGUMENTS']);
  });

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

// startHTTP starts the server over HTTP as a resource server of as (and
// with the development token).
const startHTTP = (as) => startMCPServer(bin,
  ['-http', `127.0.0.1:${port}`, '-issuer', as.issuer, '-jwks', as.jwksUrl, '-token', devToken]);

const withToken = (token) => ({ requestInit: { headers: { Authorization: `Bearer ${token}` } } });

// refused reports whether connecting with the transport options fails.
async function refused(url, opts) {
  const c = new Client({ name: 'intruder', version: '1.0.0' });
  try {
    await c.connect(new StreamableHTTPClientTransport(new URL(url), opts));
  } catch {
    return true;
  }
  await c.close();
  return false;
}

async function overHTTP() {
  const as = await startAuthServer(authPort);
  const { proc, url } = await startHTTP(as);
  try {
    // No token: 401, and the challenge leads to the metadata document.
    const resp = await fetch(url, { method: 'POST', headers: { 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'raw', version: '1' } } }) });
    const { resourceMetadataUrl } = extractWWWAuthenticateParams(resp);
    const meta = await discoverOAuthProtectedResourceMetadata(new URL(url), { resourceMetadataUrl });
    check('http: no token is 401, and its WWW-Authenticate leads to metadata naming the authorization server', () => {
      assert.equal(resp.status, 401);
      assert.equal(String(resourceMetadataUrl), new URL('/.well-known/oauth-protected-resource/mcp', url).href);
      assert.equal(meta.resource, url);
      assert.deepEqual(meta.authorization_servers, [as.issuer]);
      assert.deepEqual(meta.scopes_supported, ['orders:read', 'orders:refund']);
    });

    const all = 'orders:read orders:refund';
    const other = await startAuthServer(0); // another issuer's key, never published here
    const bad = {
      'a wrong bearer token': 'not-the-token',
      'another audience': as.sign(as.claims('http://127.0.0.1:1/mcp', all)),
      expired: as.sign(as.claims(url, all, { exp: Math.floor(Date.now() / 1000) - 60 })),
      'another issuer': as.sign(as.claims(url, all, { iss: 'http://127.0.0.1:2' })),
      'a key the issuer never published': other.sign(as.claims(url, all)),
    };
    await other.close();
    const results = {};
    for (const [what, token] of Object.entries(bad)) results[what] = await refused(url, withToken(token));
    check('http: a wrong token, and JWTs for another audience, expired, of another issuer or key, are refused', () => {
      for (const [what, r] of Object.entries(results)) assert.ok(r, `${what} was accepted`);
    });

    // The SDK's own OAuth client: 401, metadata, the authorization server's
    // metadata, a client_credentials token for the resource, then the call.
    const oauth = new Client({ name: 'oauth-client', version: '1.0.0' });
    await oauth.connect(new StreamableHTTPClientTransport(new URL(url), { authProvider: new ClientCredentialsProvider({
      clientId: CLIENT.id, clientSecret: CLIENT.secret, expectedIssuer: as.issuer }) }));
    const viaOAuth = modelResult(await oauth.callTool({ name: 'get_order', arguments: { order_ref: 'ORDER-7' } }));
    await oauth.close();
    check('http: the SDK\'s OAuth client finds the authorization server from the 401 and gets a token for this resource', () => {
      assert.equal(viaOAuth.code, 'OK', JSON.stringify(viaOAuth));
      assert.equal(as.issued.length, 1);
      assert.equal(as.issued[0].resource, url);
      assert.equal(as.issued[0].scope, all);
    });

    const { client, state } = newClient();
    await client.connect(new StreamableHTTPClientTransport(new URL(url), withToken(as.sign(as.claims(url, all)))));
    try {
      await exercise('http', client, state);
    } finally {
      await client.close();
    }

    // A token without orders:refund: the refund is 403 insufficient_scope.
    const reader = new Client({ name: 'reader', version: '1.0.0' });
    await reader.connect(new StreamableHTTPClientTransport(new URL(url), withToken(as.sign(as.claims(url, 'orders:read')))));
    let forbidden;
    try {
      await reader.callTool({ name: 'create_refund_draft', arguments: { order_ref: 'ORDER-7', reason: 'damaged' } });
    } catch (err) {
      forbidden = err;
    }
    const still = modelResult(await reader.callTool({ name: 'get_order', arguments: { order_ref: 'ORDER-7' } }));
    await reader.close();
    const raw = await fetch(url, { method: 'POST', headers: { 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream',
      Authorization: `Bearer ${as.sign(as.claims(url, 'orders:read'))}` },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'create_refund_draft', arguments: {} } }) });
    check('http: a token without orders:refund gets 403 insufficient_scope for a refund, and its session goes on', () => {
      assert.ok(forbidden, 'the refund was not refused');
      assert.equal(forbidden.code, 403, String(forbidden));
      assert.equal(still.code, 'OK');
      assert.equal(raw.status, 403);
      const www = raw.headers.get('www-authenticate');
      assert.match(www, /error="insufficient_scope"/);
      assert.match(www, /scope="orders:refund"/);
      assert.match(www, /resource_metadata="/);
    });

    const dev = new Client({ name: 'dev', version: '1.0.0' });
    await dev.connect(new StreamableHTTPClientTransport(new URL(url), withToken(devToken)));
    const devRes = modelResult(await dev.callTool({ name: 'get_order', arguments: { order_ref: 'ORDER-7' } }));
    await dev.close();
    check('http: the static development token (-token) is accepted too', () => assert.equal(devRes.code, 'OK'));
  } finally {
    proc.kill('SIGINT');
    await as.close();
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
