// The load generator of `npm run bench` (bench/run.js forks it: it runs in its own process so its
// CPU never competes inside the gateway's or the harness's event loop). It receives one cell at a
// time over IPC — { target, payload, form, concurrency, warmupMs, durationMs, maxRequests } — and
// answers with the recorded latencies' percentiles.
//
// Closed loop at fixed concurrency: `concurrency` workers, each sending its next request as soon as
// the previous answer has been read completely. HTTP goes through one undici Pool with as many
// connections as workers (keep-alive, no pipelining). gRPC goes through tensorgate's own unary call
// on node:http2 (dist/gateway/upstream/infer/h2-plane.js, one session, `concurrency` streams) with a
// ModelInferRequest framed by dist/gateway/infer/frame-request.js — the "fast client". REST over
// h2 (cell.protocol 'h2') goes through one node:http2 session (h2c with prior knowledge), one stream per worker.
// Every loop is bounded: warm-up by time and count, measurement by time and count, each request by
// a timeout. Only 127.0.0.1 is ever targeted (run.js passes loopback ports only).
'use strict';
const http2 = require('node:http2');
const { exchange, requestBytes } = require('./native-floor/exchange');
const { Pool } = require('undici');

// `#dist/`: Node loads the built file (package.json "imports"), and typecheck resolves the same
// name to its source (bench/tsconfig.json "paths"), so a move or rename fails there.
const { frameInferRequest } = require('#dist/gateway/infer/frame-request.js');
const { H2DataPlane } = require('#dist/gateway/upstream/infer/h2-plane.js');
const { BackendSet } = require('#dist/gateway/upstream/backends/backend-set.js');
const { inference } = require('#dist/proto/services.js');

const REQUEST_TIMEOUT_MS = 120_000;
const MAX_WARMUP_REQUESTS = 2_000;

// ------------------------------------------------------------------ payloads and bodies

/** The tensor of each payload: model, input, datatype, shape and its bytes (deterministic). */
function tensorOf(payload) {
  switch (payload) {
    case '64B': return uint8Tensor(64);
    case '600KB': {
      const n = 3 * 224 * 224;
      const f = new Float32Array(n);
      for (let i = 0; i < n; i++) f[i] = ((i * 7) % 256) / 8; // exact in FP32 and short in JSON
      return { model: 'classifier_fp32', input: 'INPUT', datatype: 'FP32', shape: [1, 3, 224, 224], outputs: ['PROBS'],
        bytes: Buffer.from(f.buffer), numbers: () => f };
    }
    case '4MB': return uint8Tensor(4 * 1024 * 1024);
    case '16MB': return uint8Tensor(16 * 1024 * 1024);
    default: throw new Error(`unknown payload ${payload}`);
  }
}

function uint8Tensor(n) {
  const b = Buffer.allocUnsafe(n);
  for (let i = 0; i < n; i++) b[i] = (i * 31 + 7) & 0xff;
  return { model: 'image_stats', input: 'IMAGE', datatype: 'UINT8', shape: [1, n], outputs: ['LEN', 'SUM'], bytes: b,
    numbers: () => b };
}

/** JSON text of a numeric array, built without a giant intermediate array of strings. */
function numbersJson(values) {
  const parts = [];
  const STEP = 65536;
  for (let i = 0; i < values.length; i += STEP) {
    parts.push(Array.prototype.join.call(values.subarray ? values.subarray(i, i + STEP) : values.slice(i, i + STEP), ','));
  }
  return `[${parts.join(',')}]`;
}

const tensors = new Map();
const bodies = new Map();

/**
 * One request form, the body's sizes counted.
 * @typedef {{ path?: string, headers?: Record<string, string>, body?: Buffer, message?: Buffer }} Form
 * @typedef {Form & { payloadBytes: number, wireBytes: number }} Request
 */

/**
 * { path, headers, body } of one request form; `grpc` forms give { message } instead.
 * @returns {Request}
 */
