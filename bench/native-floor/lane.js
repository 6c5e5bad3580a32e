#!/usr/bin/env node
// A probe of the compiled lane (docs/architecture.md, "What a planned request costs, and the layer
// below it"): CPU a request of three hops in front of one Triton, for the same V2 binary request
// (bench/loadgen.js's, 64 B to image_stats or 600 KB to classifier_fp32) from h2load --h1:
//   - nginx, a plain HTTP proxy to Triton's HTTP port (bench/nginx.js);
//   - the gateway (dist/, planned path, its own h2 client to Triton's gRPC port);
//   - the lane (lane.c): the request served from kept bytes — its head compared byte for byte with
//     a kept head, its binary header with a kept body plan, the gRPC call on libnghttp2 (the copy
//     the node binary exports), the answer matched against a kept answer and written with the
//     gateway's own head bytes, the Date line's value kept current in C.
// The lane parses nothing: what JavaScript decided for a head holds for the same bytes. Here this
// script plays JavaScript's part: the first request of the shape is given back to it, sent to the
// gateway for its answer, and kept (the message as the gateway frames it for this model, the
// answer's raw output contents as runs); the lane serves every request after it. Before measuring,
// one answer of the lane is compared with the gateway's, byte for byte but the Date line's value.
// Hops alternate within each round.
//   node bench/native-floor/lane.js [--triton HTTP_PORT,GRPC_PORT] [--payload 64B|600KB] [--requests 8000]
//     [--rounds 3] [--clients 8]
'use strict';
const { execFileSync, spawn, fork } = require('node:child_process');
const fs = require('node:fs');
const net = require('node:net');
const os = require('node:os');
const path = require('node:path');

