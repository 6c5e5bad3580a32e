// The built CLI (bin/tensorgate → dist/gateway/main.js), as a user runs it. `npm test` builds first.
import { type ChildProcessWithoutNullStreams, spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { createServer, type AddressInfo, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { listenError } from '../../gateway/config/listen-error';
import { spawnDemoGateway } from '../support/demo-gateway';
import { firstLine, nextEvent } from '../support/wait';
import { CURL, needs } from '../support/tools';
import { curl } from '../support/curl';

const BIN = join(__dirname, '../../bin/tensorgate');

// Each test starts the built CLI as a child process (a second or more on a busy machine) and some
// wait out a drain grace: jest's default 5 s per test is too tight for that.
jest.setTimeout(30_000);

describe('tensorgate CLI', () => {
  test('--help lists the options and exits 0', () => {
    const r = spawnSync(BIN, ['--help'], { encoding: 'utf8' });
    expect(r.status).toBe(0);
    expect(r.stdout).toMatch(/^Usage: tensorgate/);
    expect(r.stdout).toContain('--backend HOST:PORT');
    expect(r.stdout).toContain('TENSORGATE_SERVER_PORT');
  });

  test('--version prints the package version and exits 0', () => {
    const r = spawnSync(BIN, ['--version'], { encoding: 'utf8' });
    const { version } = JSON.parse(readFileSync(join(__dirname, '../../package.json'), 'utf8')) as { version: string };
    expect([r.status, r.stdout, r.stderr]).toEqual([0, `tensorgate ${version}\n`, '']);
  });

  needs(CURL()).test('--demo-backend runs the demo backend alone; a gateway started apart uses it; SIGTERM stops it with 0', async () => {
    const backend = spawn(BIN, ['--demo-backend', '--port', '0'], { stdio: ['pipe', 'pipe', 'pipe'] });
    let gateway: ChildProcessWithoutNullStreams | undefined;
    try {
      const address = /^tensorgate demo backend listening on (127\.0\.0\.1:\d+) \(Triton gRPC; try: tensorgate --backend 127\.0\.0\.1:\d+ --config config\/demo-openai\.yaml\)$/.exec(await firstLine(backend))![1]!;
      gateway = spawn(BIN, ['--backend', address, '--host', '127.0.0.1', '--port', '0', '--metrics-port', '0'], { stdio: ['pipe', 'pipe', 'pipe'] });
      const url = new RegExp(`^tensorgate listening on (\\S+) \\(backend ${address}\\)$`).exec(await firstLine(gateway))![1]!;
      const r = await curl(`${url}/v2/models/identity_fp32/infer`, '-d', '{"inputs":[{"name":"INPUT0","datatype":"FP32","shape":[1,2],"data":[1,2.5]}]}');
      expect(r.body.toString()).toBe('{"model_name":"identity_fp32","model_version":"1","outputs":[{"name":"OUTPUT0","datatype":"FP32","shape":[1,2],"data":[1.0,2.5]}]}');
      const exited = nextEvent(backend, 'exit', 10_000);
      backend.kill('SIGTERM');
      expect((await exited)[0]).toBe(0);
    } finally {
      gateway?.kill('SIGKILL');
      backend.kill('SIGKILL');
    }
  });

  /**
   * Start-up failures: each one line on stderr per problem (`tensorgate: <key>: what; what to
   * do`), exit 2, no stack, nothing on stdout — with workers too, where the primary says it once.
   */
  describe('start-up errors', () => {
    let busy: Server;
    let busyPort: number;
    let dir: string;
    beforeAll(async () => {
      busy = createServer().listen(0, '127.0.0.1');
      await once(busy, 'listening');
      busyPort = (busy.address() as AddressInfo).port;
      dir = mkdtempSync(join(tmpdir(), 'tg-cli-'));
      writeFileSync(join(dir, 'bad.yaml'), 'server: [\n');
      writeFileSync(join(dir, 'keys.yaml'), 'keys:\n  - { id: a, groups: [inference] }\n');
    });
    afterAll(() => {
      busy.close();
      rmSync(dir, { recursive: true, force: true });
    });
    const LISTEN = ['--host', '127.0.0.1', '--port', '0', '--metrics-port', '0'];
    const cases: [string, () => string[], () => readonly (string | RegExp)[]][] = [
      ['main port in use', () => ['--demo', ...LISTEN, '--port', String(busyPort)],
        () => [`server.port: 127.0.0.1:${busyPort} is already in use (EADDRINUSE); stop what listens there or choose another port (--port)`]],
      ['main port in use, 2 workers (SO_REUSEPORT reservation)', () => ['--demo', ...LISTEN, '--port', String(busyPort), '--workers', '2'],
        () => [`server.port: 127.0.0.1:${busyPort} is already in use (EADDRINUSE); stop what listens there or choose another port (--port)`]],
      ['main port in use, 2 workers on the shared handle', () => ['--demo', ...LISTEN, '--port', String(busyPort), '--workers', '2', '--reuse-port=false'],
        () => [`server.port: 127.0.0.1:${busyPort} is already in use (EADDRINUSE); stop what listens there or choose another port (--port)`]],
      ['metrics port in use', () => ['--demo', ...LISTEN, '--metrics-port', String(busyPort)],
        () => [`server.metricsPort: 127.0.0.1:${busyPort} is already in use (EADDRINUSE); stop what listens there or choose another port (--metrics-port)`]],
      ['metrics port in use, 2 workers', () => ['--demo', ...LISTEN, '--metrics-port', String(busyPort), '--workers', '2'],
        () => [`server.metricsPort: 127.0.0.1:${busyPort} is already in use (EADDRINUSE); stop what listens there or choose another port (--metrics-port)`]],
      ['both ports in use: both said at once', () => ['--demo', ...LISTEN, '--port', String(busyPort), '--metrics-port', String(busyPort)],
        () => [`server.port: 127.0.0.1:${busyPort} is already in use (EADDRINUSE); stop what listens there or choose another port (--port)`,
          `server.metricsPort: 127.0.0.1:${busyPort} is already in use (EADDRINUSE); stop what listens there or choose another port (--metrics-port)`]],
      ['a host that is not this machine\'s', () => ['--demo', ...LISTEN, '--host', '192.0.2.1'],
        () => ['server.host: 192.0.2.1 is not an address of this machine (EADDRNOTAVAIL); give one of its addresses, or 0.0.0.0 for all (--host)']],
      ['auth.keysFile missing', () => ['--demo', ...LISTEN, '--auth', '--auth-keys-file', '/nonexistent/keys.yaml'],
        () => ['auth.keysFile: cannot read /nonexistent/keys.yaml (ENOENT: no such file); give a readable file (--auth-keys-file)']],
      ['auth.keysFile missing, 2 workers', () => ['--demo', ...LISTEN, '--auth', '--auth-keys-file', '/nonexistent/keys.yaml', '--workers', '2'],
        () => ['auth.keysFile: cannot read /nonexistent/keys.yaml (ENOENT: no such file); give a readable file (--auth-keys-file)']],
      ['auth.keysFile with a key without a token, 2 workers', () => ['--demo', ...LISTEN, '--auth', '--auth-keys-file', join(dir, 'keys.yaml'), '--workers', '2'],
        () => [/^auth\.keysFile \S+keys\.yaml: .*token.*; fix the file or the key \(docs\/production\.md#authentication\)$/]],
      ['auth.jwt.jwksFile a directory', () => ['--demo', ...LISTEN, '--auth', '--auth-jwks-file', '/'],
        () => ['auth.jwt.jwksFile: cannot read / (a directory, not a file); give a readable file (--auth-jwks-file)']],
      ['server.tls.cert missing', () => ['--demo', ...LISTEN, '--tls-cert', '/nonexistent/tls.crt', '--tls-key', '/nonexistent/tls.key'],
        () => ['server.tls.cert: cannot read /nonexistent/tls.crt (ENOENT: no such file); give a readable file (--tls-cert)',
          'server.tls.key: cannot read /nonexistent/tls.key (ENOENT: no such file); give a readable file (--tls-key)']],
      ['upstream.tls.ca missing', () => ['--backend', '127.0.0.1:1', ...LISTEN, '--upstream-tls-ca', '/nonexistent/ca.pem'],
        () => ['upstream.tls.ca: cannot read /nonexistent/ca.pem (ENOENT: no such file); give a readable file (--upstream-tls-ca)']],
      ['config file missing', () => ['--config', '/nonexistent/tensorgate.yaml'],
        () => ['--config: cannot read /nonexistent/tensorgate.yaml (ENOENT: no such file); give the path of a readable YAML file (or TENSORGATE_CONFIG)']],
      ['config file not YAML: where, and no colon left dangling', () => ['--config', join(dir, 'bad.yaml')],
        () => [/^--config: \S+bad\.yaml is not valid YAML: .+ at line 2, column 1; fix the file there$/]],
      ['a bad value', () => ['--demo', '--port', 'x'], () => ['--port: must be an integer in [0, 65535], got "x"']],
      ['an unknown flag: one line, the nearest flag, and nothing unrelated after it', () => ['--prot', '8000'],
        () => ['unknown flag --prot; did you mean --port? tensorgate --help lists the flags']],
      ['a backend that is not host:port: that problem alone, not also "required"', () => ['--backend', 'not-a-host'],
        () => ['--backend: "not-a-host" is not host:port, dns:///name:port or unix:/path']],
      ['no backend', () => [], () => [/^upstream\.backends: at least one Triton gRPC address is required; give --backend host:port/]],
      ['--demo-backend on a port in use', () => ['--demo-backend', '--port', String(busyPort)],
        () => [`server.port: 127.0.0.1:${busyPort} is already in use (EADDRINUSE); stop what listens there or choose another port (--port)`]],
    ];
    test.each(cases)('%s', (_name, args, lines) => {
      const r = spawnSync(BIN, args(), { encoding: 'utf8', env: { PATH: process.env.PATH }, timeout: 20_000 });
      expect(r.stderr).not.toMatch(/^ {4}at /m);
      expect({ status: r.status, stdout: r.stdout, stderr: r.stderr.split('\n').slice(0, -1) })
        .toEqual({ status: 2, stdout: '', stderr: lines().map((l) => (typeof l === 'string' ? `tensorgate: ${l}` : expect.stringMatching(new RegExp(`^tensorgate: ${l.source.slice(1)}`)))) });
    });

    test('an older Node than package.json\'s engines: one line that names it, exit 2, before anything loads', () => {
      // process.versions.node said older by a preload: the check reads nothing else.
      const r = spawnSync(process.execPath, ['--require', join(__dirname, '../support/old-node.js'), join(__dirname, '../../dist/gateway/main.js'), '--demo'],
        { encoding: 'utf8', timeout: 20_000 });
      expect({ status: r.status, stdout: r.stdout, stderr: r.stderr }).toEqual({ status: 2, stdout: '',
        stderr: 'tensorgate: node: 22.14.9 is older than 22.15.0; run it with Node 22.15.0 or later (bin/tensorgate uses node_modules/.bin/node after npm ci)\n' });
    });

    test('8002 in use names Triton, whose default metrics port it is too', () => {
      expect(listenError(Object.assign(new Error('listen EADDRINUSE'), { code: 'EADDRINUSE' }), 'server.metricsPort', '0.0.0.0', 8002).problems).toEqual([
        "server.metricsPort: 0.0.0.0:8002 is already in use (EADDRINUSE); 8002 is also Triton's default metrics port (a Triton on this host may hold it); stop what listens there or choose another port (--metrics-port)",
      ]);
    });

    test('a host:port backend that does not resolve: the gateway starts (a warning, not fatal) and its state line carries the ENOTFOUND', async () => {
      const child = spawn(BIN, ['--backend', 'no-such-host.invalid:8001', ...LISTEN, '--health-check-interval-ms', '500'], { stdio: ['pipe', 'pipe', 'pipe'] });
      try {
        expect(await firstLine(child)).toMatch(/^tensorgate listening on http:\/\/127\.0\.0\.1:\d+ \(backend no-such-host\.invalid:8001\)$/);
        const line = await new Promise<Record<string, unknown>>((resolve) => {
          let out = '';
          child.stdout.on('data', (s: string) => {
            out += s;
            const l = out.split('\n').find((x) => x.includes('"msg":"backend state"'));
            if (l !== undefined) resolve(JSON.parse(l) as Record<string, unknown>);
          });
        });
        expect(line).toMatchObject({ backend: 'no-such-host.invalid:8001', to: 'unhealthy',
          reason: expect.stringMatching(/^3 health checks failed: no-such-host\.invalid:8001 does not resolve \(getaddrinfo (ENOTFOUND|EAI_AGAIN) no-such-host\.invalid\)$/) });
      } finally {
        child.kill('SIGKILL');
      }
    });
  });

  test('--demo prints its listening line, answers /v2/health/ready, stops on SIGTERM', async () => {
    const child = spawn(BIN, ['--demo', '--host', '127.0.0.1', '--port', '0', '--metrics-port', '0'], { stdio: ['pipe', 'pipe', 'pipe'] });
    try {
      const line = await firstLine(child);
      const m = /^tensorgate listening on (http:\/\/127\.0\.0\.1:\d+) \(backend 127\.0\.0\.1:\d+, demo reference backend\)$/.exec(line);
      expect(m).not.toBeNull();
      const r = await fetch(`${m![1]}/v2/health/ready`);
      expect(r.status).toBe(200);
      // One JSON access line per request, without the payload.
      const body = JSON.stringify({ inputs: [{ name: 'INPUT0', datatype: 'BYTES', shape: [1, 1], data: ['secret-payload'] }] });
      expect((await fetch(`${m![1]}/v2/models/identity_bytes/infer`, { method: 'POST', body })).status).toBe(200);
      const access = await new Promise<Record<string, unknown>>((resolve) => {
        let out = '';
        const onData = (s: string): void => {
          out += s;
          const l = out.split('\n').find((x) => x.includes('"route":"infer"'));
          if (l !== undefined) {
            child.stdout.off('data', onData);
            resolve(JSON.parse(l) as Record<string, unknown>);
          }
        };
        child.stdout.on('data', onData);
      });
      expect(access).toMatchObject({ msg: 'request', route: 'infer', method: 'POST', status: 200, model: 'identity_bytes', encoding_in: 'json', encoding_out: 'json' });
      expect(Object.keys(access.hops_ms as object)).toContain('decode');
      expect(Object.keys(access.hops_at_ms as object)).toEqual(Object.keys(access.hops_ms as object));
      expect(JSON.stringify(access)).not.toContain('secret-payload');
      const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
      child.kill('SIGTERM');
      expect(await exited).toBe(0);
    } finally {
      child.kill('SIGKILL');
    }
  });

  test('SIGTERM while a client holds an upload open: exits 3 (requests cut) once server.drainTimeoutMs has passed, cutting it', async () => {
    const drainMs = 1000;
    const { child, url } = await spawnDemoGateway(['--drain-timeout-ms', String(drainMs)]);
    try {
      let stdout = '';
      child.stdout.on('data', (s: string) => { stdout += s; });
      // 100-continue: the gateway's answer proves it has the request before the test signals.
      const req = request(`${url}/v2/models/identity_uint8/infer`, {
        method: 'POST', headers: { 'Content-Length': 1 << 20, 'Inference-Header-Content-Length': 0, Expect: '100-continue' },
      });
      const cut = new Promise<string | undefined>((resolve) => req.on('error', (err: NodeJS.ErrnoException) => resolve(err.code)));
      req.flushHeaders();
      await nextEvent(req, 'continue');
      req.write(Buffer.alloc(1000)); // and never the rest

      const exited = nextEvent(child, 'exit', drainMs + 10_000);
      const t0 = performance.now();
      child.kill('SIGTERM');
      const [code] = await exited;
      const took = performance.now() - t0;
      expect(code).toBe(3);
      expect(took).toBeGreaterThanOrEqual(drainMs - 1);
      expect(took).toBeLessThan(drainMs + 3000); // process exit included, on a busy machine
      expect(await cut).toBe('ECONNRESET');
      const warn = stdout.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as Record<string, unknown>)
        .find((l) => l.msg === 'connections still open at the drain deadline were closed');
      expect(warn).toMatchObject({ requests_cut: 1, drain_timeout_ms: drainMs });
    } finally {
      child.kill('SIGKILL');
    }
  });

  describe('SIGTERM with server.drainGraceMs', () => {
    /** Starts the demo with a grace; resolves with its URL and a way to wait for a JSON log line. */
    interface Started {
      readonly child: ChildProcessWithoutNullStreams;
      readonly url: string;
      readonly logged: (msg: string) => Promise<Record<string, unknown>>;
    }
    async function start(graceMs: number): Promise<Started> {
      const { child, url } = await spawnDemoGateway(['--drain-grace-ms', String(graceMs)]);
      let stdout = '';
      const waiting = new Map<string, (line: Record<string, unknown>) => void>();
      child.stdout.on('data', (s: string) => {
        stdout += s;
        for (const l of stdout.split('\n').filter((x) => x.startsWith('{'))) {
          const line = JSON.parse(l) as Record<string, unknown>;
          waiting.get(line.msg as string)?.(line);
        }
      });
      const logged = (msg: string): Promise<Record<string, unknown>> => new Promise((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`no log line '${msg}' within 5000 ms`)), 5000);
        waiting.set(msg, (line) => { clearTimeout(timer); resolve(line); });
      });
      return { child, url, logged };
    }
    const body = JSON.stringify({ inputs: [{ name: 'INPUT0', datatype: 'UINT8', shape: [1, 1], data: [7] }] });
    const GRACE_LINE = 'stopping: /readyz answers 503, requests are still served for server.drainGraceMs';

    test('/readyz is 503 during the grace while inference still answers 200; exit 0 once the grace and a clean drain are over', async () => {
      const graceMs = 1000;
      const { child, url, logged } = await start(graceMs);
      try {
        expect((await fetch(`${url}/readyz`)).status).toBe(200);
        const exited = nextEvent(child, 'exit', graceMs + 10_000);
        const graceBegun = logged(GRACE_LINE);
        const t0 = performance.now();
        child.kill('SIGTERM');
        expect(await graceBegun).toMatchObject({ drain_grace_ms: graceMs, drain_timeout_ms: 10_000 });
        const readyz = await fetch(`${url}/readyz`);
        expect([readyz.status, await readyz.text()]).toEqual([503, 'draining\n']);
        expect((await fetch(`${url}/v2/models/identity_uint8/infer`, { method: 'POST', body })).status).toBe(200);
        const [code] = await exited;
        const took = performance.now() - t0;
        expect(code).toBe(0);
        expect(took).toBeGreaterThanOrEqual(graceMs - 1);
        expect(took).toBeLessThan(graceMs + 3000);
      } finally {
        child.kill('SIGKILL');
      }
    });

    test('a second SIGTERM ends the grace at once', async () => {
      const { child, logged } = await start(60_000);
      try {
        const exited = nextEvent(child, 'exit', 10_000);
        const graceBegun = logged(GRACE_LINE);
        child.kill('SIGTERM');
        await graceBegun;
        const t0 = performance.now();
        child.kill('SIGTERM');
        const [code] = await exited;
        expect(code).toBe(0);
        expect(performance.now() - t0).toBeLessThan(3000);
      } finally {
        child.kill('SIGKILL');
      }
    });
  });
});