function requestOf(payload, form) {
  const key = `${payload}/${form}`;
  const cached = bodies.get(key);
  if (cached) return cached;
  if (!tensors.has(payload)) tensors.set(payload, tensorOf(payload));
  const t = tensors.get(payload);
  const infer = `/v2/models/${t.model}/infer`;
  /** @type {Omit<Request, 'payloadBytes' | 'wireBytes'>} */
  let r;
  switch (form) {
    case 'binary': {
      const header = Buffer.from(JSON.stringify({
        inputs: [{ name: t.input, datatype: t.datatype, shape: t.shape, parameters: { binary_data_size: t.bytes.length } }],
        outputs: t.outputs.map((name) => ({ name, parameters: { binary_data: true } })),
      }));
      r = { path: infer, headers: { 'content-type': 'application/octet-stream', 'inference-header-content-length': String(header.length) },
        body: Buffer.concat([header, t.bytes]) };
      break;
    }
    case 'raw':
      r = { path: infer, headers: { 'content-type': 'application/octet-stream', 'inference-header-content-length': '0' }, body: t.bytes };
      break;
    case 'json': {
      const head = JSON.stringify({ inputs: [{ name: t.input, datatype: t.datatype, shape: t.shape, data: 0 }] });
      const at = head.indexOf('"data":0') + 7;
      r = { path: infer, headers: { 'content-type': 'application/json' },
        body: Buffer.from(head.slice(0, at) + numbersJson(t.numbers()) + head.slice(at + 1)) };
      break;
    }
    case 'b64':
      r = { path: infer, headers: { 'content-type': 'application/json' },
        body: Buffer.from(JSON.stringify({ inputs: [{ name: t.input, datatype: t.datatype, shape: t.shape, data: t.bytes.toString('base64') }] })) };
      break;
    case 'v1b64':
      r = { path: `/v1/models/${t.model}:predict`, headers: { 'content-type': 'application/json' },
        body: Buffer.from(JSON.stringify({ instances: [{ b64: t.bytes.toString('base64') }] })) };
      break;
    case 'grpc': {
      const req = {
        modelName: t.model, modelVersion: '', id: undefined, parameters: new Map(),
        inputs: [{ name: t.input, datatype: t.datatype, shape: t.shape, parameters: new Map(), byteSize: t.bytes.length }],
        outputs: undefined, binaryDataOutput: true,
      };
      const framed = frameInferRequest(req);
      t.bytes.copy(framed.message, /** @type {{ offset: number }} (the one input has no inline data) */ (framed.slots[0]).offset);
      r = { message: framed.message };
      break;
    }
    default: throw new Error(`unknown form ${form}`);
  }
  const sized = { ...r, payloadBytes: t.bytes.length, wireBytes: (r.body ?? r.message ?? Buffer.alloc(0)).length };
  bodies.set(key, sized);
  return sized;
}

// ------------------------------------------------------------------ one request per kind

function httpSender(target, req, concurrency) {
  const pool = new Pool(`http://127.0.0.1:${target.port}`, {
    connections: concurrency, pipelining: 1, keepAliveTimeout: 60_000,
    headersTimeout: REQUEST_TIMEOUT_MS, bodyTimeout: REQUEST_TIMEOUT_MS,
  });
  return {
    async send() {
      const res = await pool.request({ path: req.path, method: 'POST', headers: req.headers, body: req.body });
      let n = 0;
      const chunks = [];
      for await (const c of res.body) {
        n += c.length;
        if (res.statusCode !== 200 && n < 4096) chunks.push(c);
      }
      if (res.statusCode !== 200) throw new Error(`HTTP ${res.statusCode}: ${Buffer.concat(chunks).toString('utf8').slice(0, 300)}`);
      return n;
    },
    close: () => pool.destroy(),
  };
}

/**
 * HTTP/1.1, a connection of its own per request (cell.fresh): the request's bytes written on a new
 * connection, its answer read to its Content-Length, the connection closed — as curl run once per
 * request, or Python's requests without a session, call (keep-alive asked for, never used).
 */
