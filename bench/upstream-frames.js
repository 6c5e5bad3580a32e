// How an upstream HTTP/2 session's own settings change what an answer costs to receive: the
// reference backend's big_output model answers N bytes; this process calls it over one node:http2
// session with the settings given, c calls at a time, and reports its own CPU time per answer and
// the 'data' events per answer (a sender cuts DATA frames at the receiver's SETTINGS_MAX_FRAME_SIZE
// and stops at its windows, so both are ours to choose).
//   node bench/upstream-frames.js [--bytes 4194304] [--calls 200] [--concurrency 8] [--rounds 2]
//     [--max-frame-size N] [--window N (SETTINGS_INITIAL_WINDOW_SIZE)] [--local-window N (connection)]
'use strict';
const http2 = require('node:http2');
const { inference } = require('#dist/proto/services.js');
const procs = require('./procs');

const argv = process.argv.slice(2);
const opt = (n, d) => { const i = argv.indexOf(n); return i >= 0 ? argv[i + 1] : d; };
const bytes = Number(opt('--bytes', 4 * 1024 * 1024));
const calls = Number(opt('--calls', 200));
const concurrency = Number(opt('--concurrency', 8));
const rounds = Number(opt('--rounds', 2));

function framedCall() {
  const n = Buffer.alloc(8); n.writeBigInt64LE(BigInt(bytes));
  const msg = inference.ModelInferRequest.encode({ model_name: 'big_output', inputs: [{ name: 'N', datatype: 'INT64', shape: [1] }], raw_input_contents: [n] }).finish();
  const out = Buffer.alloc(5 + msg.length); out.writeUInt32BE(msg.length, 1); out.set(msg, 5);
  return out;
}

async function main() {
  const ref = await procs.startReference();
  /** @type {import('node:http2').Settings} */
  const settings = {};
  if (opt('--window') !== undefined) settings.initialWindowSize = Number(opt('--window'));
  if (opt('--max-frame-size') !== undefined) settings.maxFrameSize = Number(opt('--max-frame-size'));
  const session = http2.connect(`http://${ref.address}`, { settings, maxSessionMemory: 256 });
  const local = opt('--local-window');
  if (local !== undefined) session.on('connect', () => session.setLocalWindowSize(Number(local)));
  const headers = { ':method': 'POST', ':path': '/inference.GRPCInferenceService/ModelInfer', 'content-type': 'application/grpc', te: 'trailers' };
  const body = framedCall();
  let events = 0; let got = 0;
  const call = () => /** @type {Promise<void>} */ (new Promise((resolve, reject) => {
    const s = session.request(headers);
    s.on('data', (c) => { events++; got += c.length; });
    s.on('trailers', (t) => { if (t['grpc-status'] !== '0') reject(new Error(`grpc-status ${t['grpc-status']}: ${t['grpc-message']}`)); });
    s.on('end', resolve);
    s.on('error', reject);
    s.end(body);
  }));
  const run = async (n) => {
    let next = 0;
    await Promise.all(Array.from({ length: concurrency }, async () => { while (next++ < n) await call(); }));
  };
  try {
    await run(Math.min(50, calls));
    for (let r = 0; r < rounds; r++) {
      events = 0; got = 0;
      const c0 = process.cpuUsage(); const t0 = process.hrtime.bigint();
      await run(calls);
      const c = process.cpuUsage(c0); const ms = Number(process.hrtime.bigint() - t0) / 1e6;
      process.stdout.write(`${JSON.stringify(settings)}${local === undefined ? '' : ` local ${local}`} ${bytes} B c=${concurrency}: `
        + `${((c.user + c.system) / 1000 / calls).toFixed(3)} ms CPU/answer, ${(calls / ms * 1000).toFixed(0)} answers/s, `
        + `${(events / calls).toFixed(1)} 'data' events/answer (${(got / events / 1024).toFixed(1)} KiB each)\n`);
    }
  } finally {
    session.close();
    for (const e of procs.children.slice().reverse()) await procs.stopChild(e);
  }
}
main().catch((e) => { console.error(e); for (const c of procs.children) void procs.stopChild(c, 1000); process.exitCode = 1; });
