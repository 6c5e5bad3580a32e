// Micro-benchmark of the message buffer pool (docs/cut-through.md#buffers): frame a ModelInferRequest and fill
// its one tensor slot, with a fresh Buffer.allocUnsafe per message (before) or a page from
// buffers/pool.ts (after, released when done as a request would). Fills as the decoders
// do: a copy (binary/raw bodies) or a base64 write into the slot (JSON base64 bodies).
//
//   npm run -s build && node_modules/.bin/node bench/pool.js [rounds]
//
// Prints, per payload and fill, the time per message (median and min over the rounds, each round
// a fixed number of messages) and the minor page faults per message. Variants alternate order
// each round so drift on a shared machine hits both alike.
'use strict';
const { frameInferRequest } = require('#dist/gateway/infer/frame-request.js');
const { BufferPool } = require('#dist/gateway/buffers/pool.js');

const ROUNDS = Math.max(5, Number(process.argv[2] ?? 7));
/** @type {[string, number][]} */
const PAYLOADS = [['600 KB', 602112], ['4 MiB', 4 << 20], ['16 MiB', 16 << 20]];
/** Messages per round: about 256 MB of payload, at least 16. */
const perRound = (n) => Math.max(16, Math.round((256 << 20) / n));

function request(n) {
  return {
    modelName: 'image_stats', modelVersion: '', id: undefined, parameters: new Map(),
    inputs: [{ name: 'IMAGE', datatype: 'UINT8', shape: [1, n], parameters: new Map(), byteSize: n }],
    outputs: undefined, binaryDataOutput: true,
  };
}

function run(variant, req, fill, count, pool) {
  const allocate = variant === 'pooled' ? (size) => pool.acquire(size) : undefined;
  const faults0 = process.resourceUsage().minorPageFault;
  const t0 = process.hrtime.bigint();
  let sink = 0;
  for (let i = 0; i < count; i++) {
    const framed = frameInferRequest(req, allocate);
    fill(framed.message, /** @type {{ offset: number }} (the one input has no inline data) */ (framed.slots[0]).offset);
    sink ^= framed.message[framed.message.length - 1];
    if (variant === 'pooled') pool.release(framed.message);
  }
  const us = Number(process.hrtime.bigint() - t0) / 1e3 / count;
  const faults = (process.resourceUsage().minorPageFault - faults0) / count;
  return { us, faults, sink };
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const ms = (us) => (us / 1000).toFixed(us < 1000 ? 3 : 2);

const rows = [];
for (const [label, n] of PAYLOADS) {
  const payload = Buffer.allocUnsafe(n);
  for (let i = 0; i < n; i++) payload[i] = (i * 31 + 7) & 0xff;
  const b64 = payload.toString('base64');
  const fills = {
    copy: (m, at) => payload.copy(m, at),
    base64: (m, at) => m.write(b64, at, 'base64'),
  };
  const req = request(n);
  const count = perRound(n);
  for (const [fillName, fill] of Object.entries(fills)) {
    const pool = new BufferPool(64 << 20);
    const r = { fresh: [], pooled: [] };
    const faults = { fresh: [], pooled: [] };
    run('fresh', req, fill, 4, pool); // warm both code paths
    run('pooled', req, fill, 4, pool);
    for (let round = 0; round < ROUNDS; round++) {
      const order = round % 2 === 0 ? ['fresh', 'pooled'] : ['pooled', 'fresh'];
      for (const v of order) {
        const x = run(v, req, fill, count, pool);
        r[v].push(x.us);
        faults[v].push(x.faults);
      }
    }
    const row = {
      payload: label, fill: fillName, count,
      freshMedian: median(r.fresh), freshMin: Math.min(...r.fresh),
      pooledMedian: median(r.pooled), pooledMin: Math.min(...r.pooled),
      freshFaults: median(faults.fresh), pooledFaults: median(faults.pooled),
    };
    rows.push(row);
    process.stderr.write(`${label} ${fillName}: fresh ${ms(row.freshMedian)} ms, pooled ${ms(row.pooledMedian)} ms\n`);
  }
}

console.log(`Node ${process.version}, ${ROUNDS} rounds, per message (median / min over rounds):\n`);
console.log('| payload | fill | fresh Buffer.allocUnsafe | pooled page | fresh ÷ pooled (median) | page faults per message fresh / pooled |');
console.log('|---|---|---|---|---|---|');
for (const r of rows) {
  console.log(`| ${r.payload} | ${r.fill} | ${ms(r.freshMedian)} / ${ms(r.freshMin)} ms | ${ms(r.pooledMedian)} / ${ms(r.pooledMin)} ms | ${(r.freshMedian / r.pooledMedian).toFixed(1)}× | ${Math.round(r.freshFaults)} / ${Math.round(r.pooledFaults)} |`);
}
