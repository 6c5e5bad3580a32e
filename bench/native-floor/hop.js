#!/usr/bin/env node
// A probe of the compiled planned path against real Triton (docs/architecture.md, "What a planned
// request costs, and the layer below it"): CPU a request of five hops in front of one Triton, for
// the same V2 binary request (bench/loadgen.js's: 64 B to image_stats, or 600 KB to classifier_fp32,
// where the two hop.c hops do not run) from h2load --h1:
//   - nginx, a plain HTTP proxy to Triton's HTTP port (bench/nginx.js);
//   - the gateway with the compiled lane off (dist/, planned path, its own h2 client to Triton's gRPC port);
//   - C: hop.c reads the request and forwards it as a gRPC call on its own HTTP/2 connection to
//     Triton's gRPC port, framed from bytes prepared once (the message for this one request), and
//     answers with the gateway's own answer to it, on the call's trailers;
//   - C + JS calls: the same, with each request and each answer a call into JavaScript that forwards
//     and answers through the module (C's transport and framing under JavaScript's decisions);
//   - the gateway with the compiled lane on (its default: gateway/native/lane.c), its answer
//     first compared with the gateway's byte for byte (the Date value aside).
// Neither hop.c hop parses HTTP, HPACK or protobuf by any standard: they measure what the compiled
// layer's work costs at its smallest, not a gateway. Hops alternate within each round.
//   node bench/native-floor/hop.js [--triton HTTP_PORT,GRPC_PORT] [--payload 64B|600KB] [--requests 8000]
//     [--rounds 3] [--clients 8]
'use strict';
const { execFileSync, spawn, fork } = require('node:child_process');
const fs = require('node:fs');
const net = require('node:net');
const os = require('node:os');
const path = require('node:path');
const { exchange } = require('./exchange');

if (process.argv[2] === '--serve') {
  const [mode, built, grpcPort, answerFile] = process.argv.slice(3);
  const native = require(built);
  const { PREFACE, frame, SETTINGS } = require('#dist/gateway/upstream/h2/frames.js');
  const { headerBlock } = require('#dist/gateway/upstream/h2/hpack.js');
  const { inference } = require('#dist/proto/services.js');
  const tensor = Buffer.alloc(64);
  for (let i = 0; i < 64; i++) tensor[i] = (i * 31 + 7) & 0xff; // bench/loadgen.js's 64 B tensor
  const msg = inference.ModelInferRequest.encode({
    model_name: 'image_stats', inputs: [{ name: 'IMAGE', datatype: 'UINT8', shape: [1, 64] }],
    outputs: [{ name: 'LEN' }, { name: 'SUM' }], raw_input_contents: [tensor],
  }).finish();
  const framed = Buffer.alloc(5 + msg.length);
  framed.writeUInt32BE(msg.length, 1);
  framed.set(msg, 5);
  const block = headerBlock([[':method', 'POST'], [':scheme', 'http'], [':path', '/inference.GRPCInferenceService/ModelInfer'],
    [':authority', `127.0.0.1:${grpcPort}`], ['content-type', 'application/grpc'], ['te', 'trailers']]);
  const preface = Buffer.concat([PREFACE, frame(SETTINGS, 0, 0)]);
  native.connect(Number(grpcPort), preface, block, framed, fs.readFileSync(answerFile),
    (id) => native.forward(id), (id) => native.answer(id));
  const sockets = [];
  const server = net.createServer({ pauseOnConnect: true }, (socket) => {
    sockets.push(socket); // paused: Node never reads it
    native.serve(/** @type {any} */ (socket)._handle.fd, mode === 'cjs');
  });
  server.listen(0, '127.0.0.1', () => process.send?.({ port: /** @type {net.AddressInfo} */ (server.address()).port }));
  process.on('message', (m) => {
    if (m === 'counts') process.send?.(native.counts());
    if (m === 'stop') process.exit(0);
  });
} else {
  main().catch((err) => {
    process.stderr.write(`${err.stack}\n`);
    process.exit(1);
  });
}

