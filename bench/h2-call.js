// The upstream unary ModelInfer call at its lowest per-call cost: this process makes N calls at
// concurrency c over one connection and measures its OWN CPU per call (process.cpuUsage), JS heap
// bytes allocated per call (--trace-gc-nvp `allocated=` summed between a forced GC before and one
// after the cell) and p50 latency, for three clients, alternating within one run, several rounds:
//   a  node:http2 as upstream/infer/h2-plane.ts uses it: a headers object built per call (spread),
//      'response'/'data'/'trailers'/'end'/'error'/'close' closures, an abort listener, a deadline timer,
//      cork/uncork, end(message, callback), grpc/envelope.ts's decoder;
//   b  node:http2 with the least per-call work found: one headers object reused (only grpc-timeout
//      set per call), no signal, no timer, waitForTrailers off, the message as end()'s one write,
//      'response'/'data'/'trailers'/'close' listeners that are module-level functions (the call's
//      state hangs off the stream), the envelope read inline;
//   c  gateway/upstream/h2/connection.ts: gRPC framed by us on one net.Socket, HEADERS + DATA in one
//      socket write, a pre-built HPACK block, one handler object per call.
// The messages are framed as the gateway frames them (gateway/infer/frame-request.ts): 64 B UINT8
// for image_stats and 600 KB FP32 for classifier_fp32.
//   node bench/h2-call.js [--backend ref|HOST:PORT (a Triton gRPC port)] [--variants a,b,c]
//     [--rounds 3] [--calls-64 1500] [--calls-600k 200] [--concurrency 1,8] [--payloads 64B,600KB]
//     [--header-table-size N (c's SETTINGS_HEADER_TABLE_SIZE, default 4096)]
// Bounded: calls per cell are fixed, and the whole run stops after --budget-s (default 60).
'use strict';
const { spawn } = require('node:child_process');
const procs = require('./procs');

const argv = process.argv.slice(2);
const opt = (n, d) => { const i = argv.indexOf(n); return i >= 0 ? argv[i + 1] : d; };

async function parent() {
  let backend = opt('--backend', 'ref');
  if (backend === 'ref') backend = (await procs.startReference()).address;
  const child = spawn(process.execPath, ['--trace-gc-nvp', '--expose-gc', __filename, '--child', ...argv, '--addr', backend],
    { stdio: ['ignore', 'pipe', 'inherit'] });
  const kill = setTimeout(() => child.kill('SIGKILL'), Number(opt('--budget-s', 60)) * 1000 + 30_000);
  let allocated = 0;
  let buf = '';
  child.stdout.setEncoding('utf8').on('data', (s) => {
    buf += s;
    let nl;
    while ((nl = buf.indexOf('\n')) >= 0) {
      const line = buf.slice(0, nl);
      buf = buf.slice(nl + 1);
      const m = / allocated=(\d+)/.exec(line);
      if (m) allocated += Number(m[1]);
      else if (line.startsWith('CELL_START')) allocated = 0;
      else if (line.startsWith('CELL_END ')) {
        const r = JSON.parse(line.slice(9));
        process.stdout.write(`${r.round} ${r.payload.padEnd(5)} c=${r.c} ${r.variant}: ${r.cpuUs.toFixed(1)} µs CPU/call, `
          + `${(allocated / r.calls / 1024).toFixed(1)} KiB/call, p50 ${r.p50Ms.toFixed(3)} ms, ${r.perS.toFixed(0)} calls/s, load ${r.load}\n`);
      } else if (!line.startsWith('[')) process.stdout.write(`${line}\n`);
    }
  });
  await new Promise((resolve) => child.on('exit', resolve));
  clearTimeout(kill);
  for (const e of procs.children.slice().reverse()) await procs.stopChild(e);
  process.exitCode = child.exitCode ?? 1;
}

if (argv.includes('--child')) require('./h2-call-child.js').main(argv).catch((e) => { console.error(e); process.exit(1); });
else parent().catch((e) => { console.error(e); for (const c of procs.children) void procs.stopChild(c, 1000); process.exitCode = 1; });
