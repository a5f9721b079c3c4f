// Starts a real Switchyard gateway and the fake upstream as child processes,
// configures them through the management API, and hands the tests what they
// need: the gateway URL, a client key and the fake upstream's hit log.
// Everything listens on 127.0.0.1; nothing here reaches the internet.
import { spawn, execFileSync } from 'node:child_process';
import { mkdtempSync, writeFileSync, rmSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createInterface } from 'node:readline';

const here = dirname(fileURLToPath(import.meta.url));
export const repo = resolve(here, '..', '..');
export const password = 'conformance password 1234';

// The shell tool names the agents offer; the fake asks for the first one a
// request lists (Claude Code: Bash; Codex: shell or exec_command).
export const toolMarker = 'sy-tool-ok-7f3a';
const shellCmd = `echo ${toolMarker}`;
const toolCall = {
  name: 'Bash',
  names: ['Bash', 'shell', 'exec_command', 'local_shell', 'run_shell_command'],
  arguments_for: {
    Bash: JSON.stringify({ command: shellCmd, description: 'Print a marker' }),
    shell: JSON.stringify({ command: ['bash', '-lc', shellCmd] }),
    exec_command: JSON.stringify({ cmd: shellCmd }),
    local_shell: JSON.stringify({ command: ['bash', '-lc', shellCmd] }),
    run_shell_command: JSON.stringify({ command: shellCmd }),
  },
};
export const doneText = 'The marker was printed.';

// Models the fake scripts: tool-loop asks for one shell call, then answers.
const script = {
  scripts: [
    { key: '*', model: 'tool-loop', steps: [{ tool_call: toolCall, content: doneText, events: 2 }] },
    { key: '*', model: 'limited', steps: [{ status: 429, retry_after: '1', error_message: 'Rate limit reached for limited. Please try again in 1s.' }] },
  ],
};

function binDir() {
  const dir = join(repo, 'conformance', '.bin');
  mkdirSync(dir, { recursive: true });
  return dir;
}

// build compiles the gateway and the fake upstream once per run.
let built = null;
function build() {
  if (built) return built;
  const dir = binDir();
  const env = { ...process.env, GOFLAGS: (process.env.GOFLAGS || '') + ' -mod=mod' };
  execFileSync('go', ['build', '-o', join(dir, 'switchyard'), '.'], { cwd: repo, stdio: 'inherit', env });
  execFileSync('go', ['build', '-o', join(dir, 'fakeupstream'), './cmd/fakeupstream'], { cwd: repo, stdio: 'inherit', env });
  built = { gateway: join(dir, 'switchyard'), fake: join(dir, 'fakeupstream') };
  return built;
}

