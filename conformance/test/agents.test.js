// Claude Code and Codex, unmodified, against a real gateway: (a) a plain
// turn with the agent's default model name served through a combo of that
// name, (b) a turn with --model demo, (c) a tool loop in which the fake
// upstream asks for one shell call and then answers. Agents only ever see
// 127.0.0.1: a temporary HOME / CODEX_HOME, telemetry, updates and
// non-essential traffic switched off.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Env, repo, toolMarker, doneText } from './harness.js';

// The default model ids of the pinned agent versions (package.json).
const claudeDefault = 'claude-opus-5-5';
const codexDefault = 'gpt-6.2-sol';
const fakeText = 'Hello from fake upstream';
const bin = (name) => join(repo, 'conformance', 'node_modules', '.bin', name);

let env;
before(async () => {
  // Assigned before up() so a failed start is still torn down by after().
  env = new Env();
  await env.up();
  await env.combo(claudeDefault, 'fakeant', claudeDefault);
  await env.combo(codexDefault, 'fakeoa', codexDefault);
  await env.combo('demo', 'fakeoa', 'demo-model');
  await env.combo('tool-loop', 'fakeant', 'tool-loop');
  await env.combo('tool-loop-oa', 'fakeoa', 'tool-loop');
});
after(async () => { await env?.down(); });

function claude(args) {
  const home = mkdtempSync(join(tmpdir(), 'sy-claude-home-'));
  const r = spawnSync(bin('claude'), ['-p', ...args, '--output-format', 'json'], {
    cwd: home, encoding: 'utf8', timeout: 180000, input: '',
    env: { PATH: process.env.PATH, HOME: home, ANTHROPIC_BASE_URL: env.url, ANTHROPIC_AUTH_TOKEN: env.key,
      DISABLE_TELEMETRY: '1', CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1', DISABLE_AUTOUPDATER: '1',
      DISABLE_ERROR_REPORTING: '1', DISABLE_BUG_COMMAND: '1' },
  });
  rmSync(home, { recursive: true, force: true });
  assert.equal(r.status, 0, `claude exited ${r.status}: ${r.stdout}\n${r.stderr}`);
  return JSON.parse(r.stdout);
}

function codex(args) {
  const home = mkdtempSync(join(tmpdir(), 'sy-codex-home-'));
  writeFileSync(join(home, 'config.toml'), [
    'model_provider = "switchyard"',
    'check_for_update_on_startup = false',
    '[model_providers.switchyard]',
    'name = "Switchyard"',
    `base_url = "${env.url}/v1"`,
    'env_key = "SWITCHYARD_API_KEY"',
    'wire_api = "responses"',
    '',
  ].join('\n'));
  const r = spawnSync(bin('codex'), ['exec', '--skip-git-repo-check', '--json', ...args], {
    cwd: home, encoding: 'utf8', timeout: 180000, input: '',
    env: { PATH: process.env.PATH, HOME: home, CODEX_HOME: home, SWITCHYARD_API_KEY: env.key },
  });
  rmSync(home, { recursive: true, force: true });
  assert.equal(r.status, 0, `codex exited ${r.status}: ${r.stdout}\n${r.stderr}`);
  return r.stdout.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l));
}

const agentText = (events) => events.filter((e) => e.type === 'item.completed' && e.item?.type === 'agent_message').map((e) => e.item.text).join('');

test('Claude Code: plain turn with its default model through a combo of that name', async () => {
  await env.reset();
  const out = claude(['Say hello']);
  assert.equal(out.is_error, false, JSON.stringify(out));
  assert.equal(out.result, fakeText);
  const hits = (await env.hits()).filter((h) => h.path === '/v1/messages');
  assert.ok(hits.length >= 1 && hits.every((h) => h.model === claudeDefault && h.status === 200), JSON.stringify(hits));
});

test('Claude Code: --model demo (translated to an OpenAI-format upstream)', async () => {
  await env.reset();
  const out = claude(['Say hello', '--model', 'demo']);
  assert.equal(out.is_error, false, JSON.stringify(out));
  assert.equal(out.result, fakeText);
  const hits = await env.hits();
  assert.ok(hits.some((h) => h.path === '/v1/chat/completions' && h.model === 'demo-model' && h.status === 200), JSON.stringify(hits));
});

test('Claude Code: one shell tool call, then the answer', async () => {
  await env.reset();
  const out = claude(['Run the marker command with Bash, then report.', '--model', 'tool-loop', '--allowedTools', 'Bash']);
  assert.equal(out.is_error, false, JSON.stringify(out));
  assert.equal(out.result, doneText);
  const hits = (await env.hits()).filter((h) => h.model === 'tool-loop');
  assert.equal(hits.length, 2, JSON.stringify(hits));
  assert.ok(hits[0].tools.includes('Bash') && !hits[0].has_tool_result);
  assert.ok(hits[1].has_tool_result && hits[1].tool_result.includes(toolMarker), JSON.stringify(hits[1]));
});

test('Codex: plain turn with its default model through a combo of that name', async () => {
  await env.reset();
  const events = codex(['Say hello']);
  assert.equal(agentText(events), fakeText, JSON.stringify(events));
  assert.ok(events.some((e) => e.type === 'turn.completed'));
  const hits = await env.hits();
  assert.ok(hits.some((h) => h.path === '/v1/chat/completions' && h.model === codexDefault && h.status === 200), JSON.stringify(hits));
});

test('Codex: -m demo', async () => {
  await env.reset();
  const events = codex(['-m', 'demo', 'Say hello']);
  assert.equal(agentText(events), fakeText, JSON.stringify(events));
  const hits = await env.hits();
  assert.ok(hits.some((h) => h.model === 'demo-model' && h.status === 200), JSON.stringify(hits));
});

test('Codex: one shell tool call through the Responses API, then the answer', async () => {
  await env.reset();
  const events = codex(['-m', 'tool-loop-oa', '--dangerously-bypass-approvals-and-sandbox', 'Run the marker command, then report.']);
  const cmd = events.find((e) => e.type === 'item.completed' && e.item?.type === 'command_execution');
  assert.ok(cmd && cmd.item.exit_code === 0 && cmd.item.aggregated_output.includes(toolMarker), JSON.stringify(events));
  assert.equal(agentText(events), doneText);
  const hits = (await env.hits()).filter((h) => h.model === 'tool-loop');
  assert.equal(hits.length, 2, JSON.stringify(hits));
  assert.ok(!hits[0].has_tool_result);
  assert.ok(hits[1].has_tool_result && hits[1].tool_result.includes(toolMarker), JSON.stringify(hits[1]));
});
