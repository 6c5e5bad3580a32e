// Decode threads (limits.decodeThreads, gateway/decode/threads/pool.ts): a large V2 JSON body is
// decoded on a node:worker_threads thread by the same functions the main thread runs — the same
// framed message, the same errors — and a thread that dies or hangs fails no request. Real threads
// run the built script (dist/, `npm test` builds first); failing ones are small scripts written here.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { RunningGateway } from '../../gateway/gateway';
import { isGatewayError } from '../../gateway/errors';
import type { Frame } from '../../gateway/infer/framed-message';
import { Ledger } from '../../gateway/infer/ledger';
import type { RequestBuffers } from '../../gateway/buffers/pool';
import { DecodePool } from '../../gateway/decode/threads/pool';
import { decodeWholeBody, type WholeBodyOptions } from '../../gateway/decode/v2-body';
import { frameInferHead } from '../../gateway/infer/frame-request';
import { inference } from '../../proto/services';
import { gatewayFor } from '../support/gateway';
import { send } from '../support/http';
import { RecordTap } from '../support/records';
import { waitUntil } from '../support/wait';

jest.setTimeout(60_000);

const frame: Frame = (request, external) => frameInferHead(request, external);
const config = inference.ModelConfig.create({
  name: 'm', output: [{ name: 'LABELS', data_type: inference.DataType.TYPE_STRING }, { name: 'OUT', data_type: inference.DataType.TYPE_FP32 }],
});
const options: WholeBodyOptions = { modelName: 'm', modelVersion: '', config, maxInputSizeBytes: 64 << 20, headerlessBinary: false };

const values = Array.from({ length: 20_000 }, (_, i) => (i % 97) / 8 - 3);
const GOOD = Buffer.from(JSON.stringify({
  id: 'x', parameters: { p: 1, q: 'two' },
  inputs: [{ name: 'A', datatype: 'FP32', shape: [20_000], data: values }, { name: 'B', datatype: 'BYTES', shape: [2], data: ['hé', 'x'] }],
  outputs: [{ name: 'OUT', parameters: { binary_data: true } }],
}));

/** A body in pieces, as sockets give it. */
const pieces = (b: Buffer, n = 65_536): Buffer[] => Array.from({ length: Math.ceil(b.length / n) }, (_, i) => b.subarray(i * n, (i + 1) * n));

/** What the main thread gives for a body: the decoded body, or the error as the client sees it. */
function onMain(body: Buffer): unknown {
  try {
    const d = decodeWholeBody(pieces(body), body.length, undefined, options, frame, new Ledger());
    return plain({ request: d.request, message: d.message, encoding: d.encoding });
  } catch (err) {
    return errorOf(err);
  }
}

/**
 * Maps as entry lists: the thread's Maps come from structured cloning, made in Node's own realm,
 * not in the test's (jest's vm context), whose Map methods refuse them.
 */
function plain(x: unknown): unknown {
  if (Buffer.isBuffer(x)) return x;
  if (typeof x === 'object' && x !== null && typeof (x as Map<unknown, unknown>).entries === 'function' && typeof (x as Map<unknown, unknown>).has === 'function') {
    return ['Map', ...[...(x as Map<unknown, unknown>).entries()].map(plain)];
  }
  if (Array.isArray(x)) return x.map(plain);
  if (typeof x === 'object' && x !== null) return Object.fromEntries(Object.entries(x).map(([k, v]) => [k, plain(v)]));
  return x;
}

function errorOf(err: unknown): unknown {
  if (isGatewayError(err)) return { code: err.code, status: err.status, plain: err.plain, message: err.message };
  return { name: (err as Error).name, message: (err as Error).message };
}

async function onPool(pool: DecodePool, body: Buffer, ledger = new Ledger()): Promise<unknown> {
  try {
    const d = await pool.decode({ chunks: pieces(body), length: body.length }, undefined, options, frame, ledger);
    return plain({ request: d.request, message: d.message, encoding: d.encoding });
  } catch (err) {
    return errorOf(err);
  }
}

