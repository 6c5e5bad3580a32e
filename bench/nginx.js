// nginx as the benches measure it (bench/run.js, bench/cpu-per-request.js --nginx): a plain reverse
// proxy in front of Triton, one worker, kept-alive upstream connections, request bodies streamed
// (proxy_request_buffering off), no access log; and a grpc_pass server in front of Triton's gRPC port.
'use strict';
const { spawn, spawnSync, execFileSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');
const { children, freePort, waitForPort } = require('./procs');

/**
 * @param {(msg: string) => void} log
 * @param {(msg: string) => never} fail
 */
function nginxBinary(log, fail) {
  for (const p of ['/usr/sbin/nginx', '/usr/bin/nginx', '/usr/local/sbin/nginx', '/usr/local/nginx/sbin/nginx']) {
    if (fs.existsSync(p)) return p;
  }
  if (process.getuid?.() === 0) {
    log('nginx is not installed: apt-get install -y nginx (Debian package, no service started)');
    try {
      execFileSync('apt-get', ['install', '-y', '--no-install-recommends', 'nginx'], {
        stdio: ['ignore', 'ignore', 'inherit'], timeout: 300_000, env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' },
      });
    } catch (err) {
      fail(`apt-get install -y nginx failed (${/** @type {Error} */ (err).message}); install nginx yourself (apt-get update && apt-get install -y nginx)`);
    }
    if (fs.existsSync('/usr/sbin/nginx')) return '/usr/sbin/nginx';
  }
  return fail('nginx is missing: run `apt-get install -y nginx` as root (Debian), then run the bench again');
}

/** @param {string} bin */
function nginxVersion(bin) {
  try {
    const r = spawnSync(bin, ['-v'], { encoding: 'utf8' });
    return (r.stderr || r.stdout || '').trim();
  } catch { return 'nginx'; }
}

/**
 * Starts nginx with its files under `dir` (made here, its parent made traversable) in front of
 * Triton's HTTP and gRPC ports; it joins procs.children, so stopChild ends it with the others.
 * `quiet()`: its exit is expected (no log).
 * @param {string} dir
 * @param {number} tritonHttp
 * @param {number} tritonGrpc
 * @param {{ log: (msg: string) => void, fail: (msg: string) => never, quiet?: () => boolean }} how
 * @returns {Promise<{ port: number, grpcPort: number, pid: number, version: string }>}
 */
async function startNginx(dir, tritonHttp, tritonGrpc, { log, fail, quiet = () => false }) {
  const bin = nginxBinary(log, fail);
  const port = await freePort();
  const grpcPort = await freePort();
  for (const d of ['', 'client_body', 'proxy', 'fastcgi', 'uwsgi', 'scgi']) fs.mkdirSync(path.join(dir, d), { recursive: true, mode: 0o777 });
  fs.chmodSync(path.dirname(dir), 0o755); // the worker may run as another user when we are root
  const conf = `# written by bench/nginx.js: a plain reverse proxy in front of Triton's HTTP port
worker_processes 1;
daemon off;
pid ${dir}/nginx.pid;
error_log ${dir}/error.log warn;
events { worker_connections 1024; }
http {
  access_log off;
  client_body_temp_path ${dir}/client_body;
  proxy_temp_path ${dir}/proxy;
  fastcgi_temp_path ${dir}/fastcgi;
  uwsgi_temp_path ${dir}/uwsgi;
  scgi_temp_path ${dir}/scgi;
  client_max_body_size 0;
  # A connection serves any number of requests, as the gateway's do: at nginx's default (1,000) an
  # h2 client gets a GOAWAY every 1,000 streams and those in flight past it are refused (the
  # bench's gRPC client, which does not retry, counted them as errors).
  keepalive_requests 1000000;
  upstream triton {
    server 127.0.0.1:${tritonHttp};
    keepalive 64;
    keepalive_requests 1000000;
  }
  server {
    listen 127.0.0.1:${port};
    location / {
      proxy_pass http://triton;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_request_buffering off;
      proxy_read_timeout 120s;
      proxy_send_timeout 120s;
    }
  }
  # gRPC: h2c in, h2c to Triton's gRPC port over kept-alive connections, bodies streamed.
  upstream triton_grpc {
    server 127.0.0.1:${tritonGrpc};
    keepalive 64;
    keepalive_requests 1000000;
  }
  server {
    listen 127.0.0.1:${grpcPort} http2;
    http2_max_concurrent_streams 1024;
    location / {
      grpc_pass grpc://triton_grpc;
      grpc_read_timeout 120s;
      grpc_send_timeout 120s;
      grpc_buffer_size 1m;
    }
  }
}
`;
  fs.writeFileSync(path.join(dir, 'nginx.conf'), conf);
  const child = spawn(bin, ['-p', dir, '-e', path.join(dir, 'error.log'), '-c', path.join(dir, 'nginx.conf')], { stdio: ['ignore', 'ignore', 'pipe'] });
  children.push({ name: 'nginx', child, group: false });
  let err = '';
  child.stderr.setEncoding('utf8').on('data', (s) => { err += s; });
  child.once('exit', (code) => { if (!quiet()) log(`nginx exited (${code}): ${err.slice(-500)}`); });
  await waitForPort(port, 10_000);
  await waitForPort(grpcPort, 10_000);
  return { port, grpcPort, pid: /** @type {number} */ (child.pid), version: nginxVersion(bin) };
}

module.exports = { startNginx };