function freshSender(target, req) {
  const bytes = requestBytes(req);
  return {
    async send() {
      const answer = await exchange(target.port, bytes, REQUEST_TIMEOUT_MS);
      const end = answer.indexOf('\r\n\r\n');
      if (!answer.subarray(0, 12).equals(OK)) throw new Error(`${answer.subarray(0, answer.indexOf('\r\n')).toString('latin1')}: ${answer.subarray(end + 4, end + 304).toString()}`);
      return answer.length - end - 4;
    },
    close: () => undefined,
  };
}
const OK = Buffer.from('HTTP/1.1 200', 'latin1');

/** REST over HTTP/2: one h2c session for every worker, a stream per request (what an h2 client library does). */
function h2Sender(target, req) {
  // Node's HTTP/2 client holds at most maxSessionMemory (default 10 MB) per session, answers and
  // uploads queued included; past it, it resets new streams with ENHANCE_YOUR_CALM itself. 8 streams
  // of 4 MB answers need more: that was the 'errors' of the first REST-over-h2 rows, not the gateway.
  // 32 streams of 16 MiB uploads are 512 MiB: at 256 one request in 60-90 of that cell was reset
  // so, by the load generator's own Node (a client capped at 16 resets half its streams so; the
  // gateway capped at 4 resets none).
  const session = http2.connect(`http://127.0.0.1:${target.port}`, { maxSessionMemory: 1024 });
  session.on('error', () => undefined); // each stream reports its own failure
  const headers = { ':method': 'POST', ':path': req.path, 'content-length': req.body.length };
  for (const [k, v] of Object.entries(req.headers ?? {})) if (k.toLowerCase() !== 'content-length') headers[k.toLowerCase()] = v;
  return {
    send() {
      return new Promise((resolve, reject) => {
        const stream = session.request(headers);
        const timer = setTimeout(() => stream.close(http2.constants.NGHTTP2_CANCEL), REQUEST_TIMEOUT_MS);
        let status = 0;
        let n = 0;
        const chunks = [];
        stream.on('response', (h) => { status = h[':status'] ?? 0; });
        stream.on('data', (c) => {
          n += c.length;
          if (status !== 200 && n < 4096) chunks.push(c);
        });
        stream.on('error', (/** @type {Error} */ err) => { clearTimeout(timer); reject(err); });
        stream.on('end', () => {
          clearTimeout(timer);
          if (status !== 200) reject(new Error(`HTTP ${status}: ${Buffer.concat(chunks).toString('utf8').slice(0, 300)}`));
          else resolve(n);
        });
        stream.end(req.body);
      });
    },
    close: async () => session.destroy(),
  };
}

function grpcSender(target, req) {
  // One HTTP/2 connection, every call multiplexed on it (as one gRPC client channel): a set of one
  // fixed address, no health checks, no retries.
  const set = new BackendSet({
    targets: [`127.0.0.1:${target.port}`], dnsRefreshMs: 30_000, healthCheckIntervalMs: 5000, healthyThreshold: 2, unhealthyThreshold: 3,
    ejectAfterFailures: 1e9, ejectionBaseMs: 30_000, maxEjectionPercent: 0, retries: 0,
  });
  const plane = new H2DataPlane(set);
  const signal = new AbortController().signal;
  return {
    async send() {
      const res = await plane.modelInfer(req.message, { deadline: Date.now() + REQUEST_TIMEOUT_MS, signal, metadata: {} });
      // A real client decodes the answer: do it (views, as protobufjs gives them).
      const msg = res.chunks.length === 1 ? res.chunks[0] : Buffer.concat(res.chunks, res.byteLength);
      const decoded = inference.ModelInferResponse.decode(msg);
      if (decoded.raw_output_contents.length === 0) throw new Error('gRPC answer without raw_output_contents');
      return res.byteLength;
    },
    close: async () => {
      plane.close();
      set.close();
    },
  };
}

