// The README's OpenAI examples, as written there, against the demo (`npm start` is
// `bin/tensorgate --demo`: the reference backend's twins of the zoo's tiny_llm, tiny_llm_trtllm and
// tiny_embed, offered as OpenAI models), with the demo's port put in place of 8000: its `curl -N`
// stream, its other curl commands, and the official openai Python SDK (its venv:
// test/openai/requirements.txt) made with the README's base_url and api_key, and its Python tool
// call, run as written, printing what its `#→` line shows.
import { run } from '../support/run';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { RunningGateway } from '../../gateway/gateway';
import { gatewayFor } from '../support/gateway';
import { tritonVenv } from '../support/triton';
import { CURL, needsFile } from '../support/tools';

needsFile(CURL()); // the README's curl commands

jest.setTimeout(120_000);

const ROOT = join(__dirname, '..', '..');
const README = readFileSync(join(ROOT, 'README.md'), 'utf8');

/** The README's fenced blocks of one of `langs` that contain every one of `marks`. */
function blocks(langs: readonly string[], marks: readonly string[]): string[] {
  return [...README.matchAll(/^```([a-z]*)\n([\s\S]*?)^```/gm)]
    .filter((m) => langs.includes(m[1]!) && marks.every((k) => m[2]!.includes(k)))
    .map((m) => m[2]!);
}

/** The README's commands run with only PATH and HOME of the environment, as a user's shell would have them. */
const LIMITS = { timeoutMs: 60_000, maxBufferBytes: 16 << 20, env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '' } };

let gw: RunningGateway;
let work: string;
let port: (text: string) => string;
beforeAll(async () => {
  gw = await gatewayFor(['--demo']);
  work = mkdtempSync(join(tmpdir(), 'tg-openai-readme-'));
  port = (text) => text.replace(/(localhost|127\.0\.0\.1):8000\b/g, `127.0.0.1:${gw.port}`);
});
afterAll(async () => {
  await gw?.close(2000);
  if (work !== undefined) rmSync(work, { recursive: true, force: true });
});

/** The shell commands of a block: continuation lines joined, comments and output (`#→`) left out. */
const commands = (block: string): string[] => block.replace(/\\\n/g, ' ').split('\n').map((l) => l.trim()).filter((l) => l !== '' && !l.startsWith('#'));

// The demo backend run apart, a gateway on ports of its own in front: test/integration/demo-roles.test.ts runs it.
const openaiBlocks = (): string[] => blocks(['sh', 'bash', 'console', 'shell', ''], ['/openai/v1/']).filter((b) => !b.includes('--demo-backend'));

test('the README\'s curl -N stream: server-sent events, one chunk per token, data: [DONE] last', async () => {
  const streams = openaiBlocks().flatMap(commands).filter((c) => /^curl\b/.test(c) && / -N\b/.test(c));
  expect(streams.length).toBeGreaterThanOrEqual(1);
  for (const command of streams) {
    const r = await run('bash', ['-eo', 'pipefail', '-c', port(command)], { cwd: work, ...LIMITS });
    // Without -s, curl writes its progress meter to stderr when its output is not a terminal (here).
    expect([command, r.code, r.stderr.includes('curl:')]).toEqual([command, 0, false]);
    expect(r.stdout.endsWith('data: [DONE]\n\n')).toBe(true);
    const events = r.stdout.split('\n\n').filter((e) => e !== '');
    expect(events.every((e) => e.startsWith('data: '))).toBe(true);
    const chunks = events.slice(0, -1).map((e) => JSON.parse(e.slice(6)) as { object: string; choices: { delta?: { content?: string }; text?: string }[] });
    expect(chunks.every((c) => c.object === 'text_completion' || c.object === 'chat.completion.chunk')).toBe(true);
    const texts = chunks.flatMap((c) => c.choices.map((ch) => ch.text ?? ch.delta?.content ?? '')).filter((t) => t !== '');
    expect(texts.length).toBeGreaterThanOrEqual(2);
  }
});

test('the README\'s other OpenAI curl commands answer JSON', async () => {
  const others = openaiBlocks().flatMap(commands).filter((c) => /^curl\b/.test(c) && !/ -N\b/.test(c));
  for (const command of others) {
    const r = await run('bash', ['-eo', 'pipefail', '-c', port(command)], { cwd: work, ...LIMITS });
    expect([command, r.code, r.stderr.includes('curl:')]).toEqual([command, 0, false]);
    expect(JSON.parse(r.stdout)).not.toHaveProperty('error');
  }
});

test('the README\'s SDK settings (base_url, api_key) reach the demo with the official openai Python SDK', async () => {
  const m = /OpenAI\(base_url="([^"]+)", api_key="([^"]*)"\)/.exec(README);
  expect(m).not.toBeNull();
  const program = [
    'from openai import OpenAI',
    `client = OpenAI(base_url=${JSON.stringify(port(m![1]!))}, api_key=${JSON.stringify(m![2]!)})`,
    'print(sorted(m.id for m in client.models.list()))',
    'print(client.chat.completions.create(model="tiny_llm", messages=[{"role": "user", "content": "Hello"}], max_tokens=3).choices[0].message.content)',
  ].join('\n');
  const r = await run(join(tritonVenv('test/openai/requirements.txt'), 'bin', 'python'), ['-c', program], { cwd: work, ...LIMITS });
  expect([r.code, r.stderr]).toEqual([0, '']);
  const [models, text] = r.stdout.trim().split('\n');
  expect(models).toBe("['tiny_embed', 'tiny_llm', 'tiny_llm_trtllm']");
  expect(text!.trim().split(' ')).toHaveLength(3);
});

test('the README\'s Python tool call prints what its #→ line shows', async () => {
  const programs = blocks(['python'], ['tools=']);
  expect(programs.length).toBeGreaterThanOrEqual(1);
  for (const block of programs) {
    const lines = block.trimEnd().split('\n');
    const program = port(lines.filter((l) => !l.startsWith('#→')).join('\n'));
    const shown = lines.filter((l) => l.startsWith('#→')).map((l) => l.slice(3)).join('\n');
    const r = await run(join(tritonVenv('test/openai/requirements.txt'), 'bin', 'python'), ['-c', program], { cwd: work, ...LIMITS });
    expect([r.code, r.stderr, r.stdout.trim()]).toEqual([0, '', shown]);
  }
});
