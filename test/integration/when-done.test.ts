// RequestContext.whenDone (ingress/server.ts Exchange.report): what a request holds beyond its
// handler — a key's place under its concurrency limit (auth/limits.ts) — is given back exactly once
// however the request ends: answered, its handler throwing, the client leaving (HTTP/1.1 and
// HTTP/2), the drain cutting it; and at once when registered after the request was over. A place
// that is never given back locks a key out for good.
import { request } from 'node:http';
import { connect, constants } from 'node:http2';
import type { AddressInfo } from 'node:net';
import { loadConfig } from '../../gateway/config/load';
import { GatewayError } from '../../gateway/errors';
import { createHttpServer, type HttpServer } from '../../gateway/ingress/server';
import type { Handler } from '../../gateway/ingress/router';
import { send } from '../support/http';

const loaded = loadConfig({ argv: ['--demo'], env: {} });
const DEFAULTS = (loaded.help ? undefined : loaded.config)!;

/** Times each request's whenDone callback ran, by the request's `?id=`. */
const done = new Map<string, number>();
/** Requests whose handler is running, by id (for the client to know when to leave). */
const started = new Set<string>();
const idOf = (url: string | undefined): string => new URL(url ?? '/', 'http://x').searchParams.get('id') ?? '';

function holding(body: Handler): Handler {
  return async (ctx) => {
    const id = idOf(ctx.req.url);
    ctx.whenDone(() => done.set(id, (done.get(id) ?? 0) + 1));
    started.add(id);
    await body(ctx);
  };
}

const ROUTES = [
  { name: 'ok', pattern: /^\/ok$/, methods: { GET: holding(async (ctx) => { ctx.res.end('ok'); }) } },
  { name: 'throw', pattern: /^\/throw$/, methods: { GET: holding(async () => { throw new GatewayError('GW_ERR_AUTH_CONCURRENCY_LIMITED', 'no'); }) } },
  // Settles only once the client or the drain has ended the request (as an upstream call is cancelled).
  { name: 'hang', pattern: /^\/hang$/, methods: { GET: holding((ctx) => new Promise<void>((resolve) => ctx.signal.addEventListener('abort', () => resolve()))) } },
  {
    name: 'late', pattern: /^\/late$/, methods: {
      GET: (async (ctx) => {
        ctx.res.end('answered first');
        await new Promise((r) => ctx.res.once('finish', r));
        await new Promise((r) => setTimeout(r, 50));
        const id = idOf(ctx.req.url);
        ctx.whenDone(() => done.set(id, (done.get(id) ?? 0) + 1));
        // Already over: it ran in this very call.
        started.add(`${id}:${done.get(id) ?? 0}`);
      }) satisfies Handler,
    },
  },
];

let server: HttpServer;
let base: string;
let drained = false;
beforeEach(async () => {
  drained = false;
  server = createHttpServer(ROUTES, { start: () => ({ upstreamHeaders: {}, end: () => undefined }) },
    { corsOrigin: '', limits: DEFAULTS.limits, timeouts: DEFAULTS.server, head: DEFAULTS.server, h2: DEFAULTS.server.h2 });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterEach(async () => {
  if (!drained) await server.drain(0);
});

async function until(cond: () => boolean, what: string, ms = 5000): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

test('answered, or its handler threw: once', async () => {
  expect((await send(`${base}/ok?id=ok`)).status).toBe(200);
  expect((await send(`${base}/throw?id=throw`)).status).toBe(429);
  await until(() => done.has('ok') && done.has('throw'), 'both callbacks');
  await new Promise((r) => setTimeout(r, 50));
  expect([done.get('ok'), done.get('throw')]).toEqual([1, 1]);
});

test('an HTTP/1.1 client that leaves: once, after its handler settled', async () => {
  const req = request(`${base}/hang?id=h1`);
  req.on('error', () => undefined);
  req.end();
  await until(() => started.has('h1'), 'the handler to run');
  expect(done.get('h1')).toBeUndefined();
  req.destroy();
  await until(() => done.has('h1'), 'the callback');
  await new Promise((r) => setTimeout(r, 50));
  expect(done.get('h1')).toBe(1);
});

test('an HTTP/2 stream the client cancels: once', async () => {
  const session = connect(base);
  session.on('error', () => undefined);
  try {
    const stream = session.request({ ':path': '/hang?id=h2' });
    stream.on('error', () => undefined);
    stream.end();
    await until(() => started.has('h2'), 'the handler to run');
    stream.close(constants.NGHTTP2_CANCEL);
    await until(() => done.has('h2'), 'the callback');
    await new Promise((r) => setTimeout(r, 50));
    expect(done.get('h2')).toBe(1);
  } finally {
    session.destroy();
  }
});

test('cut by the drain: once', async () => {
  const req = request(`${base}/hang?id=drained`);
  req.on('error', () => undefined);
  req.end();
  await until(() => started.has('drained'), 'the handler to run');
  drained = true;
  await server.drain(0);
  await until(() => done.has('drained'), 'the callback');
  expect(done.get('drained')).toBe(1);
});

test('registered after the request was over: run at once', async () => {
  expect((await send(`${base}/late?id=late`)).body.toString()).toBe('answered first');
  await until(() => started.has('late:1'), 'the late registration (run in the same call)');
  expect(done.get('late')).toBe(1);
});
