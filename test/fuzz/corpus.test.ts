// The fuzz corpus (test/fuzz/corpus/): each file is one input that once broke a decoder (or that
// the issue found by hand), named for its target decoder, replayed through the HTTP path as a
// regression test. Format: {target, why, path, headers, bodyText | bodyBase64, expect: {status, code?}}.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { RunningGateway } from '../../gateway/gateway';
import { gatewayFor } from '../support/gateway';
import { send } from '../support/http';

interface CorpusCase {
  readonly target: string;
  readonly why: string;
  readonly path: string;
  readonly headers: Record<string, string | number>;
  readonly bodyText?: string;
  readonly bodyBase64?: string;
  readonly expect: { readonly status: number; readonly code?: string };
}

const DIR = join(__dirname, 'corpus');
const FILES = readdirSync(DIR).filter((f) => f.endsWith('.json')).sort();
// The same routes as the HTTP fuzz target, so a case found there replays here.
const ROUTES = JSON.stringify([{ path: '/api/r', model: 'simple', inputs: { INPUT0: { from: '/a', decode: 'numbers' }, INPUT1: { from: '/b', decode: 'numbers' } } }]);

let gw: RunningGateway;
beforeAll(async () => {
  gw = await gatewayFor(['--demo', '--routes', ROUTES, '--max-input-size', String(1 << 20)]);
});
afterAll(async () => {
  await gw?.close(2000);
});

test('the corpus is not empty and every file names its target', () => {
  expect(FILES.length).toBeGreaterThan(0);
  for (const f of FILES) expect(f.startsWith(`${(JSON.parse(readFileSync(join(DIR, f), 'utf8')) as CorpusCase).target}-`)).toBe(true);
});

test.each(FILES)('%s', async (file) => {
  const c = JSON.parse(readFileSync(join(DIR, file), 'utf8')) as CorpusCase;
  const body = c.bodyBase64 !== undefined ? Buffer.from(c.bodyBase64, 'base64') : Buffer.from(c.bodyText ?? '');
  const before = gw.demoBackend!.stats.inferCalls;
  const r = await send(`${gw.url}${c.path}`, { method: 'POST', body, headers: c.headers });
  expect(r.status).toBe(c.expect.status);
  if (c.expect.code !== undefined) expect(r.headers['x-tensorgate-error']).toBe(c.expect.code);
  expect(typeof (JSON.parse(r.body.toString()) as { error?: unknown }).error).toBe('string');
  if (r.status >= 400) expect(gw.demoBackend!.stats.inferCalls).toBe(before);
  expect((await send(`${gw.url}/v2/health/live`)).status).toBe(200);
});