describe('the decode pool', () => {
  let pool: DecodePool;
  let dir: string;
  beforeAll(() => {
    pool = new DecodePool({ threads: 2, minBytes: 1000 });
    dir = mkdtempSync(join(tmpdir(), 'tg-decode-'));
  });
  afterAll(async () => {
    await pool.close();
    rmSync(dir, { recursive: true, force: true });
  });

  test('which bodies go to a thread: JSON (no Inference-Header-Content-Length) of at least minBytes, threads > 0', async () => {
    expect([pool.wants(1000, undefined), pool.wants(999, undefined), pool.wants(5000, '10')]).toEqual([true, false, false]);
    const none = new DecodePool({ threads: 0, minBytes: 0 });
    expect(none.wants(1 << 20, undefined)).toBe(false);
    await none.close();
    // An empty body is a raw request (it reads the model's inputs, which do not travel to a thread).
    const all = new DecodePool({ threads: 1, minBytes: 0 });
    expect([all.wants(0, undefined), all.wants(1, undefined)]).toEqual([false, true]);
    await all.close();
  });

  test('a body decoded on a thread: the same request and framed message as on the main thread', async () => {
    const ledger = new Ledger();
    expect(await onPool(pool, GOOD, ledger)).toEqual(onMain(GOOD));
    // The body gathered once into shared memory, and the message the thread framed (transferred back).
    expect([ledger.hops.decode.bytesCopied, ledger.hops.decode.allocations]).toEqual([GOOD.length, 2]);
  });

  test('a shared body is kept for the next job: reused for a body it fits (no allocation), a fresh one otherwise', async () => {
    const own = new DecodePool({ threads: 1, minBytes: 0 });
    try {
      const first = new Ledger();
      expect(await onPool(own, GOOD, first)).toEqual(onMain(GOOD));
      expect([first.hops.decode.allocations, own.spareBodies]).toEqual([2, 1]);
      // A little shorter, other values: decoded from the kept memory, which still holds GOOD's tail.
      const next = Buffer.from(JSON.stringify({ inputs: [{ name: 'A', datatype: 'FP32', shape: [18_000], data: values.slice(0, 18_000).reverse() }] }));
      expect(next.length).toBeLessThan(GOOD.length);
      expect(next.length * 1.25).toBeGreaterThanOrEqual(GOOD.length);
      const second = new Ledger();
      expect(await onPool(own, next, second)).toEqual(onMain(next));
      expect([second.hops.decode.allocations, own.spareBodies]).toEqual([1, 1]);
      // Far smaller: it would waste most of the kept one, so it gets its own; both are kept.
      const small = Buffer.from(JSON.stringify({ inputs: [{ name: 'A', datatype: 'FP32', shape: [3], data: [1, 2, 3] }] }));
      const third = new Ledger();
      expect(await onPool(own, small, third)).toEqual(onMain(small));
      expect([third.hops.decode.allocations, own.spareBodies]).toEqual([2, 2]);
    } finally {
      await own.close();
    }
    expect(own.spareBodies).toBe(0);
  });

  test('a message the request adopted goes back to its thread once let go, and frames the next message', async () => {
    const own = new DecodePool({ threads: 1, minBytes: 0 });
    try {
      let back: (() => void) | undefined;
      const owner: RequestBuffers = { acquire: (n) => Buffer.allocUnsafe(n), reused: () => false, adopt: (_b, f) => { back = f; }, release: () => undefined };
      const d1 = await own.decode({ chunks: pieces(GOOD), length: GOOD.length }, undefined, options, frame, new Ledger(), owner);
      const expected = Buffer.from(d1.message);
      expect(back).toBeDefined();
      back!();
      expect(own.recycled).toBe(1);
      expect(d1.message.length).toBe(0); // moved to the thread, not copied: this view reads nothing now
      const ledger = new Ledger();
      const d2 = await own.decode({ chunks: pieces(GOOD), length: GOOD.length }, undefined, options, frame, ledger, owner);
      expect(d2.message.equals(expected)).toBe(true);
      // Neither the shared body nor the message's memory is new.
      expect(ledger.hops.decode.allocations).toBe(0);
    } finally {
      await own.close();
    }
  });

  test('bad bodies: the same errors as on the main thread (code, status, content type, message)', async () => {
    const bad = [
      '{"inputs": [{"name": "A", "datatype": "FP32", "shape": [3], "data": [1, 2]}]}',
      '{"inputs": [{"name": "A", "datatype": "FP32", "shape": [2], "data": [1, 2,]}]}',
      '{"inputs": [{"name": "A", "datatype": "FP32", "shape": [2], "data": [1, 2]}], "outputs": [{"name": "LABELS", "parameters": {"classification": 1}}]}',
      '{"inputs": []',
      `{"inputs": [{"name": "A", "datatype": "FP32", "shape": [2], "data": [1, "x"]}], "pad": "${'x'.repeat(2000)}"}`,
    ].map((s) => Buffer.from(s));
    for (const b of bad) {
      const main = onMain(b);
      expect(main).toHaveProperty('code');
      expect(await onPool(pool, b)).toEqual(main);
    }
  });

  test('concurrent bodies over two threads: each gets its own answer', async () => {
    const bodies = Array.from({ length: 6 }, (_, k) => Buffer.from(JSON.stringify({ inputs: [{ name: 'A', datatype: 'INT32', shape: [500 + k], data: Array(500 + k).fill(k) }] })));
    const got = await Promise.all(bodies.map((b) => onPool(pool, b)));
    expect(got).toEqual(bodies.map(onMain));
  });

  test('a thread idle for idleMs is ended (its isolate\'s memory returned); the next body starts a new one, no fallback', async () => {
    const idle = new DecodePool({ threads: 1, minBytes: 0, idleMs: 300 });
    const want = onMain(GOOD);
    try {
      expect(await onPool(idle, GOOD)).toEqual(want);
      await waitUntil(() => idle.retired === 1, 'the idle thread ended', 5000);
      // Jobs one after another within idleMs keep the thread.
      const got = [];
      for (let i = 0; i < 4; i++) got.push(await onPool(idle, GOOD));
      expect(got).toEqual([want, want, want, want]);
      expect([idle.retired, idle.fallbacks]).toEqual([1, 0]);
      await waitUntil(() => idle.retired === 2, 'the second thread ended', 5000);
    } finally {
      await idle.close();
    }
  });

  test('a thread that dies fails no request: its body is decoded on the main thread, and the next one starts a new thread', async () => {
    const crash = join(dir, 'crash.js');
    writeFileSync(crash, "require('node:worker_threads').parentPort.on('message', () => process.exit(3));\n");
    const dying = new DecodePool({ threads: 1, minBytes: 0, file: crash });
    try {
      expect(await onPool(dying, GOOD)).toEqual(onMain(GOOD));
      expect(await onPool(dying, GOOD)).toEqual(onMain(GOOD));
      expect(dying.fallbacks).toBe(2);
    } finally {
      await dying.close();
    }
  });

  test('a thread that throws outside a job (an uncaught error) is the same', async () => {
    const thrower = join(dir, 'throw.js');
    writeFileSync(thrower, "require('node:worker_threads').parentPort.on('message', () => { throw new Error('boom'); });\n");
    const throwing = new DecodePool({ threads: 1, minBytes: 0, file: thrower });
    try {
      expect(await onPool(throwing, GOOD)).toEqual(onMain(GOOD));
      expect(throwing.fallbacks).toBe(1);
    } finally {
      await throwing.close();
    }
  });

  test('a thread that never answers is ended after the job bound; the body is decoded on the main thread', async () => {
    const hang = join(dir, 'hang.js');
    writeFileSync(hang, "require('node:worker_threads').parentPort.on('message', () => undefined);\n");
    const hanging = new DecodePool({ threads: 1, minBytes: 0, file: hang, jobTimeoutMs: 200 });
    try {
      expect(await onPool(hanging, GOOD)).toEqual(onMain(GOOD));
      expect(hanging.fallbacks).toBe(1);
    } finally {
      await hanging.close();
    }
  });

  test('closing ends the threads; a job still running and later bodies are decoded on the main thread', async () => {
    const hang = join(dir, 'hang2.js');
    writeFileSync(hang, "require('node:worker_threads').parentPort.on('message', () => undefined);\n");
    const closing = new DecodePool({ threads: 1, minBytes: 0, file: hang });
    const running = onPool(closing, GOOD);
    await closing.close();
    expect(await running).toEqual(onMain(GOOD));
    expect(closing.wants(1 << 20, undefined)).toBe(false);
    expect(await onPool(closing, GOOD)).toEqual(onMain(GOOD));
  });
});

