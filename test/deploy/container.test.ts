// The container image, built and run with podman the way CI can (no registry, a
// local base from Debian packages, runc, host network): what the image holds, the demo mode
// answering every request form, the gateway in front of real Triton giving Triton's own answers,
// and SIGTERM (`podman stop`) draining to exit 0. Needs podman (test/support/tools.ts).
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { type ClientRequest, request } from 'node:http';
import { connect } from 'node:net';
import { join } from 'node:path';
import { type RawResponse, binaryBody, send } from '../support/http';
import { type RunningTriton, freePort, startTriton } from '../support/triton';
import { needs, PODMAN, PYTHON } from '../support/tools';
import { nextEvent } from '../support/wait';

const ROOT = join(__dirname, '..', '..');
const IMAGE = 'localhost/tensorgate:test';
const UID = 10001;
const BUILD_MS = 20 * 60_000; // cold: the Debian base (~40 s) and two npm ci, on a busy machine
const READY_MS = 60_000;
const ENV = { ...process.env, CONTAINERS_CONF: process.env.CONTAINERS_CONF ?? join(__dirname, 'containers.conf') };

/** podman with the CI settings; rejects with its stderr when it fails or outlives `ms`. */
function podman(args: readonly string[], ms = 60_000): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile('podman', ['--runtime', 'runc', ...args], { env: ENV, timeout: ms, killSignal: 'SIGKILL', maxBuffer: 64 << 20 }, (err, stdout, stderr) => {
      if (err) reject(new Error(`podman ${args.join(' ')}: ${err.message}\n${stderr.slice(-4000)}`));
      else resolve(stdout);
    });
  });
}

