// The measuring process of bench/h2-call.js (run with --trace-gc-nvp --expose-gc): the three clients
// and the cells. See bench/h2-call.js.
'use strict';
const http2 = require('node:http2');
const os = require('node:os');
const { frameInferRequest } = require('#dist/gateway/infer/frame-request.js');
const { EnvelopeDecoder } = require('#dist/gateway/grpc/envelope.js');
const { formatGrpcTimeout } = require('#dist/gateway/grpc/timeout.js');
const { H2Connection } = require('#dist/gateway/upstream/h2/connection.js');
const { headerBlock, literalField } = require('#dist/gateway/upstream/h2/hpack.js');

const PATH = '/inference.GRPCInferenceService/ModelInfer';
const DEADLINE_MS = 30_000;

/**
 * @param {string} model @param {string} input @param {string} datatype
 * @param {number[]} shape @param {number} bytes
 */
function message(model, input, datatype, shape, bytes) {
  const { message: m, slots } = frameInferRequest({
    modelName: model, modelVersion: '', id: undefined, parameters: new Map(), outputs: undefined, binaryDataOutput: true,
    inputs: [{ name: input, datatype, shape, parameters: new Map(), byteSize: bytes }],
  });
  const s = slots[0];
  if (s) m.fill(1, s.offset, s.offset + s.length);
  return m;
}

// ---- a: node:http2 as h2-plane.ts uses it today

function sessionOf(addr) {
  const session = http2.connect(`http://${addr}`, {
    maxSessionMemory: 256, settings: { initialWindowSize: 1 << 20, maxFrameSize: 1 << 20, enablePush: false },
    strictFieldWhitespaceValidation: false,
  });
  session.on('connect', () => session.setLocalWindowSize(32 << 20));
  session.on('error', () => undefined);
  return session;
}

function callA(session, body, done) {
  const ac = new AbortController();
  const options = { deadline: Date.now() + DEADLINE_MS, signal: ac.signal, metadata: {} };
  let status; let settled = false; let expected = -1; let received = 0; const chunks = [];
  const response = new Promise((resolve, reject) => {
    /** @param {Error | undefined} err */
    const finish = (err) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      options.signal.removeEventListener('abort', onAbort);
      if (err) reject(err); else resolve({ chunks, byteLength: received });
    };
    const onAbort = () => finish(new Error('cancelled'));
    const remaining = options.deadline - Date.now();
    const timer = setTimeout(() => finish(new Error('deadline')), remaining + 50);
    const env = new EnvelopeDecoder({
      prefix: (_c, length) => { expected = length; return true; },
      data: (c, from, to) => { received += to - from; chunks.push(from === 0 && to === c.length ? c : c.subarray(from, to)); },
    });
    const s = session.request({
      ':method': 'POST', ':path': PATH, 'content-type': 'application/grpc', te: 'trailers',
      'grpc-timeout': formatGrpcTimeout(remaining), 'user-agent': 'tensorgate', ...{}, ...options.metadata,
    });
    s.cork();
    s.on('close', () => finish(status === 0 && received === expected ? undefined : new Error(`status ${status}`)));
    s.once('ready', () => undefined);
    options.signal.addEventListener('abort', onAbort, { once: true });
    s.on('response', (h) => { if (h['grpc-status'] !== undefined) status = Number(h['grpc-status']); });
    s.on('data', (c) => env.push(c));
    s.on('trailers', (t) => { status = Number(t['grpc-status']); });
    s.on('end', () => finish(status === 0 && received === expected ? undefined : new Error(`status ${status}`)));
    s.on('error', () => undefined);
    s.end(body, () => undefined);
  });
  response.then(() => done(true), () => done(false));
}

// ---- b: node:http2 with the least per-call work

const HEADERS_B = { ':method': 'POST', ':path': PATH, 'content-type': 'application/grpc', te: 'trailers', 'grpc-timeout': '', 'user-agent': 'tensorgate' };
const CALL = Symbol('call');
class CallB {
  status = -1; expected = -1; received = 0; chunks = []; done;
  constructor(done) { this.done = done; }
}
/** @this {Record<symbol, CallB>} @param {import('node:http2').IncomingHttpHeaders} h */
function onResponseB(h) { const v = h['grpc-status']; if (v !== undefined) this[CALL].status = Number(v); }
/** @this {Record<symbol, CallB>} @param {import('node:http2').IncomingHttpHeaders} t */
function onTrailersB(t) { this[CALL].status = Number(t['grpc-status']); }
/** @this {Record<symbol, CallB>} @param {Buffer} c */
function onDataB(c) {
  const call = this[CALL];
  let from = 0;
  if (call.expected < 0) { call.expected = c.readUInt32BE(1); from = 5; } // the bench's answers start a chunk
  call.received += c.length - from;
  call.chunks.push(from === 0 ? c : c.subarray(from));
}
/** @this {Record<symbol, CallB>} */
function onCloseB() { const call = this[CALL]; call.done(call.status === 0 && call.received === call.expected); }
const OPTIONS_B = { endStream: false };

function callB(session, body, done) {
  HEADERS_B['grpc-timeout'] = formatGrpcTimeout(DEADLINE_MS);
  const s = session.request(HEADERS_B, OPTIONS_B);
  s[CALL] = new CallB(done);
  s.on('response', onResponseB);
  s.on('data', onDataB);
  s.on('trailers', onTrailersB);
  s.on('close', onCloseB);
  s.end(body);
}

