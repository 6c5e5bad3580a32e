// Every role on the demo: the README's role configurations, as written there, started with
// --demo (the demo backend takes the place of their backends, and the listening line says so),
// each answering an infer from curl; and the sidecar's shared-memory mode on the demo backend.
// Only the listening address is changed (free ports on 127.0.0.1), and the ingress example's key
// file, which names a path of the Kubernetes deploy, points at a file of the test.
import { type ChildProcessWithoutNullStreams, execFile, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { parse as parseYaml } from 'yaml';
import type { RunningGateway } from '../../gateway/gateway';
import { gatewayFor } from '../support/gateway';
import { freePort } from '../support/observed';
import { prometheusSamples } from '../support/prometheus';
import { firstLine, nextEvent } from '../support/wait';
import { CURL, needs } from '../support/tools';
import { int32 } from '../support/int32';
import { curl, type CurlAnswer } from '../support/curl';

const ROOT = join(__dirname, '../..');
const BIN = join(ROOT, 'bin/tensorgate');
const README = readFileSync(join(ROOT, 'README.md'), 'utf8');
const run = promisify(execFile);

// Each test starts the built CLI (a second or more on a busy machine; the ingress example forks
// a worker per core).
jest.setTimeout(60_000);

/** The README's YAML block that contains `marker`. */
function readmeYaml(marker: string): { text: string; doc: Record<string, unknown> } {
  const blocks = [...README.matchAll(/```yaml\n([\s\S]*?)```/g)].map((m) => m[1]!);
  const found = blocks.filter((b) => b.includes(marker));
  if (found.length !== 1) throw new Error(`README: expected one yaml block containing ${JSON.stringify(marker)}, found ${found.length}`);
  return { text: found[0]!, doc: parseYaml(found[0]!) as Record<string, unknown> };
}

let dir: string;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'tg-roles-'));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** bin/tensorgate --config <the README block> --demo on free ports; resolves with its listening line and URL. */
async function startRole(name: string, yaml: string, extra: string[] = []): Promise<{ child: ChildProcessWithoutNullStreams; line: string; url: string }> {
  const file = join(dir, `${name}.yaml`);
  writeFileSync(file, yaml);
  const child = spawn(BIN, ['--config', file, '--demo', '--host', '127.0.0.1', '--port', '0', '--metrics-port', '0', '--log-level', 'warn', ...extra],
    { stdio: ['pipe', 'pipe', 'pipe'] });
  let stderr = '';
  child.stderr.setEncoding('utf8').on('data', (s: string) => { stderr += s; });
  const line = await new Promise<string>((resolve, reject) => {
    let out = '';
    child.stdout.setEncoding('utf8').on('data', (s: string) => {
      out += s;
      if (out.includes('\n')) resolve(out.split('\n')[0]!);
    });
    child.once('exit', (code) => reject(new Error(`exited ${code} before listening: ${stderr}`)));
  });
  return { child, line, url: /^tensorgate listening on (\S+) /.exec(line)![1]! };
}

async function stop(child: ChildProcessWithoutNullStreams): Promise<number | null> {
  if (child.exitCode !== null) return child.exitCode;
  const exited = nextEvent(child, 'exit', 20_000);
  child.kill('SIGTERM');
  return (await exited)[0] as number | null;
}

/** curl's answer (a client we did not write): status and body text. */
const answer = (r: CurlAnswer): { status: number; body: string } => ({ status: r.status, body: r.body.toString() });

const V2_JSON = '{"inputs":[{"name":"INPUT0","datatype":"FP32","shape":[1,3],"data":[1,2.5,-3]}]}';
const V2_ANSWER = '{"model_name":"identity_fp32","model_version":"1","outputs":[{"name":"OUTPUT0","datatype":"FP32","shape":[1,3],"data":[1.0,2.5,-3.0]}]}';