// start runs cmd and resolves with the URL its first "listening on" line names.
function start(cmd, args, env, pattern) {
  return new Promise((resolvePromise, reject) => {
    const child = spawn(cmd, args, { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (d) => { stderr += d; if (stderr.length > 20000) stderr = stderr.slice(-10000); });
    const timer = setTimeout(() => { child.kill('SIGKILL'); reject(new Error(`${cmd} did not start: ${stderr}`)); }, 60000);
    const rl = createInterface({ input: child.stdout });
    rl.on('line', (line) => {
      const m = line.match(pattern);
      if (m) { clearTimeout(timer); resolvePromise({ child, url: m[1], stderr: () => stderr }); }
    });
    child.on('exit', (code) => { clearTimeout(timer); reject(new Error(`${cmd} exited ${code}: ${stderr}`)); });
  });
}

export class Env {
  async up() {
    const bins = build();
    this.tmp = mkdtempSync(join(tmpdir(), 'sy-conformance-'));
    const scriptPath = join(this.tmp, 'script.json');
    writeFileSync(scriptPath, JSON.stringify(script));
    this.fake = await start(bins.fake, ['--addr', '127.0.0.1:0', '--events', '3', '--script', scriptPath],
      { ...process.env }, /fakeupstream listening on (http:\/\/\S+)/);
    this.fakeURL = this.fake.url;
    const fakeAddr = new URL(this.fakeURL).host;
    this.gw = await start(bins.gateway, ['--addr', '127.0.0.1:0', '--data-dir', join(this.tmp, 'data')],
      { ...process.env, SWITCHYARD_ADMIN_PASSWORD: password, SWITCHYARD_PRIVATE_UPSTREAMS: fakeAddr },
      /listening on (http:\/\/\S+)/);
    this.url = this.gw.url;
    await this.login();
    // One openai-format and one anthropic-format provider on the fake; the
    // anthropic one is given the host root (no /v1), which must work.
    await this.api('POST', '/api/connections', { provider: 'fakeoa', custom: { wireFormat: 'openai', authClass: 'apikey' },
      name: 'fake openai', apiKey: 'fk-openai', baseUrl: this.fakeURL + '/v1' });
    await this.api('POST', '/api/connections', { provider: 'fakeant', custom: { wireFormat: 'anthropic', authClass: 'apikey' },
      name: 'fake anthropic', apiKey: 'fk-anthropic', baseUrl: this.fakeURL });
    // A catalogue provider on the fake, so /v1/models lists provider/model ids.
    await this.api('POST', '/api/connections', { provider: 'openai', name: 'fake as openai', apiKey: 'fk-catalogue', baseUrl: this.fakeURL + '/v1' });
    // A provider of its own for the 429 cases, so their cooldowns touch nothing else.
    await this.api('POST', '/api/connections', { provider: 'fakelim', custom: { wireFormat: 'openai', authClass: 'apikey' },
      name: 'fake limited', apiKey: 'fk-limited', baseUrl: this.fakeURL + '/v1' });
    await this.api('POST', '/api/connections', { provider: 'fakelimant', custom: { wireFormat: 'anthropic', authClass: 'apikey' },
      name: 'fake limited anthropic', apiKey: 'fk-limited-ant', baseUrl: this.fakeURL + '/v1' });
    // Turn off cooldown-aware waiting so error cases answer at once.
    await this.api('PATCH', '/api/resilience', { waitForCooldown: { enabled: false }, comboCooldownWait: { enabled: false } });
    const k = await this.api('POST', '/api/keys', { name: 'conformance' });
    this.key = k.secret;
    return this;
  }

  async combo(name, provider, model) {
    return this.api('POST', '/api/combos', { name, targets: [{ kind: 'model', provider, model }] });
  }

  async login() {
    const res = await fetch(this.url + '/login', { method: 'POST', redirect: 'manual',
      headers: { 'content-type': 'application/x-www-form-urlencoded', origin: this.url }, body: new URLSearchParams({ password }) });
    const cookie = res.headers.getSetCookie().map((c) => c.split(';')[0]).join('; ');
    if (!cookie) throw new Error(`login failed: ${res.status} ${await res.text()}`);
    this.cookie = cookie;
  }

  async api(method, path, body) {
    const res = await fetch(this.url + path, { method, headers: { cookie: this.cookie, 'content-type': 'application/json', origin: this.url },
      body: body === undefined ? undefined : JSON.stringify(body) });
    const text = await res.text();
    if (res.status >= 300) throw new Error(`${method} ${path}: ${res.status} ${text}`);
    return text ? JSON.parse(text) : null;
  }

  // hits returns the fake upstream's hit log (one object per upstream request).
  async hits() {
    const res = await fetch(this.fakeURL + '/_fake/hits');
    return (await res.text()).split('\n').filter(Boolean).map((l) => JSON.parse(l));
  }

  async reset() { await fetch(this.fakeURL + '/_fake/reset', { method: 'POST' }); }

  async down() {
    for (const p of [this.gw, this.fake]) {
      if (p && p.child.exitCode === null) {
        p.child.kill('SIGTERM');
        await new Promise((r) => { const t = setTimeout(() => { p.child.kill('SIGKILL'); r(); }, 15000); p.child.on('exit', () => { clearTimeout(t); r(); }); });
      }
    }
    if (this.tmp) rmSync(this.tmp, { recursive: true, force: true });
  }
}