// ---- c: gRPC framed by us (gateway/upstream/h2/connection.ts)

class CallC {
  status = -1; expected = -1; received = 0; chunks = []; done; statusField = false;
  constructor(done) { this.done = done; }
  field(name, value) { if (name === 'grpc-status') this.status = Number(value); }
  headers() { /* :status and grpc-status came through field() */ }
  data(c, from, to) {
    if (this.expected < 0) { this.expected = c.readUInt32BE(from + 1); from += 5; } // the bench's answers start a piece
    this.received += to - from;
    this.chunks.push(Buffer.from(c.subarray(from, to))); // the piece is the connection's read buffer: copied
  }
  end() { this.done(this.status === 0 && this.received === this.expected); }
  closed(_code, _processed, reason) { this.reason = reason; this.done(false); }
}

const FIXED_C = headerBlock([[':method', 'POST'], [':scheme', 'http'], [':path', PATH], [':authority', 'localhost'],
  ['content-type', 'application/grpc'], ['te', 'trailers'], ['user-agent', 'tensorgate']]);
const TIMEOUT_NAME = literalField('grpc-timeout', '').subarray(0, -1); // the literal's name; the value follows

function callC(conn, body, done) {
  const t = formatGrpcTimeout(DEADLINE_MS);
  const block = Buffer.allocUnsafe(FIXED_C.length + TIMEOUT_NAME.length + 1 + t.length);
  let at = FIXED_C.copy(block, 0);
  at += TIMEOUT_NAME.copy(block, at);
  block[at++] = t.length;
  block.write(t, at, 'latin1');
  try {
    conn.request(block, new CallC(done), body, true);
  } catch {
    process.nextTick(done, false); // the connection cannot take a stream: the cell fails
  }
}

// ---- cells

async function main(argv) {
  const opt = (n, d) => { const i = argv.indexOf(n); return i >= 0 ? argv[i + 1] : d; };
  const addr = opt('--addr');
  const [host, port] = [addr.slice(0, addr.lastIndexOf(':')), Number(addr.slice(addr.lastIndexOf(':') + 1))];
  const variants = opt('--variants', 'a,b,c').split(',');
  const rounds = Number(opt('--rounds', 3));
  const concurrency = opt('--concurrency', '1,8').split(',').map(Number);
  const budgetEnd = Date.now() + Number(opt('--budget-s', 60)) * 1000;
  const payloads = [
    { name: '64B', body: message('image_stats', 'IMAGE', 'UINT8', [1, 64], 64), calls: Number(opt('--calls-64', 1500)) },
    { name: '600KB', body: message('classifier_fp32', 'INPUT', 'FP32', [1, 3, 224, 224], 602112), calls: Number(opt('--calls-600k', 200)) },
  ].filter((p) => opt('--payloads', '64B,600KB').split(',').includes(p.name));
  const sa = sessionOf(addr); const sb = sessionOf(addr);
  const conn = new H2Connection({ host, port, streamWindow: 1 << 20, maxFrameSize: 1 << 20, connectionWindow: 32 << 20,
    headerTableSize: Number(opt('--header-table-size', 4096)) });
  const clients = { a: (body, done) => callA(sa, body, done), b: (body, done) => callB(sb, body, done), c: (body, done) => callC(conn, body, done) };
  const run = (v, body, n, c) => new Promise((resolve, reject) => {
    const lat = new Float64Array(n);
    let started = 0; let finished = 0; let failed = 0;
    const one = () => {
      const i = started++;
      const t0 = process.hrtime.bigint();
      clients[v](body, (ok) => {
        lat[i] = Number(process.hrtime.bigint() - t0) / 1e6;
        if (!ok) failed++;
        if (++finished < n) {
          if (started < n) one();
        } else if (failed > 0) {
          reject(new Error(`${v}: ${failed} of ${n} calls failed${conn.unusable ? ` (${conn.unusable})` : ''}`));
        } else {
          resolve(lat);
        }
      });
    };
    for (let k = 0; k < Math.min(c, n); k++) one();
  });
  for (const v of variants) for (const p of payloads) await run(v, p.body, 50, 8); // warm: sessions up, code hot
  for (let r = 1; r <= rounds && Date.now() < budgetEnd; r++) {
    for (const p of payloads) {
      for (const c of concurrency) {
        // The variants alternate, in an order that turns each round.
        const order = variants.map((_, i) => variants[(i + r - 1) % variants.length]);
        for (const v of order) {
          /** @type {() => void} */ (global.gc)();
          process.stdout.write('CELL_START\n');
          const cpu0 = process.cpuUsage(); const t0 = process.hrtime.bigint();
          const lat = await run(v, p.body, p.calls, c);
          const cpu = process.cpuUsage(cpu0); const ms = Number(process.hrtime.bigint() - t0) / 1e6;
          /** @type {() => void} */ (global.gc)();
          lat.sort();
          const rec = { round: r, payload: p.name, c, variant: v, calls: p.calls, cpuUs: (cpu.user + cpu.system) / p.calls,
            p50Ms: lat[lat.length >> 1], perS: p.calls / ms * 1000, load: os.loadavg()[0].toFixed(2) };
          process.stdout.write(`CELL_END ${JSON.stringify(rec)}\n`);
        }
      }
    }
  }
  sa.close(); sb.close(); conn.close();
}

module.exports = { main };