needs(CURL()).describe('the README\'s roles on the demo', () => {
  test('sidecar', async () => {
    const { text, doc } = readmeYaml('Triton\'s gRPC port in the same pod');
    const backends = (doc.upstream as { backends: string[] }).backends;
    const { child, line, url } = await startRole('sidecar', text);
    try {
      expect(line).toMatch(new RegExp(`\\(backend 127\\.0\\.0\\.1:\\d+, demo reference backend in place of upstream\\.backends ${backends.join(', ').replace(/\./g, '\\.')}\\)$`));
      expect(answer(await curl(`${url}/v2/models/identity_fp32/infer`, '-d', V2_JSON))).toEqual({ status: 200, body: V2_ANSWER });
    } finally {
      expect(await stop(child)).toBe(0);
    }
  });

  test('migration shim: the declarative route answers V1 from base64', async () => {
    const { text, doc } = readmeYaml('/api/classify');
    const route = (doc.routes as { path: string; model: string }[])[0]!;
    // classifier_fp32: PROBS[j] = INPUT[j] + INPUT[j + 1000] of one 3×224×224 FP32 image.
    const image = Buffer.alloc(3 * 224 * 224 * 4);
    for (let i = 0; i < image.length / 4; i++) image.writeFloatLE(i % 7, i * 4);
    const body = join(dir, 'classify.json');
    writeFileSync(body, JSON.stringify({ image: image.toString('base64') }));
    const { child, line, url } = await startRole('shim', text);
    try {
      expect(line).toContain('demo reference backend in place of upstream.backends triton:8001');
      const r = await curl(`${url}${route.path}`, '-H', 'Content-Type: application/json', '--data-binary', `@${body}`);
      expect(r.status).toBe(200);
      const predictions = (JSON.parse(r.body.toString()) as { predictions: number[][] }).predictions;
      expect(predictions).toHaveLength(1);
      expect(predictions[0]).toEqual(Array.from({ length: 1000 }, (_, j) => (j % 7) + ((j + 1000) % 7)));
    } finally {
      expect(await stop(child)).toBe(0);
    }
  });

  test('cluster ingress: a worker per core, a key, and the restricted statistics group', async () => {
    const { text } = readmeYaml('workers: auto');
    const token = 'demo-roles-token-0123456789';
    const keys = join(dir, 'keys.yaml');
    writeFileSync(keys, `keys:\n  - id: it\n    token: sha256:${createHash('sha256').update(token).digest('hex')}\n    groups: [inference, statistics]\n`);
    const { child, line, url } = await startRole('ingress', text, ['--auth-keys-file', keys]);
    try {
      expect(line).toContain('demo reference backend in place of upstream.backends triton-0.triton:8001, triton-1.triton:8001, triton-2.triton:8001');
      expect((await curl(`${url}/v2/models/identity_fp32/infer`, '-d', V2_JSON)).status).toBe(401);
      const bearer = ['-H', `Authorization: Bearer ${token}`];
      expect(answer(await curl(`${url}/v2/models/identity_fp32/infer`, ...bearer, '-d', V2_JSON))).toEqual({ status: 200, body: V2_ANSWER });
      // The statistics the README restricts: the header it names lets them through, and they count the infer.
      expect((await curl(`${url}/v2/models/identity_fp32/stats`, ...bearer)).status).toBe(403);
      const stats = await curl(`${url}/v2/models/identity_fp32/stats`, ...bearer, '-H', 'x-admin-key: s3cret');
      expect(stats.status).toBe(200);
      expect(JSON.parse(stats.body.toString())).toMatchObject({ model_stats: [{ name: 'identity_fp32', version: '1', inference_count: 1, execution_count: 1 }] });
    } finally {
      expect(await stop(child)).toBe(0);
    }
  });

  test('one port for REST and gRPC: the dns:/// backend', async () => {
    const { text } = readmeYaml('dns:///');
    const { child, line, url } = await startRole('one-port', text);
    try {
      expect(line).toContain('demo reference backend in place of upstream.backends dns:///triton-headless.inference.svc.cluster.local:8001');
      expect(answer(await curl(`${url}/v2/models/identity_fp32/infer`, '-d', V2_JSON))).toEqual({ status: 200, body: V2_ANSWER });
    } finally {
      expect(await stop(child)).toBe(0);
    }
  });
});

needs(CURL()).describe('shared-memory mode on the demo', () => {
  let gw: RunningGateway;
  beforeAll(async () => {
    gw = await gatewayFor(['--demo', '--shared-memory', '--shared-memory-regions', '2', '--shared-memory-region-bytes', '65536',
      '--shared-memory-prefix', `tgroles${process.pid}`]);
  });
  afterAll(() => gw.close());

  test('inputs and outputs go through the regions: the answer, the gateway\'s metrics and the demo backend agree', async () => {
    const metric = async (name: string): Promise<number> => prometheusSamples(await (await fetch(gw.metricsUrl!)).text()).get(name) ?? 0;
    const bytes0 = await metric('tensorgate_shared_memory_bytes_total');
    const out0 = await metric('tensorgate_shared_memory_output_bytes_total');
    const shm = gw.demoBackend!.sharedMemory;
    const read0 = shm.bytesRead;
    const written0 = shm.bytesWritten;
    expect(shm.status('').map((r) => r.name).sort()).toEqual([`tgroles${process.pid}-${process.pid}-0`, `tgroles${process.pid}-${process.pid}-1`]);

    // simple over the binary extension, outputs asked as binary: INT32 sum and difference.
    const header = JSON.stringify({
      inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [1, 16], parameters: { binary_data_size: 64 } },
        { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], parameters: { binary_data_size: 64 } }],
      outputs: [{ name: 'OUTPUT0', parameters: { binary_data: true } }, { name: 'OUTPUT1', parameters: { binary_data: true } }],
    });
    const body = join(dir, 'shm.bin');
    writeFileSync(body, Buffer.concat([Buffer.from(header), int32(Array.from({ length: 16 }, (_, i) => i * 3)), int32(Array(16).fill(2))]));
    const r = await curl(`${gw.url}/v2/models/simple/infer`, '-H', `Inference-Header-Content-Length: ${header.length}`, '--data-binary', `@${body}`);
    expect(r.head).toMatch(/^HTTP\/1\.1 200/);
    const headerLength = Number(r.headers['inference-header-content-length']);
    expect(JSON.parse(r.body.subarray(0, headerLength).toString())).toEqual({
      model_name: 'simple', model_version: '1',
      outputs: [{ name: 'OUTPUT0', datatype: 'INT32', shape: [1, 16], parameters: { binary_data_size: 64 } },
        { name: 'OUTPUT1', datatype: 'INT32', shape: [1, 16], parameters: { binary_data_size: 64 } }],
    });
    const row = (f: (i: number) => number): number[] => Array.from({ length: 16 }, (_, i) => f(i));
    expect(r.body.subarray(headerLength)).toEqual(Buffer.concat([int32(row((i) => i * 3 + 2)), int32(row((i) => i * 3 - 2))]));

    // 128 input bytes written into a region by the gateway and read there by the demo backend;
    // 128 output bytes written there by the backend and read into the answer by the gateway.
    expect(await metric('tensorgate_shared_memory_bytes_total') - bytes0).toBe(128);
    expect(await metric('tensorgate_shared_memory_output_bytes_total') - out0).toBe(128);
    expect([shm.bytesRead - read0, shm.bytesWritten - written0]).toEqual([128, 128]);
  });
});