describe('through the gateway', () => {
  let threads: RunningGateway;
  let main: RunningGateway;
  const tap = new RecordTap();
  beforeAll(async () => {
    threads = await gatewayFor(['--demo', '--decode-threads', '1', '--decode-thread-min-bytes', '0']);
    main = await gatewayFor(['--demo', '--decode-threads', '0']);
    tap.start();
  });
  afterAll(async () => {
    tap.stop();
    await threads.close();
    await main.close();
  });

  const infer = (gw: RunningGateway, model: string, body: string | Buffer): ReturnType<typeof send> => send(`${gw.url}/v2/models/${model}/infer`, { body });

  test('answers and errors are byte-identical with decode threads on and off', async () => {
    const floats = Array.from({ length: 3 * 224 * 224 }, (_, i) => (i % 251) / 16);
    const cases: [string, string][] = [
      ['classifier_fp32', JSON.stringify({ inputs: [{ name: 'INPUT', datatype: 'FP32', shape: [1, 3, 224, 224], data: floats }] })],
      ['identity_fp32', JSON.stringify({ inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 16], data: floats.slice(0, 16) }] })],
      ['identity_fp32', JSON.stringify({ inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 16], data: floats.slice(0, 15) }] })],
      ['identity_fp32', '{"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [1, 16], "data": [1,]}]}'],
    ];
    for (const [model, body] of cases) {
      const [a, b] = [await infer(threads, model, body), await infer(main, model, body)];
      expect([a.status, a.headers['content-type'], a.body.toString()]).toEqual([b.status, b.headers['content-type'], b.body.toString()]);
    }
  });

  test('the ledger: the body gathered once, the thread-framed message an allocation', async () => {
    const body = JSON.stringify({ inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 16], data: Array(16).fill(0.5) }] });
    const recs = [];
    for (let i = 0; i < 2; i++) {
      const n = tap.mark();
      expect((await infer(threads, 'identity_fp32', body)).status).toBe(200);
      recs.push((await tap.after(n)).ledger!.hops.decode);
    }
    // The shared body and the message's memory are fresh unless earlier requests left ones they
    // fit. The second request has both from the first: its body kept by the pool, its message's
    // memory back in the thread once the first request and its call let go of it (before the
    // client had its answer, so before the second request was sent).
    expect(recs.map((d) => d.bytesCopied)).toEqual([body.length, body.length]);
    expect([0, 1, 2]).toContain(recs[0]!.allocations);
    expect(recs[1]!.allocations).toBe(0);
  });
});
