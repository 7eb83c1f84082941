// modelResult returns the structured model result of a tools/call result
// (a toolguard server's tool-model-result-v2) after checking that the text
// content and isError agree with it.
import assert from 'node:assert/strict';

export function modelResult(r) {
  const res = r.structuredContent;
  assert.ok(res, 'structuredContent present');
  assert.equal(res.contract, 'tool-model-result-v2');
  assert.deepEqual(JSON.parse(r.content[0].text), res, 'text content is the structured result');
  assert.equal(Boolean(r.isError), res.code !== 'OK', 'isError iff code is not OK');
  return res;
}