async function main() {
  const procs = require('../procs');
  const { startNginx } = require('../nginx');
  const { requestOf } = require('../loadgen');
  const argv = process.argv.slice(2);
  const opt = (name, dflt) => { const i = argv.indexOf(name); return i === -1 ? dflt : argv[i + 1]; };
  const requests = Number(opt('--requests', 8000));
  const rounds = Number(opt('--rounds', 3));
  const clients = Number(opt('--clients', 8));
  const log = (s) => process.stderr.write(`${s}\n`);
  const headers = ['/usr/include/node', '/usr/local/include/node', path.resolve(path.dirname(fs.realpathSync(process.execPath)), '..', 'include', 'node')]
    .find((d) => fs.existsSync(path.join(d, 'node_api.h')) && fs.existsSync(path.join(d, 'uv.h')));
  if (headers === undefined) { process.stdout.write('no node_api.h and uv.h: the probe needs Node\'s headers\n'); return; }
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tensorgate-hop-'));
  const built = path.join(tmp, 'hop.node');
  execFileSync(process.env.CC || 'cc', ['-O2', '-fPIC', '-shared', '-Wall', '-Wextra', '-Werror', `-I${headers}`, '-o', built, path.join(__dirname, 'hop.c')]);
  try {
    const given = opt('--triton', undefined);
    const triton = given === undefined ? await procs.startTriton(log, ['image_stats', 'classifier_fp32'])
      : { http: Number(given.split(',')[0]), grpc: Number(given.split(',')[1]) };
    const nginx = await startNginx(path.join(tmp, 'nginx'), triton.http, triton.grpc, { log, fail: (m) => { throw new Error(m); }, quiet: () => true });
    const gw = await procs.startGateway('gateway', `127.0.0.1:${triton.grpc}`, ['--compiled-lane=false']);
    const payload = opt('--payload', '64B');
    const req = requestOf(payload, 'binary');
    if (req.body === undefined || req.headers === undefined) throw new Error(`loadgen: no body for ${payload} binary`);
    const bodyFile = path.join(tmp, 'body');
    fs.writeFileSync(bodyFile, req.body);
    const answerFile = path.join(tmp, 'answer');
    fs.writeFileSync(answerFile, await exchange(gw.port, req));
    const hops = [];
    hops.push({ name: 'nginx', port: nginx.port, pids: () => [nginx.pid, ...procs.childPids(nginx.pid)] });
    hops.push({ name: 'gateway', port: gw.port, pids: () => [gw.pid] });
    // hop.c's message is the 64 B request's: its two hops run at that size only.
    for (const mode of payload === '64B' ? ['c', 'cjs'] : []) {
      const child = fork(__filename, ['--serve', mode, built, String(triton.grpc), answerFile], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
      procs.children.push({ name: `hop-${mode}`, child, group: false });
      const { port } = await new Promise((resolve) => child.once('message', resolve));
      hops.push({ name: mode === 'c' ? 'C' : 'C + JS calls', port, pids: () => [child.pid], child });
    }
    const gwLane = await procs.startGateway('gateway-lane', `127.0.0.1:${triton.grpc}`);
    hops.push({ name: 'gateway, lane on', port: gwLane.port, pids: () => [gwLane.pid] });
    const run = (port, n) => new Promise((resolve, reject) => {
      const h = spawn('h2load', ['--h1', '-n', String(n), '-c', String(clients), '-m', '1', '-N', '10', '-d', bodyFile,
        ...Object.entries(req.headers ?? {}).flatMap(([k, v]) => ['-H', `${k}: ${v}`]), `http://127.0.0.1:${port}${req.path}`], { stdio: ['ignore', 'pipe', 'inherit'] });
      let out = '';
      h.stdout.on('data', (d) => { out += d; });
      h.on('close', (code) => (code === 0 ? resolve(out) : reject(new Error(`h2load exit ${code}`))));
    });
    const cpu = (pids) => pids.reduce((s, p) => {
      const f = procs.faultsAndSystem(p);
      return { user: s.user + f.user, system: s.system + f.system };
    }, { user: 0, system: 0 });
    for (const hop of hops) await run(hop.port, Math.min(2000, requests)); // warm-up
    {
      // The lane's answer against the gateway's, byte for byte but the Date line's value.
      const undated = (b) => b.toString('latin1').replace(/\r\ndate: [^\r]*/i, '\r\ndate: -');
      const a = undated(await exchange(gwLane.port, req)), b = undated(await exchange(gw.port, req));
      process.stdout.write(`lane's answer: ${a === b ? `the same ${a.length} bytes as the gateway's` : `DIFFERS\n${a.slice(0, 400)}\n---\n${b.slice(0, 400)}`}\n`);
    }
    for (let r = 1; r <= rounds; r++) {
      for (const hop of hops) {
        const pids = hop.pids();
        const a = cpu(pids);
        const t0 = process.hrtime.bigint();
        const out = await run(hop.port, requests);
        const s = Number(process.hrtime.bigint() - t0) / 1e9;
        const b = cpu(pids);
        const ok = /status codes: (\d+) 2xx/.exec(out)?.[1];
        const per = (x) => (x * 1000 / requests).toFixed(3);
        process.stdout.write(`round ${r} ${hop.name}: ${per(b.user + b.system - a.user - a.system)} ms CPU/req (user ${per(b.user - a.user)}, `
          + `system ${per(b.system - a.system)}), ${Math.round(requests / s)} req/s, ${ok} of ${requests} 2xx\n`);
      }
    }
    for (const hop of hops) {
      if (hop.child === undefined) continue;
      const counts = await new Promise((resolve) => { hop.child.once('message', resolve); hop.child.send('counts'); });
      process.stdout.write(`${hop.name}: ${counts.answered} answered, ${counts.failed} failed writes or upstream errors\n`);
      hop.child.send('stop');
    }
  } finally {
    for (const e of procs.children.slice().reverse()) await procs.stopChild(e);
    fs.rmSync(tmp, { recursive: true, force: true });
  }
}
