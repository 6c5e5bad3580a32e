// The README's OpenAI examples, as written there, against the demo (`npm start` is
// `bin/tensorgate --demo`: the reference backend's twins of the zoo's tiny_llm, tiny_llm_trtllm and
// tiny_embed, offered as OpenAI models): its `curl -N` stream and its `openai` SDK program(s), run
// with the demo's port put in place of 8000. Python runs in the openai SDK's venv
// (test/openai/requirements.txt), JavaScript under the project's Node with the npm SDK.
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { RunningGateway } from '../../gateway/gateway';
import { gatewayFor } from '../support/gateway';
import { tritonVenv } from '../support/triton';

jest.setTimeout(120_000);

const ROOT = join(__dirname, '..', '..');
const README = readFileSync(join(ROOT, 'README.md'), 'utf8');

/** The README's fenced blocks of one of `langs` that contain every one of `marks`. */
function blocks(langs: readonly string[], marks: readonly string[]): string[] {
  return [...README.matchAll(/^```([a-z]*)\n([\s\S]*?)^```/gm)]
    .filter((m) => langs.includes(m[1]!) && marks.every((k) => m[2]!.includes(k)))
    .map((m) => m[2]!);
}

function run(file: string, args: readonly string[], cwd: string): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(file, args, { cwd, timeout: 60_000, maxBuffer: 16 * 1024 * 1024, encoding: 'utf8', env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '' } },
      (err, stdout, stderr) => resolve({ code: err === null ? 0 : typeof err.code === 'number' ? err.code : 1, stdout, stderr }));
  });
}

let gw: RunningGateway;
let work: string;
let port: (text: string) => string;
beforeAll(async () => {
  gw = await gatewayFor(['--demo']);
  work = mkdtempSync(join(tmpdir(), 'tg-openai-readme-'));
  // A JavaScript example imports `openai` as a program in a project that installed it would.
  symlinkSync(join(ROOT, 'node_modules'), join(work, 'node_modules'));
  port = (text) => text.replace(/(localhost|127\.0\.0\.1):8000\b/g, `127.0.0.1:${gw.port}`);
});
afterAll(async () => {
  await gw?.close(2000);
  if (work !== undefined) rmSync(work, { recursive: true, force: true });
});

test('the README\'s curl -N stream: server-sent events, one chunk per token, data: [DONE] last', async () => {
  const found = blocks(['sh', 'bash', 'console', 'shell', ''], ['curl', '-N', '/v1/']);
  expect(found.length).toBeGreaterThanOrEqual(1);
  for (const block of found) {
    const r = await run('bash', ['-euo', 'pipefail', '-c', port(block)], work);
    expect([r.code, r.stderr]).toEqual([0, '']);
    const events = r.stdout.split('\n\n').filter((e) => e.trim() !== '');
    expect(events.length).toBeGreaterThanOrEqual(3);
    expect(events.every((e) => e.startsWith('data: '))).toBe(true);
    expect(events.at(-1)!.trim()).toBe('data: [DONE]');
    const chunks = events.slice(0, -1).map((e) => JSON.parse(e.slice(6)) as { object: string; choices: unknown[] });
    expect(chunks.every((c) => c.object === 'text_completion' || c.object === 'chat.completion.chunk')).toBe(true);
  }
});

test('the README\'s openai SDK programs run as written (only the port changed)', async () => {
  const python = blocks(['python', 'py'], ['openai']);
  const js = blocks(['js', 'javascript', 'mjs'], ['openai']);
  expect(python.length + js.length).toBeGreaterThanOrEqual(1);
  const interpreter = join(tritonVenv('test/openai/requirements.txt'), 'bin', 'python');
  for (const [i, block] of python.entries()) {
    writeFileSync(join(work, `example${i}.py`), port(block));
    const r = await run(interpreter, [join(work, `example${i}.py`)], work);
    expect([block, r.code, r.stderr]).toEqual([block, 0, '']);
    expect(r.stdout.trim()).not.toBe('');
  }
  for (const [i, block] of js.entries()) {
    writeFileSync(join(work, `example${i}.mjs`), port(block));
    const r = await run(process.execPath, [join(work, `example${i}.mjs`)], work);
    expect([block, r.code, r.stderr]).toEqual([block, 0, '']);
    expect(r.stdout.trim()).not.toBe('');
  }
});