// ------------------------------------------------------------------ the closed loop

function percentile(sorted, p) {
  if (sorted.length === 0) return NaN;
  const rank = Math.ceil((p / 100) * sorted.length); // nearest rank
  return sorted[Math.min(sorted.length, Math.max(1, rank)) - 1];
}

async function runCell(cell) {
  const req = requestOf(cell.payload, cell.form);
  const sender = cell.form === 'grpc' ? grpcSender(cell.target, req)
    : cell.protocol === 'h2' ? h2Sender(cell.target, req) : cell.fresh ? freshSender(cell.target, req) : httpSender(cell.target, req, cell.concurrency);
  /** @type {{ count: number, first: string | undefined }} */
  const errors = { count: 0, first: undefined };
  try {
    // Correctness first: one request must succeed, or the cell is reported as failed.
    try {
      await sender.send();
    } catch (err) {
      return { ok: false, error: String(err.message ?? err) };
    }
    // Warm-up: bounded by time and count.
    let warm = 0;
    const warmEnd = performance.now() + cell.warmupMs;
    await Promise.all(Array.from({ length: cell.concurrency }, async () => {
      while (performance.now() < warmEnd && warm < MAX_WARMUP_REQUESTS) {
        warm++;
        try { await sender.send(); } catch { /* counted in the measured phase only */ }
      }
    }));
    // Measurement: stop issuing at the deadline or the request cap, then let in-flight answers land.
    const lat = new Float64Array(cell.maxRequests);
    let issued = 0;
    let done = 0;
    let respBytes = 0;
    const t0 = performance.now();
    const end = t0 + cell.durationMs;
    await Promise.all(Array.from({ length: cell.concurrency }, async () => {
      while (issued < cell.maxRequests && performance.now() < end) {
        issued++;
        const s = performance.now();
        try {
          respBytes += await sender.send();
          lat[done++] = performance.now() - s;
        } catch (err) {
          errors.count++;
          errors.first ??= String(err.message ?? err);
        }
      }
    }));
    const elapsedMs = performance.now() - t0;
    const sorted = Array.from(lat.subarray(0, done)).sort((a, b) => a - b);
    const reqPerSec = done / (elapsedMs / 1000);
    return {
      ok: done > 0,
      error: errors.first,
      errors: errors.count,
      requests: done,
      warmup: warm,
      elapsedMs,
      p50: percentile(sorted, 50),
      p90: percentile(sorted, 90),
      p99: percentile(sorted, 99),
      max: sorted[sorted.length - 1],
      mean: sorted.reduce((a, b) => a + b, 0) / Math.max(1, sorted.length),
      reqPerSec,
      payloadMBps: (reqPerSec * req.payloadBytes) / 1e6,
      wireBytes: req.wireBytes,
      respBytes: done ? respBytes / done : 0,
    };
  } finally {
    await sender.close();
  }
}

// Forked by run.js: serve cells over IPC. Required (bench/soak.js): lend the request bodies only.
if (require.main === module) {
  const send = process.send?.bind(process);
  if (send === undefined) {
    process.stderr.write('bench/loadgen.js is forked by bench/run.js (and bench/pool-e2e.js): it takes its cells over IPC\n');
    process.exit(2);
  }
  process.on('message', (/** @type {any} IPC from run.js: { type: 'cell', id, cell } or { type: 'exit' } */ msg) => {
    if (msg.type === 'exit') {
      process.exit(0);
    }
    if (msg.type !== 'cell') return;
    runCell(msg.cell).then(
      (result) => send({ type: 'result', id: msg.id, result }),
      (err) => send({ type: 'result', id: msg.id, result: { ok: false, error: String(err?.stack ?? err) } }),
    );
  });
  process.on('disconnect', () => process.exit(0));
  send({ type: 'ready' });
}

module.exports = { requestOf, percentile };
