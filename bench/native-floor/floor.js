#!/usr/bin/env node
// A probe of the compiled layer's floor (docs/architecture.md, "What a planned request costs, and the
// layer below it"): the CPU a request costs the server process when its connection is read and
// answered in C inside Node's event loop (floor.c: uv_poll on the descriptor of an accepted socket
// Node never reads, one fixed answer a request), the same with each request handed to JavaScript
// (a call, napi_make_callback, as Node's own I/O callbacks) whose answer C writes — the cost of a
// C transport under JavaScript's logic — and the same in JavaScript on net.Socket, its reads as
// 'data' events or as the gateway reads them (buffers/reads.ts, onread into kept pages; needs
// `npm run build`), its answers written with socket.write.
// None parses HTTP by any standard: a request is a head up to CRLF CRLF and its Content-Length
// bytes. h2load (HTTP/1.1) sends the load; the servers run in turn, alternating, in one run.
// --rps N paces each client at N requests a second (h2load --rps), to measure at a gateway's real
// rate, where caches are colder than at full speed.
//   node bench/native-floor/floor.js [--requests 40000] [--clients 8] [--rounds 3] [--body-bytes 64] [--rps N]
'use strict';
const { execFileSync, spawn, fork } = require('node:child_process');
const fs = require('node:fs');
const net = require('node:net');
const os = require('node:os');
const path = require('node:path');

const ANSWER = Buffer.from('HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}');

function serve() {
  const mode = process.argv[3];
  const native = mode === 'js' || mode === 'jsread' ? undefined : require(process.argv[4]);
  const { readInto } = require('#dist/gateway/buffers/reads.js');
  if (native !== undefined) native.setAnswer(ANSWER);
  // cjs: C reads and frames, each request is a call into JavaScript, whose answer C writes.
  if (mode === 'cjs') native.onRequest((id) => native.write(id, ANSWER));
  let count = 0;
  const sockets = [];
  const server = net.createServer({ pauseOnConnect: native !== undefined, noDelay: true }, (socket) => {
    if (native !== undefined) {
      sockets.push(socket); // paused: Node never reads it; C reads a dup of its descriptor
      native.serve(/** @type {any} */ (socket)._handle.fd, mode === 'cjs');
      return;
    }
    let buf = Buffer.alloc(0);
    let bodyLeft = 0;
    const onChunk = (chunk) => {
      buf = buf.length === 0 ? chunk : Buffer.concat([buf, chunk]);
      let at = 0;
      let owed = 0;
      for (;;) {
        if (bodyLeft > 0) {
          const take = Math.min(bodyLeft, buf.length - at);
          at += take;
          bodyLeft -= take;
          if (bodyLeft > 0) break;
          owed++;
          continue;
        }
        const end = buf.indexOf('\r\n\r\n', at, 'latin1');
        if (end === -1) break;
        const head = buf.toString('latin1', at, end);
        const m = /\r\ncontent-length:\s*(\d+)/i.exec(head);
        at = end + 4;
        if (m !== null && Number(m[1]) > 0) bodyLeft = Number(m[1]);
        else owed++;
      }
      buf = buf.subarray(at);
      for (let i = 0; i < owed; i++) socket.write(ANSWER);
      count += owed;
    };
    // jsread: the gateway's own reads (buffers/reads.ts: onread into its pages, no 'data' events).
    if (mode === 'jsread') readInto(socket, onChunk);
    else socket.on('data', onChunk);
    socket.on('error', () => undefined);
  });
  server.listen(0, '127.0.0.1', () => process.send?.({ port: /** @type {net.AddressInfo} */ (server.address()).port }));
  process.on('message', (m) => {
    if (m === 'cpu') process.send?.({ cpu: process.cpuUsage(), count: native !== undefined ? native.count() : count });
    if (m === 'stop') { for (const s of sockets) s.destroy(); server.close(); process.exit(0); }
  });
}
if (process.argv[2] === '--serve') serve();
else main().catch((err) => { process.stderr.write(`${err.message}\n`); process.exit(1); });