if (process.argv[2] === '--serve') {
  const [built, grpcPort, gwPort] = process.argv.slice(3);
  const lane = require(built);
  const { inference } = require('#dist/proto/services.js');
  const sockets = new Map();
  /** What was learnt of the one request shape the bench sends: the gateway's answer, the plan. */
  let learnt;
  lane.init((id, bytes) => {
    const socket = sockets.get(id);
    sockets.delete(id);
    if (bytes === null) { socket.destroy(); return; }
    // The request whole (the lane gives back what it had read), then learnt and answered here.
    const whole = (b) => {
      const end = b.indexOf('\r\n\r\n');
      return end >= 0 && b.length >= end + 4 + Number(/\r\ncontent-length: *(\d+)/i.exec(b.subarray(0, end).toString('latin1'))?.[1] ?? 0);
    };
    const go = () => learn(bytes).then((answer) => {
      socket.write(answer);
      sockets.set(lane.serve(socket._handle.fd), socket);
    }, (err) => { process.stderr.write(`lane probe: ${err.stack}\n`); socket.destroy(); });
    if (whole(bytes)) { void go(); return; }
    const more = (d) => {
      bytes = Buffer.concat([bytes, d]);
      if (!whole(bytes)) return;
      socket.removeListener('data', more);
      socket.pause();
      void go();
    };
    socket.on('data', more);
    socket.resume();
  });
  const up = lane.connect(Number(grpcPort), `127.0.0.1:${grpcPort}`);
  async function learn(bytes) {
    const end = bytes.indexOf('\r\n\r\n');
    const head = bytes.subarray(0, end + 4);
    const text = head.toString('latin1');
    const length = Number(/\r\ncontent-length: *(\d+)/i.exec(text)?.[1]);
    const ihcl = Number(/\r\ninference-header-content-length: *(\d+)/i.exec(text)?.[1]);
    const body = bytes.subarray(end + 4, end + 4 + length);
    const message = lane.lastAnswer();
    if (learnt === undefined) {
      const header = JSON.parse(body.subarray(0, ihcl).toString('utf8'));
      const tensor = body.subarray(ihcl);
      const msg = Buffer.from(inference.ModelInferRequest.encode({
        model_name: /\/v2\/models\/([^/]+)\//.exec(text)?.[1],
        inputs: header.inputs.map((i) => ({ name: i.name, datatype: i.datatype, shape: i.shape })),
        outputs: header.outputs.map((o) => ({ name: o.name })),
      }).finish());
      const prefix = Buffer.concat([msg, Buffer.from([0x3a]), varint(tensor.length)]);
      const framed = Buffer.alloc(5);
      framed.writeUInt32BE(prefix.length + tensor.length, 1);
      learnt = { head, length, bodyHeader: Buffer.from(body.subarray(0, ihcl)), segs: [[Buffer.concat([framed, prefix]), 0, 0], [null, tensor.length, ihcl]],
        answer: await exchange(Number(gwPort), bytes.subarray(0, end + 4 + length)) };
      lane.keep(head, length, up, learnt.bodyHeader, learnt.segs, [[Buffer.alloc(0), 0, 0]], Buffer.alloc(0), -1);
      return learnt.answer;
    }
    if (message !== null) {
      // The answer's runs: each raw_output_contents' bytes (field 6), the rest matched as kept.
      /** @type {[Buffer | null, number, number][]} */
      const match = [];
      let lit = [];
      const m = message.subarray(5);
      let at = 0;
      while (at < m.length) {
        const start = at;
        const tag = m[at++];
        let len = 0, shift = 0, b;
        do { b = m[at++]; len += (b & 0x7f) * 2 ** shift; shift += 7; } while (b & 0x80);
        if (tag === 0x32) {
          lit.push(m.subarray(start, at));
          match.push([Buffer.concat(lit), 0, 0], [null, len, 0]);
          lit = [];
        } else lit.push(m.subarray(start, at + len));
        at += len;
      }
      if (lit.length > 0) match.push([Buffer.concat(lit), 0, 0]);
      const runs = match.filter((s) => s[0] === null).reduce((n, s) => n + s[1], 0);
      const answerHead = learnt.answer.subarray(0, learnt.answer.length - runs);
      const dateAt = answerHead.toString('latin1').toLowerCase().indexOf('\r\ndate: ');
      lane.keep(learnt.head, learnt.length, up, learnt.bodyHeader, learnt.segs, match, answerHead, dateAt < 0 ? -1 : dateAt + 8);
    }
    return learnt.answer;
  }
  const server = net.createServer({ pauseOnConnect: true }, (socket) => {
    sockets.set(lane.serve(/** @type {any} */ (socket)._handle.fd), socket); // paused: Node never reads it
  });
  server.listen(0, '127.0.0.1', () => process.send?.({ port: /** @type {net.AddressInfo} */ (server.address()).port }));
  process.on('message', (m) => {
    if (m === 'counts') process.send?.(lane.counts());
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
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tensorgate-lane-'));
  const built = path.join(tmp, 'lane.node');
  execFileSync(process.env.CC || 'cc', ['-O2', '-fPIC', '-shared', '-Wall', '-Wextra', '-Werror', `-I${headers}`, '-o', built, path.join(__dirname, 'lane.c')]);
  try {
    const given = opt('--triton', undefined);
    const triton = given === undefined ? await procs.startTriton(log, ['image_stats', 'classifier_fp32'])
      : { http: Number(given.split(',')[0]), grpc: Number(given.split(',')[1]) };
    const nginx = await startNginx(path.join(tmp, 'nginx'), triton.http, triton.grpc, { log, fail: (m) => { throw new Error(m); }, quiet: () => true });
    const gw = await procs.startGateway('gateway', `127.0.0.1:${triton.grpc}`);
    const payload = opt('--payload', '64B');
    const req = requestOf(payload, 'binary');
    if (req.body === undefined || req.headers === undefined) throw new Error(`loadgen: no body for ${payload} binary`);
    const bodyFile = path.join(tmp, 'body');
    fs.writeFileSync(bodyFile, req.body);
    const hops = [];
    hops.push({ name: 'nginx', port: nginx.port, pids: () => [nginx.pid, ...procs.childPids(nginx.pid)] });
    hops.push({ name: 'gateway', port: gw.port, pids: () => [gw.pid] });
    {
      const child = fork(__filename, ['--serve', built, String(triton.grpc), String(gw.port)], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
      procs.children.push({ name: 'lane', child, group: false });
      const { port } = await new Promise((resolve) => child.once('message', resolve));
      hops.push({ name: 'lane', port, pids: () => [child.pid], child });
    }
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
      const a = undated(await exchange(hops[hops.length - 1]?.port, req)), b = undated(await exchange(gw.port, req));
      process.stdout.write(`answers: ${a === b ? `the same ${a.length} bytes as the gateway's` : `DIFFER\n${a.slice(0, 400)}\n---\n${b.slice(0, 400)}`}\n`);
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
      process.stdout.write(`${hop.name}: ${counts.served} served in C, ${counts.handedBack} given back to JavaScript, ${counts.failed} answers not kept\n`);
      hop.child.send('stop');
    }
  } finally {
    for (const e of procs.children.slice().reverse()) await procs.stopChild(e);
    fs.rmSync(tmp, { recursive: true, force: true });
  }
}

/** One request (raw bytes, or {path, headers, body}) on a fresh connection: the whole answer's bytes, head and body. */
function exchange(port, req) {
  return new Promise((resolve, reject) => {
    const s = net.connect(port, '127.0.0.1');
    let buf = Buffer.alloc(0);
    s.on('error', reject);
    s.on('data', (d) => {
      buf = Buffer.concat([buf, d]);
      const end = buf.indexOf('\r\n\r\n');
      if (end === -1) return;
      const length = Number(/\r\ncontent-length: *(\d+)/i.exec(buf.subarray(0, end).toString('latin1'))?.[1] ?? 0);
      if (buf.length < end + 4 + length) return;
      s.destroy();
      resolve(buf.subarray(0, end + 4 + length));
    });
    if (Buffer.isBuffer(req)) { s.write(req); return; }
    const head = `POST ${req.path} HTTP/1.1\r\nHost: 127.0.0.1\r\n${Object.entries(req.headers ?? {}).map(([k, v]) => `${k}: ${v}\r\n`).join('')}content-length: ${req.body.length}\r\n\r\n`;
    s.write(Buffer.concat([Buffer.from(head, 'latin1'), req.body]));
  });
}

/** A protobuf varint. */
function varint(n) {
  const out = [];
  while (n > 0x7f) { out.push((n & 0x7f) | 0x80); n = Math.floor(n / 128); }
  out.push(n);
  return Buffer.from(out);
}