/** Polls `probe` until it holds; throws naming `what` after `ms`. For states with no event (a container's port). */
async function pollUntil(probe: () => Promise<boolean>, what: string, ms: number): Promise<void> {
  const end = Date.now() + ms;
  while (!await probe().catch(() => false)) {
    if (Date.now() >= end) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

const status = async (url: string): Promise<number> => (await send(url)).status;

interface Container {
  readonly name: string;
  readonly url: string;
  readonly metricsUrl: string;
  /** ms from `podman run` to the first 200 of /v2/health/ready. */
  readonly readyMs: number;
}

const started: string[] = [];

/**
 * Runs the image on the host network, on free ports, with TENSORGATE_* variables; waits until
 * ready. Always as Kubernetes' restricted security context would (KServe's ServingRuntime too):
 * read-only root filesystem, every capability dropped, no privilege escalation.
 */
async function run(env: Record<string, string>): Promise<Container> {
  const [port, metricsPort] = [await freePort(), await freePort()];
  const name = `tensorgate-test-${process.pid}-${started.length}`;
  started.push(name);
  const vars = { TENSORGATE_SERVER_PORT: String(port), TENSORGATE_SERVER_METRICS_PORT: String(metricsPort), ...env };
  const t0 = performance.now();
  const locked = ['--read-only', '--cap-drop=ALL', '--security-opt=no-new-privileges'];
  await podman(['run', '-d', '--name', name, '--network=host', ...locked, ...Object.entries(vars).flatMap(([k, v]) => ['-e', `${k}=${v}`]), IMAGE]);
  const url = `http://127.0.0.1:${port}`;
  try {
    await pollUntil(async () => await status(`${url}/v2/health/ready`) === 200, `${name} to answer /v2/health/ready 200`, READY_MS);
  } catch (err) {
    const logs = await podman(['logs', name]).catch((e: unknown) => String(e));
    throw new Error(`${(err as Error).message}\n--- podman logs ${name} ---\n${logs.slice(-4000)}`);
  }
  return { name, url, metricsUrl: `http://127.0.0.1:${metricsPort}/metrics`, readyMs: Math.round(performance.now() - t0) };
}

const json = (body: unknown): { body: string; headers: Record<string, string> } => ({ body: JSON.stringify(body), headers: { 'Content-Type': 'application/json' } });

needs(PODMAN(), PYTHON()).describe('container image', () => {
  let triton: RunningTriton | undefined;
  let tritonStarting: Promise<RunningTriton> | undefined;

  beforeAll(async () => {
    // Triton starts while the image builds; each is bounded on its own, and afterAll stops a
    // Triton that started even when the build failed.
    const t0 = performance.now();
    tritonStarting = startTriton();
    tritonStarting.catch(() => undefined); // reported by the await below, not as unhandled
    const buildMs = await new Promise<number>((resolve, reject) => {
      execFile('bash', [join(__dirname, 'build.sh'), IMAGE], { env: ENV, timeout: BUILD_MS, killSignal: 'SIGKILL', maxBuffer: 64 << 20 }, (err, _stdout, stderr) => {
        if (err) reject(new Error(`test/deploy/build.sh failed: ${err.message}\n${stderr.slice(-6000)}`));
        else resolve(Math.round(performance.now() - t0));
      });
    });
    triton = await tritonStarting;
    process.stdout.write(`container: image built in ${buildMs} ms; Triton ready in ${triton.startupMs} ms\n`);
  }, BUILD_MS + 60_000);

  afterAll(async () => {
    await Promise.allSettled(started.map((name) => podman(['rm', '-f', '-t', '0', name], 30_000)));
    await (await tritonStarting?.catch(() => undefined))?.stop();
  }, 60_000);

  test('its config: a numeric non-root user, node running dist/gateway/main.js, ports 8000 and 8002', async () => {
    const [inspect] = JSON.parse(await podman(['image', 'inspect', IMAGE])) as [{ Config: { User: string; Cmd: string[]; ExposedPorts: object; WorkingDir: string } }];
    expect(inspect.Config).toMatchObject({
      User: `${UID}:${UID}`,
      Cmd: ['node', '--initial-heap-size=64', '--no-memory-reducer', 'dist/gateway/main.js'],
      WorkingDir: '/app',
    });
    expect(Object.keys(inspect.Config.ExposedPorts).sort()).toEqual(['8000/tcp', '8002/tcp']);
  }, 30_000);

  test('its files: dist/, proto/*.proto, the demo\'s chat template and production node_modules only; no npm, yarn, compiler or test file; runs as non-root; the native base64 decoder where the CPU has AVX2', async () => {
    // The lockfile marks every package that only development needs ("dev": true).
    const lock = JSON.parse(readFileSync(join(ROOT, 'package-lock.json'), 'utf8')) as { packages: Record<string, { dev?: boolean }> };
    const devOnly = Object.entries(lock.packages).filter(([p, v]) => v.dev === true && p.startsWith('node_modules/')).map(([p]) => p);
    expect(devOnly).toEqual(expect.arrayContaining(['node_modules/typescript', 'node_modules/jest', 'node_modules/node']));
    // Listed from inside, by the image's own node: the image need not have a shell.
    const script = `
      const fs = require('fs'), path = require('path');
      const exists = (p) => fs.existsSync(p);
      const walk = (dir, out) => { for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
        const p = path.join(dir, e.name); if (e.isDirectory()) walk(p, out); else out.push(p); } return out; };
      const pathDirs = (process.env.PATH || '').split(':');
      console.log(JSON.stringify({
        uid: process.getuid(), gid: process.getgid(),
        app: fs.readdirSync('/app').sort(),
        proto: fs.readdirSync('/app/proto').sort(),
        config: walk('/app/config', []).sort(),
        tools: pathDirs.flatMap((d) => ['npm', 'npx', 'yarn', 'yarnpkg', 'corepack', 'pnpm', 'tsc', 'jest', 'cc', 'gcc'].map((t) => path.join(d, t))).filter(exists),
        npmTree: ['/usr/local/lib/node_modules', '/usr/lib/node_modules', '/opt'].filter((p) => exists(p) && fs.readdirSync(p).length > 0),
        present: JSON.parse(process.argv[1]).filter((p) => exists(path.join('/app', p))),
        ours: walk('/app/dist', []).filter((p) => /\\.test\\.|\\/test\\/|\\.ts$/.test(p) && !p.endsWith('.d.ts')),
        main: exists('/app/dist/gateway/main.js'),
        decoder: require('/app/dist/gateway/decode/base64/base64-simd.js').base64Decoder,
      }));`;
    const out = await podman(['run', '--rm', '--network=host', '--entrypoint', 'node', IMAGE, '-e', script, JSON.stringify(devOnly)]);
    const seen = JSON.parse(out) as Record<string, unknown>;
    expect(seen).toEqual({
      uid: UID, gid: UID,
      app: ['config', 'dist', 'node_modules', 'proto'],
      proto: ['health.proto', 'inference.proto', 'model_config.proto'],
      config: ['/app/config/tiny_llm/tokenizer_config.json'],
      tools: [], npmTree: [], present: [], ours: [], main: true,
      // Built in the build stage (Dockerfile: a C compiler there only); on a CPU without AVX2 the
      // gateway decodes in WebAssembly, as it says at start-up.
      decoder: /^flags\s*:.*\bavx2\b/m.test(readFileSync('/proc/cpuinfo', 'utf8')) ? 'native' : 'wasm',
    });
  }, 60_000);

  describe('--demo', () => {
    let c: Container;
    beforeAll(async () => {
      c = await run({ TENSORGATE_DEMO: 'true' });
      // The number the issue asks for; on a busy 2-core machine, so an upper bound.
      process.stdout.write(`container: ready ${c.readyMs} ms after podman run (--demo)\n`);
    }, READY_MS + 30_000);

    test('probes: /v2/health/live, /v2/health/ready, /healthz, /readyz', async () => {
      for (const p of ['/v2/health/live', '/v2/health/ready', '/healthz', '/readyz']) expect([p, await status(c.url + p)]).toEqual([p, 200]);
    });

    // The README's "Try it" requests, with its answers.
    test('V2 JSON', async () => {
      const r = await send(`${c.url}/v2/models/identity_fp32/infer`, json({ inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 3], data: [1, 2.5, -3] }] }));
      expect([r.status, r.body.toString()]).toEqual([200, '{"model_name":"identity_fp32","model_version":"1","outputs":[{"name":"OUTPUT0","datatype":"FP32","shape":[1,3],"data":[1.0,2.5,-3.0]}]}']);
    });

    test('the OpenAI API: a chat streamed with the demo\'s chat template (config/tiny_llm in the image)', async () => {
      const r = await send(`${c.url}/openai/v1/chat/completions`, json({ model: 'tiny_llm', messages: [{ role: 'user', content: 'Hello' }], max_tokens: 3, stream: true }));
      expect(r.status).toBe(200);
      const deltas = r.body.toString().split('\n\n').filter((e) => e.startsWith('data: {'))
        .map((e) => (JSON.parse(e.slice(6)) as { choices: { delta: { content?: string } }[] }).choices[0]!.delta.content ?? '');
      expect(deltas.join('')).toBe(' delta epsilon zeta');
      expect(r.body.toString().endsWith('data: [DONE]\n\n')).toBe(true);
    });

    test('binary extension', async () => {
      const tensor = Buffer.alloc(8);
      tensor.writeFloatLE(1, 0);
      tensor.writeFloatLE(2.5, 4);
      const { body, headers } = binaryBody({ inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 2], parameters: { binary_data_size: 8 } }] }, tensor);
      const r = await send(`${c.url}/v2/models/identity_fp32/infer`, { body, headers });
      expect([r.status, r.body.toString()]).toEqual([200, '{"model_name":"identity_fp32","model_version":"1","outputs":[{"name":"OUTPUT0","datatype":"FP32","shape":[1,2],"data":[1.0,2.5]}]}']);
    });

    test('raw binary', async () => {
      const r = await send(`${c.url}/v2/models/identity_uint8/infer`, { body: 'hello', headers: { 'Inference-Header-Content-Length': 0 } });
      expect([r.status, r.body.toString()]).toEqual([200,
        '{"model_name":"identity_uint8","model_version":"1","outputs":[{"name":"OUTPUT0","datatype":"UINT8","shape":[1,5],"parameters":{"binary_data_size":5}}]}hello']);
    });

    test('base64: a numeric tensor, and a BYTES element', async () => {
      const a = await send(`${c.url}/v2/models/identity_fp32/infer`, json({ inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 2], data: 'AACAPwAAIEA=' }] }));
      expect([a.status, a.body.toString()]).toEqual([200, '{"model_name":"identity_fp32","model_version":"1","outputs":[{"name":"OUTPUT0","datatype":"FP32","shape":[1,2],"data":[1.0,2.5]}]}']);
      const b = await send(`${c.url}/v2/models/blob_len/infer`, json({ inputs: [{ name: 'BLOB', datatype: 'BYTES', shape: [1, 1], data: [{ b64: 'aGVsbG8=' }] }] }));
      expect([b.status, b.body.toString()]).toEqual([200, '{"model_name":"blob_len","model_version":"1","outputs":[{"name":"LEN","datatype":"INT64","shape":[1,1],"data":[5]}]}']);
    });

    test('TF-Serving / KServe V1', async () => {
      const r = await send(`${c.url}/v1/models/identity_fp32:predict`, json({ instances: [[1, 2.5, -3]] }));
      expect([r.status, r.body.toString()]).toEqual([200, '{"predictions":[[1.0,2.5,-3.0]]}']);
    });

    test('/metrics on server.metricsPort counts the requests', async () => {
      const r = await send(c.metricsUrl);
      expect(r.status).toBe(200);
      expect(r.body.toString()).toMatch(/^tensorgate_hop_duration_\w*count\{[^}]*model="identity_fp32"[^}]*\} [1-9]/m);
    });
  });

  test('in front of real Triton: the answers of Triton\'s own HTTP frontend', async () => {
    const c = await run({ TENSORGATE_UPSTREAM_BACKENDS: `127.0.0.1:${triton!.grpc}` });
    process.stdout.write(`container: ready ${c.readyMs} ms after podman run (in front of Triton)\n`);
    const direct = `http://127.0.0.1:${triton!.http}`;
    const tensor = Buffer.alloc(12);
    [1, 2.5, -3].forEach((v, i) => tensor.writeFloatLE(v, 4 * i));
    const requests: [string, { body: string | Buffer; headers: Record<string, string | number> }][] = [
      ['/v2/models/identity_fp32/infer', json({ inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 3], data: [1, 2.5, -3] }] })],
      ['/v2/models/identity_fp32/infer', binaryBody({
        inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 3], parameters: { binary_data_size: 12 } }],
        outputs: [{ name: 'OUTPUT0', parameters: { binary_data: true } }],
      }, tensor)],
      ['/v2/models/simple/infer', json({ inputs: ['INPUT0', 'INPUT1'].map((name, k) => ({ name, datatype: 'INT32', shape: [1, 16], data: Array.from({ length: 16 }, (_, i) => i * (k + 1)) })) })],
    ];
    const answer = (r: RawResponse): unknown[] => [r.status, r.headers['inference-header-content-length'], r.body.toString('latin1')];
    for (const [path, options] of requests) {
      const ref = await send(direct + path, options);
      expect(ref.status).toBe(200);
      expect(answer(await send(c.url + path, options))).toEqual(answer(ref));
    }
  }, READY_MS + 60_000);

  test('SIGTERM (podman stop): /readyz 503 during server.drainGraceMs, a request in flight finishes, exit 0', async () => {
    const graceMs = 1000;
    const c = await run({ TENSORGATE_DEMO: 'true', TENSORGATE_SERVER_DRAIN_GRACE_MS: String(graceMs) });
    // An upload the gateway has begun (its 100 Continue says so) and whose body is still to come.
    const body = Buffer.from('tensorgate');
    const upload: ClientRequest = request(`${c.url}/v2/models/identity_uint8/infer`, {
      method: 'POST', headers: { 'Content-Length': body.length, 'Inference-Header-Content-Length': 0, Expect: '100-continue' },
    });
    const answered = new Promise<RawResponse>((resolve, reject) => {
      upload.on('response', (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (b: Buffer) => chunks.push(b)).on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body: Buffer.concat(chunks) }));
      });
      upload.on('error', reject);
    });
    upload.flushHeaders();
    await nextEvent(upload, 'continue', 10_000);
    upload.write(body.subarray(0, 4));

    const t0 = performance.now();
    // podman stop sends the image's stop signal (SIGTERM) and SIGKILLs after -t seconds.
    const stop: ChildProcess = spawn('podman', ['--runtime', 'runc', 'stop', '-t', '30', c.name], { env: ENV, stdio: 'ignore' });
    const stopped = nextEvent(stop, 'exit', 45_000);
    try {
      await pollUntil(async () => await status(`${c.url}/readyz`) === 503, '/readyz to answer 503 after SIGTERM', 10_000);
      // During the grace everything else is still served.
      expect((await send(`${c.url}/v2/models/identity_uint8/infer`, { body: 'x', headers: { 'Inference-Header-Content-Length': 0 } })).status).toBe(200);
      // Then the drain: the listener closes (new connections refused) while the upload is still open.
      await pollUntil(() => new Promise<boolean>((resolve) => {
        const s = connect(Number(new URL(c.url).port), '127.0.0.1');
        s.on('connect', () => { s.destroy(); resolve(false); }).on('error', () => resolve(true));
      }), 'the listener to close (the drain)', 10_000);
      upload.end(body.subarray(4));
      const r = await answered;
      expect([r.status, r.body.toString().endsWith('tensorgate')]).toEqual([200, true]);
      const [podmanStatus] = await stopped;
      expect(podmanStatus).toBe(0);
      const took = performance.now() - t0;
      expect(took).toBeLessThan(graceMs + 20_000); // not podman's SIGKILL at 30 s
      const state = JSON.parse(await podman(['inspect', '--format', '{{json .State}}', c.name])) as { ExitCode: number; Status: string };
      expect([state.Status, state.ExitCode]).toEqual(['exited', 0]);
    } finally {
      stop.kill('SIGKILL');
      upload.destroy();
    }
  }, READY_MS + 90_000);
});
