// The official TypeScript SDK's client, v2 (@modelcontextprotocol/client,
// pinned in package-lock.json: the first line of the official SDK that
// speaks protocol 2026-07-28 and multi round-trip requests; the 1.x line
// of @modelcontextprotocol/sdk stops at 2025-11-25), against a fleet of
// examples/mcp-server: two replicas over one Redis behind a round-robin
// balancer, which examples/mcp-server's TestFleetOfProcesses starts
// (with control endpoints beside the balancer):
//
//   node fleet.mjs MCP_URL CONTROL_URL TOKEN
//
// On 2026-07-28 (pinned), with the SDK's own multi round-trip driver and an
// elicitation handler that approves: a refund whose answer reaches the
// replica that did not ask runs once after one question; a refund whose
// asking replica is killed and started again before the answer (the
// handler asks the control endpoint to) runs once after one question; a
// refund with idempotencyKey (SEP-3182) runs once, the same key again
// replays without a question, and the key with other arguments is refused
// with idempotency_key_conflict. Exits non-zero on the first failed check.
import assert from 'node:assert/strict';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { modelResult } from './modelresult.mjs';

const [url, control, token] = process.argv.slice(2);
if (!token) {
  console.error('usage: node fleet.mjs MCP_URL CONTROL_URL TOKEN');
  process.exit(2);
}
let checks = 0;
const check = (what, fn) => { fn(); checks++; console.log(`ok  ${what}`); };

const state = async () => (await fetch(`${control}/state`)).json();

const human = { asked: 0, before: null };
const client = new Client({ name: 'toolguard-fleet-check', version: '1.0.0' }, {
  capabilities: { elicitation: { form: {} } },
  versionNegotiation: { mode: { pin: '2026-07-28' } },
});
client.setRequestHandler('elicitation/create', async () => {
  human.asked++;
  if (human.before) await human.before();
  return { action: 'accept', content: { approve: true } };
});

const refund = (reason, extra = {}) => client.callTool({ name: 'create_refund_draft', arguments: { order_ref: 'ORDER-7', reason }, ...extra });

try {
  await client.connect(new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers: { Authorization: `Bearer ${token}` } } }));

  let before = await state();
  let res = modelResult(await refund('duplicate'));
  let after = await state();
  check('2026-07-28: the answer reaches the replica that did not ask: one question, one execution', () => {
    assert.equal(res.code, 'OK', JSON.stringify(res));
    assert.equal(res.delivery, 'fresh');
    assert.equal(human.asked, 1);
    assert.equal(after.executions - before.executions, 1);
    const [q, a] = after.refunds.slice(-2);
    assert.ok(!q.Answered && a.Answered, JSON.stringify(after.refunds));
    assert.notEqual(q.Replica, a.Replica, 'question and answer on the same replica');
  });

  let restarted;
  human.before = async () => {
    restarted = await (await fetch(`${control}/restart-asker`, { method: 'POST' })).json();
  };
  before = await state();
  res = modelResult(await refund('damaged'));
  after = await state();
  human.before = null;
  check('2026-07-28: the asking replica killed and started again before the answer: one question, one execution', () => {
    assert.equal(res.code, 'OK', JSON.stringify(res));
    assert.ok(restarted && restarted.restarted >= 0, 'no replica was restarted');
    assert.equal(human.asked, 2);
    assert.equal(after.executions - before.executions, 1);
  });

  const key = `ts-fleet-${process.pid}`;
  before = await state();
  const first = modelResult(await refund('not_received', { idempotencyKey: key }));
  const again = modelResult(await refund('not_received', { idempotencyKey: key }));
  let conflict;
  try {
    await refund('duplicate', { idempotencyKey: key });
  } catch (err) {
    conflict = err;
  }
  after = await state();
  check('idempotencyKey: one question, one execution; the same key replays; other arguments conflict', () => {
    assert.equal(first.code, 'OK', JSON.stringify(first));
    assert.equal(first.delivery, 'fresh');
    assert.equal(again.delivery, 'local_replay');
    assert.deepEqual(again.data, first.data);
    assert.equal(human.asked, 3);
    assert.equal(after.executions - before.executions, 1);
    assert.ok(conflict, 'the conflicting call was not refused');
    assert.equal(conflict.data?.type, 'idempotency_key_conflict', String(conflict));
    assert.equal(conflict.data?.idempotencyKey, key);
  });
  await client.close();
  console.log(`mcp-fleet: all ${checks} checks passed`);
} catch (err) {
  console.error('mcp-fleet: FAILED:', err);
  process.exit(1);
}
