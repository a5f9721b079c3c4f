// The official `openai` and `@anthropic-ai/sdk` packages, unmodified, against
// a real gateway: chat JSON and stream, a tool-call round trip on both wire
// formats, Responses JSON and stream, embeddings, models.retrieve of a
// provider/model id, messages with a mid-conversation system entry,
// count_tokens, and the typed errors for 401, 404 and 429 (the SDK's own
// retry honouring Retry-After).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import { Env, toolMarker, doneText } from './harness.js';

const fakeText = 'Hello from fake upstream';
let env, oa, an;
before(async () => {
  // Assigned before up() so a failed start is still torn down by after().
  env = new Env();
  await env.up();
  oa = new OpenAI({ baseURL: env.url + '/v1', apiKey: env.key, maxRetries: 0 });
  an = new Anthropic({ baseURL: env.url, apiKey: env.key, maxRetries: 0 });
});
after(async () => { await env?.down(); });

const tools = [{ type: 'function', function: { name: 'Bash', description: 'Run a command', parameters: { type: 'object', properties: { command: { type: 'string' } } } } }];

test('openai: chat JSON and stream accumulation', async () => {
  const r = await oa.chat.completions.create({ model: 'fakeoa/m1', messages: [{ role: 'user', content: 'hi' }] });
  assert.equal(r.choices[0].message.content, fakeText);
  assert.equal(r.model, 'm1');
  const s = oa.chat.completions.stream({ model: 'fakeoa/m1', messages: [{ role: 'user', content: 'hi' }] });
  let deltas = 0;
  s.on('content', () => { deltas++; });
  const final = await s.finalChatCompletion();
  assert.equal(final.choices[0].message.content, fakeText);
  assert.equal(deltas, 3);
});

test('openai: tool-call round trip (openai-format upstream)', async () => {
  await env.reset();
  const first = await oa.chat.completions.create({ model: 'fakeoa/tool-loop', tools, messages: [{ role: 'user', content: 'run it' }] });
  const call = first.choices[0].message.tool_calls[0];
  assert.equal(first.choices[0].finish_reason, 'tool_calls');
  assert.equal(call.function.name, 'Bash');
  const second = await oa.chat.completions.create({ model: 'fakeoa/tool-loop', tools, messages: [
    { role: 'user', content: 'run it' }, first.choices[0].message,
    { role: 'tool', tool_call_id: call.id, content: toolMarker }] });
  assert.equal(second.choices[0].message.content, doneText);
  const hits = (await env.hits()).filter((h) => h.model === 'tool-loop');
  assert.ok(hits[1].has_tool_result && hits[1].tool_result === toolMarker, JSON.stringify(hits));
});

test('openai: Responses JSON and stream', async () => {
  const r = await oa.responses.create({ model: 'fakeoa/m1', input: 'hi' });
  assert.equal(r.output_text, fakeText);
  const s = oa.responses.stream({ model: 'fakeoa/m1', input: 'hi' });
  const final = await s.finalResponse();
  assert.equal(final.output_text, fakeText);
  assert.equal(final.status, 'completed');
});

test('openai: embeddings and models.retrieve of provider/model', async () => {
  const e = await oa.embeddings.create({ model: 'fakeoa/emb', input: ['a', 'b'] });
  assert.equal(e.data.length, 2);
  await env.combo('sdk-models', 'fakeoa', 'm1').catch(() => {});
  const list = await oa.models.list();
  const ids = [];
  for await (const m of list) ids.push(m.id);
  assert.ok(ids.includes('sdk-models'), ids.join(','));
  const m = await oa.models.retrieve('sdk-models');
  assert.equal(m.id, 'sdk-models');
  // The SDKs send provider%2Fmodel; the gateway decodes it.
  const pm = await oa.models.retrieve('openai/gpt-4o-mini');
  assert.equal(pm.id, 'openai/gpt-4o-mini');
  const am = await an.models.retrieve('openai/gpt-4o-mini');
  assert.equal(am.id, 'openai/gpt-4o-mini');
  assert.equal(am.type, 'model');
});