async function main() {
  const argv = process.argv.slice(2);
  const opt = (name, dflt) => { const i = argv.indexOf(name); return i === -1 ? dflt : argv[i + 1]; };
  const requests = Number(opt('--requests', 40000));
  const clients = Number(opt('--clients', 8));
  const rounds = Number(opt('--rounds', 3));
  const bodyBytes = Number(opt('--body-bytes', 64));
  const rps = opt('--rps', undefined);

  const built = path.join(os.tmpdir(), `tensorgate-floor-${process.pid}.node`);
  const headers = ['/usr/include/node', '/usr/local/include/node', path.resolve(path.dirname(fs.realpathSync(process.execPath)), '..', 'include', 'node')]
    .find((d) => fs.existsSync(path.join(d, 'node_api.h')) && fs.existsSync(path.join(d, 'uv.h')));
  if (headers === undefined) { process.stdout.write('no node_api.h and uv.h: the probe needs Node\'s headers\n'); return; }
  execFileSync(process.env.CC || 'cc', ['-O2', '-fPIC', '-shared', '-Wall', '-Wextra', '-Werror', `-I${headers}`, '-o', built, path.join(__dirname, 'floor.c')]);
  const bodyFile = path.join(os.tmpdir(), `tensorgate-floor-${process.pid}.body`);
  fs.writeFileSync(bodyFile, Buffer.alloc(bodyBytes, 0x61));

  const ask = (child, m) => new Promise((resolve) => { child.once('message', resolve); child.send(m); });

  async function cell(mode) {
    const child = fork(__filename, ['--serve', mode, built], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
    const { port } = await new Promise((resolve) => child.once('message', resolve));
    const run = (n) => new Promise((resolve, reject) => {
      const h = spawn('h2load', ['--h1', '-n', String(n), '-c', String(clients), '-m', '1', '-d', bodyFile,
        ...(rps === undefined ? [] : [`--rps=${rps}`]), '-H', 'content-type: application/octet-stream', `http://127.0.0.1:${port}/v2/models/m/infer`], { stdio: ['ignore', 'pipe', 'inherit'] });
      let out = '';
      h.stdout.on('data', (d) => { out += d; });
      h.on('close', (code) => (code === 0 ? resolve(out) : reject(new Error(`h2load exit ${code}`))));
    });
    await run(Math.min(rps === undefined ? 5000 : 1000, requests)); // warm-up
    const a = await ask(child, 'cpu');
    const started = process.hrtime.bigint();
    const out = await run(requests);
    const seconds = Number(process.hrtime.bigint() - started) / 1e9;
    const b = await ask(child, 'cpu');
    child.send('stop');
    const done = b.count - a.count;
    const ok = /(\d+) succeeded/.exec(out)?.[1];
    const user = (b.cpu.user - a.cpu.user) / 1000 / done;
    const system = (b.cpu.system - a.cpu.system) / 1000 / done;
    return { mode, done, ok: Number(ok), user, system, rps: done / seconds };
  }
  for (let r = 1; r <= rounds; r++) {
    for (const mode of ['c', 'cjs', 'jsread', 'js']) {
      const c = await cell(mode);
      process.stdout.write(`round ${r} ${{ c: 'C on uv_poll', cjs: 'C, a JS call a request', jsread: 'JS, the gateway\'s reads', js: 'JS net.Socket' }[mode]}: ${(c.user + c.system).toFixed(4)} ms CPU/req `
        + `(user ${c.user.toFixed(4)}, system ${c.system.toFixed(4)}), ${Math.round(c.rps)} req/s, ${c.done} answered, h2load ${c.ok} ok\n`);
    }
  }
  fs.rmSync(built, { force: true });
  fs.rmSync(bodyFile, { force: true });
}