needs(CURL()).describe('the README\'s demo backend run apart, and a gateway in front of it', () => {
  /** The block's command lines, each without its comment. */
  function readmeCommands(): string[] {
    const block = [...README.matchAll(/```sh\n([\s\S]*?)```/g)].map((m) => m[1]!).filter((b) => b.includes('--demo-backend'));
    expect(block).toHaveLength(1);
    return block[0]!.split('\n').map((l) => l.replace(/\s+#.*$/, '').trim()).filter((l) => l !== '');
  }

  test('as written, from the project\'s root (its ports swapped for free ones): the demo\'s V2 and OpenAI answers, as --demo gives them', async () => {
    const [backendCommand, gatewayCommand, ...curls] = readmeCommands();
    expect([backendCommand, gatewayCommand]).toEqual([expect.stringMatching(/^bin\/tensorgate --demo-backend /), expect.stringMatching(/^bin\/tensorgate --backend /)]);
    const ports = new Map<string, number>();
    for (const p of ['8001', '8010', '8012']) ports.set(p, await freePort());
    const swap = (command: string): string => command.replace(/\b(8001|8010|8012)\b/g, (p) => String(ports.get(p)));
    const start = (command: string): ChildProcessWithoutNullStreams => spawn('bash', ['-c', `exec ${swap(command)}`], { cwd: ROOT, stdio: ['pipe', 'pipe', 'pipe'] });
    const backend = start(backendCommand!);
    let gateway: ChildProcessWithoutNullStreams | undefined;
    try {
      expect(await firstLine(backend)).toMatch(new RegExp(`^tensorgate demo backend listening on 127\\.0\\.0\\.1:${ports.get('8001')} `));
      gateway = start(gatewayCommand!);
      expect(await firstLine(gateway)).toBe(`tensorgate listening on http://0.0.0.0:${ports.get('8010')} (backend 127.0.0.1:${ports.get('8001')})`);
      const url = `http://127.0.0.1:${ports.get('8010')}`;
      expect(curls).toEqual([expect.stringMatching(/^curl -s localhost:8010\/openai\/v1\/models$/)]);
      const { stdout } = await run('bash', ['-c', swap(curls[0]!)], { cwd: ROOT });
      expect((JSON.parse(stdout) as { data: { id: string }[] }).data.map((m) => m.id)).toEqual(['tiny_llm', 'tiny_llm_trtllm', 'tiny_embed']);
      expect(answer(await curl(`${url}/v2/models/identity_fp32/infer`, '-d', V2_JSON))).toEqual({ status: 200, body: V2_ANSWER });
      // The chat template and the embedding model, as --demo's own: the same answers.
      const demo = await gatewayFor(['--demo']);
      try {
        const chat = JSON.stringify({ model: 'tiny_llm', messages: [{ role: 'user', content: 'Hello there' }], max_tokens: 3 });
        const embed = JSON.stringify({ model: 'tiny_embed', input: 'Hello' });
        for (const [path, body] of [['chat/completions', chat], ['embeddings', embed]] as const) {
          const ask = async (base: string): Promise<unknown> => {
            const r = await curl(`${base}/openai/v1/${path}`, '-H', 'Content-Type: application/json', '-d', body);
            expect(r.status).toBe(200);
            return { ...JSON.parse(r.body.toString()) as Record<string, unknown>, id: undefined, created: undefined };
          };
          expect(await ask(url)).toEqual(await ask(demo.url));
        }
      } finally {
        await demo.close();
      }
    } finally {
      if (gateway !== undefined) expect(await stop(gateway)).toBe(0);
      expect(await stop(backend)).toBe(0);
    }
  });
});
