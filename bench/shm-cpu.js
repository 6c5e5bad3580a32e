#!/usr/bin/env node
// Gateway CPU per request with upstream.sharedMemory off and on, alternated (A, B, A, B, …) after a
// warm-up of each process, at concurrency 1: the A/B the bench's 1-s cells cannot give (their first
// cells carry each process's JIT warm-up and first page touches). Needs a Triton already running the
// PyTriton zoo (test/triton/zoo.py prints its ports) and `npm run build`.
//
//   node bench/shm-cpu.js --triton HTTP,GRPC [--payload-mib 4] [--requests 60] [--rounds 4]
//       [--model image_stats|identity_uint8_2mib] [--form binary|raw] [--region-mib N]
//       [--node-args "--trace-gc …" [--node-out DIR]]
//
// image_stats answers a few bytes (the input side); identity_uint8_2mib (rows of 2 MiB, fixed dims)
// answers the payload back (the output side: outputs in regions, README "Shared-memory mode").
'use strict';
const http = require('node:http');
const path = require('node:path');
const { DIST, MAIN_JS, NODE, startGateway, startProcess, cpuSeconds, stopChild } = require('./procs');

const argv = process.argv.slice(2);
const opt = (name, dflt) => {
  const i = argv.indexOf(name);
  return i >= 0 && i + 1 < argv.length ? argv[i + 1] : dflt;
};
const [, grpc] = String(opt('--triton', '')).split(',').map(Number);
if (!grpc) {
  process.stderr.write('--triton HTTP,GRPC is required (a running test/triton/zoo.py)\n');
  process.exit(2);
}
const mib = Number(opt('--payload-mib', 4));
const requests = Number(opt('--requests', 60));
const rounds = Number(opt('--rounds', 4));
const model = opt('--model', 'image_stats');
const form = opt('--form', 'binary');

function body() {
  const bytes = Buffer.alloc(mib * 1024 * 1024, 3);
  const rows = model === 'identity_uint8_2mib' ? bytes.length / (2 * 1024 * 1024) : undefined;
  const input = model === 'identity_uint8_2mib' ? 'INPUT0' : 'IMAGE';
  if (form === 'raw') return { headers: { 'inference-header-content-length': '0' }, body: bytes };
  const header = Buffer.from(JSON.stringify({
    inputs: [{ name: input, datatype: 'UINT8', shape: rows === undefined ? [1, bytes.length] : [rows, 2 * 1024 * 1024], parameters: { binary_data_size: bytes.length } }],
    parameters: { binary_data_output: true },
  }));
  return { headers: { 'inference-header-content-length': String(header.length) }, body: Buffer.concat([header, bytes]) };
}

const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
function post(port, r) {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, path: `/v2/models/${model}/infer`, method: 'POST', agent,
      headers: { 'content-type': 'application/octet-stream', 'content-length': r.body.length, ...r.headers } }, (res) => {
      let n = 0;
      res.on('data', (c) => { n += c.length; });
      res.on('end', () => (res.statusCode === 200 ? resolve(n) : reject(new Error(`HTTP ${res.statusCode}`))));
    });
    req.on('error', reject);
    req.end(r.body);
  });
}

async function run(gw, r, n) {
  const cpu0 = cpuSeconds(gw.pid);
  const t0 = performance.now();
  let bytes = 0;
  for (let i = 0; i < n; i++) bytes += await post(gw.port, r);
  return { cpuMs: (1000 * (cpuSeconds(gw.pid) - cpu0)) / n, wallMs: (performance.now() - t0) / n, answerBytes: bytes / n };
}

/** startGateway with flags for node itself. */
function withNodeArgs(flags) {
  return async (name, backend, extra) => {
    const { child, match } = await startProcess(name, NODE, [...flags, path.join(DIST, MAIN_JS),
      '--backend', backend, '--host', '127.0.0.1', '--port', '0', '--metrics-port', '0', '--log-level', 'warn', '--server-timing=false', ...extra], {
      ready: /listening on http:\/\/[^:]+:(\d+)/, timeoutMs: 30_000,
    });
    const out = opt('--node-out', undefined); // node's own stdout (--trace-gc) into DIR/<name>-<pid>.out
    if (out !== undefined) child.stdout.pipe(require('node:fs').createWriteStream(path.join(out, `${name}-${child.pid}.out`)));
    return { port: Number(match[1]), pid: child.pid, child };
  };
}

async function main() {
  const backend = `127.0.0.1:${grpc}`;
  // --node-args "…": flags for both gateways' node (--cpu-prof --cpu-prof-dir=DIR, --trace-gc; not
  // allowed in NODE_OPTIONS), --node-out DIR: their stdout.
  const nodeArgs = opt('--node-args', undefined);
  const start = nodeArgs === undefined ? startGateway : withNodeArgs(nodeArgs.split(' ').filter(Boolean));
  const off = await start('tensorgate', backend, []);
  // --region-mib N: the regions' size (default 32 MiB); one that holds only the inputs sends the
  // outputs the normal way.
  const regionMib = opt('--region-mib', undefined);
  const on = await start('tensorgate-shm', backend, ['--shared-memory', '--shared-memory-regions', '8',
    ...(regionMib === undefined ? [] : ['--shared-memory-region-bytes', String(Number(regionMib) * 1024 * 1024)])]);
  process.stdout.write(`gateways: off pid ${off.pid}, on pid ${on.pid}\n`);
  try {
    const r = body();
    for (const gw of [off, on]) await run(gw, r, requests); // warm-up
    const rows = [];
    for (let k = 0; k < rounds; k++) {
      for (const [name, gw] of /** @type {[string, typeof off][]} */ ([['off', off], ['on', on]])) {
        const m = await run(gw, r, requests);
        rows.push({ round: k + 1, shm: name, ...m });
        process.stdout.write(`${model} ${form} ${mib} MiB round ${k + 1} shm ${name}: CPU/req ${m.cpuMs.toFixed(2)} ms, wall/req ${m.wallMs.toFixed(2)} ms, answer ${m.answerBytes} B\n`);
      }
    }
    const mean = (s) => rows.filter((x) => x.shm === s).reduce((a, x) => a + x.cpuMs, 0) / rounds;
    process.stdout.write(`mean CPU/req: off ${mean('off').toFixed(2)} ms, on ${mean('on').toFixed(2)} ms\n`);
  } finally {
    agent.destroy();
    await Promise.all([stopChild(off), stopChild(on)]);
  }
}

main().catch((err) => {
  process.stderr.write(`${err.stack}\n`);
  process.exit(1);
});