test('openai: typed errors 401, 404, 429 and the retry on Retry-After', async () => {
  const bad = new OpenAI({ baseURL: env.url + '/v1', apiKey: 'sk-sy-' + 'x'.repeat(43), maxRetries: 0 });
  await assert.rejects(bad.chat.completions.create({ model: 'fakeoa/m1', messages: [{ role: 'user', content: 'hi' }] }), OpenAI.AuthenticationError);
  await assert.rejects(oa.chat.completions.create({ model: 'nope-model', messages: [{ role: 'user', content: 'hi' }] }), OpenAI.NotFoundError);
  await env.reset();
  await assert.rejects(oa.chat.completions.create({ model: 'fakelim/limited', messages: [{ role: 'user', content: 'hi' }] }), OpenAI.RateLimitError);
  // With retries the SDK waits Retry-After (1 s) and asks again.
  const retrying = new OpenAI({ baseURL: env.url + '/v1', apiKey: env.key, maxRetries: 1 });
  await assert.rejects(retrying.chat.completions.create({ model: 'fakelim/limited', messages: [{ role: 'user', content: 'hi' }] }), OpenAI.APIError);
  const hits = (await env.hits()).filter((h) => h.model === 'limited');
  assert.ok(hits.length >= 2, `retry reached the upstream: ${hits.length} hits`);
});

test('anthropic: messages JSON and stream, mid-conversation system entry', async () => {
  const r = await an.messages.create({ model: 'fakeant/c1', max_tokens: 64, messages: [{ role: 'user', content: 'hi' }] });
  assert.equal(r.content[0].text, fakeText);
  const s = an.messages.stream({ model: 'fakeant/c1', max_tokens: 64, messages: [{ role: 'user', content: 'hi' }] });
  const final = await s.finalMessage();
  assert.equal(final.content[0].text, fakeText);
  for (const model of ['fakeant/c1', 'fakeoa/c1']) {
    const m = await an.messages.create({ model, max_tokens: 64, messages: [
      { role: 'user', content: 'hi' }, { role: 'assistant', content: 'hello' },
      { role: 'system', content: 'Be brief.' }, { role: 'user', content: 'again' }] },
    { headers: { 'anthropic-beta': 'mid-conversation-system-2026-04-07' } });
    assert.equal(m.content[0].text, fakeText, model);
  }
  await assert.rejects(an.messages.create({ model: 'fakeant/c1', max_tokens: 64, messages: [{ role: 'wizard', content: 'hi' }] }),
    (e) => e instanceof Anthropic.BadRequestError && e.error?.error?.message === 'Unexpected role "wizard" for input message role: expected user, assistant or system.');
});

test('anthropic: tool-call round trip (anthropic-format upstream) and count_tokens', async () => {
  await env.reset();
  const atools = [{ name: 'Bash', description: 'Run a command', input_schema: { type: 'object', properties: { command: { type: 'string' } } } }];
  const first = await an.messages.create({ model: 'fakeant/tool-loop', max_tokens: 64, tools: atools, messages: [{ role: 'user', content: 'run it' }] });
  assert.equal(first.stop_reason, 'tool_use');
  const use = first.content.find((b) => b.type === 'tool_use');
  const second = await an.messages.create({ model: 'fakeant/tool-loop', max_tokens: 64, tools: atools, messages: [
    { role: 'user', content: 'run it' }, { role: 'assistant', content: first.content },
    { role: 'user', content: [{ type: 'tool_result', tool_use_id: use.id, content: toolMarker }] }] });
  assert.equal(second.content[0].text, doneText);
  const hits = (await env.hits()).filter((h) => h.model === 'tool-loop');
  assert.ok(hits[1].has_tool_result && hits[1].tool_result === toolMarker, JSON.stringify(hits));
  const up = await an.messages.countTokens({ model: 'fakeant/c1', messages: [{ role: 'user', content: 'count these words' }] });
  assert.ok(up.input_tokens > 0);
  const local = await an.messages.countTokens({ model: 'fakeoa/c1', messages: [{ role: 'user', content: 'count these words' }] }).withResponse();
  assert.ok(local.data.input_tokens > 0);
  assert.equal(local.response.headers.get('x-switchyard-warning'), 'token_count_estimated');
});

test('anthropic: typed errors 401, 404, 429', async () => {
  const bad = new Anthropic({ baseURL: env.url, apiKey: 'sk-sy-' + 'x'.repeat(43), maxRetries: 0 });
  await assert.rejects(bad.messages.create({ model: 'fakeant/c1', max_tokens: 8, messages: [{ role: 'user', content: 'hi' }] }), Anthropic.AuthenticationError);
  await assert.rejects(an.messages.create({ model: 'nope-model', max_tokens: 8, messages: [{ role: 'user', content: 'hi' }] }), Anthropic.NotFoundError);
  await assert.rejects(an.messages.create({ model: 'fakelimant/limited', max_tokens: 8, messages: [{ role: 'user', content: 'hi' }] }), Anthropic.RateLimitError);
});
