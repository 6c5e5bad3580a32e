// HTTP/2 with clients we did not write, over h2c (prior knowledge) and h2 (TLS, ALPN), on every
// route family the gateway serves on the embedded reference backend: probes, GET control routes,
// answers given before the body is read (404, 405, an early 400, 415, a decoupled model's 400, 413),
// inference (V2 JSON, binary extension, a 1 MiB answer), streamed answers (generate_stream and V2 infer
// as server-sent events), and gRPC on the same port. Each
// answer must arrive whole: its status, its body byte for byte as the same request gets over
// HTTP/1.1, and its end (END_STREAM) — a stream reset before it is an error in every client here.
//   - curl (--http2-prior-knowledge, --http2 over TLS): exit 0 and the body;
//   - Python httpx with h2 (test/interop/httpx_client.py, its venv from requirements.txt): h2
//     raises on a stream reset before END_STREAM;
//   - Go net/http over golang.org/x/net/http2 (test/interop/goclient): the body read to io.EOF,
//     and gRPC's trailers;
//   - nghttp2's h2load: every request done, none errored, and exactly n × the body in DATA bytes.
// RFC 9113 §8.1: RST_STREAM(NO_ERROR) only after a complete answer, and only while the request's
// body is still arriving.
import { run } from '../support/run';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { RunningGateway } from '../../gateway/gateway';
import { makePki, type Pki } from '../support/certs';
import { gatewayFor } from '../support/gateway';
import { grpcMessage } from '../support/grpc-peer';
import { binaryBody, send } from '../support/http';
import { goClient, interopPython } from '../support/interop';
import { CURL, GO, H2LOAD, needs, PYTHON } from '../support/tools';
import { int32 } from '../support/int32';
import { curl } from '../support/curl';

jest.setTimeout(300_000);

const HERE = __dirname;
/** limits.maxBodyBytes for the 413 case. */
const MAX_BODY = 65_536;
/** How often httpx and Go send each case on their one connection (the resets were a matter of timing). */
const REPEAT = 4;

interface Case {
  readonly name: string;
  readonly method: string;
  readonly path: string;
  readonly headers?: Record<string, string>;
  readonly body?: Buffer;
  /** The answer's status; its body is what HTTP/1.1 gets, or `grpc.body` for gRPC (empty: not compared). */
  readonly status: number;
  readonly grpc?: { readonly body: Buffer; readonly status: string };
}

const X = Array.from({ length: 16 }, (_, i) => i);
const json = (v: unknown): Buffer => Buffer.from(JSON.stringify(v));
const GRPC_HEADERS = { 'content-type': 'application/grpc', te: 'trailers' };

const bin = binaryBody({
  inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [1, 16], parameters: { binary_data_size: 64 } },
    { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], parameters: { binary_data_size: 64 } }],
  parameters: { binary_data_output: true },
}, int32(X), int32(X));
const big = binaryBody({
  inputs: [{ name: 'N', datatype: 'INT64', shape: [1], parameters: { binary_data_size: 8 } }],
  outputs: [{ name: 'DATA', parameters: { binary_data: true } }],
}, Buffer.from(new BigInt64Array([1024n * 1024n]).buffer));

const CASES: readonly Case[] = [
  { name: 'probe /v2/health/ready', method: 'GET', path: '/v2/health/ready', status: 200 },
  { name: 'probe /v2/health/live', method: 'GET', path: '/v2/health/live', status: 200 },
  { name: 'GET /v2 (server metadata)', method: 'GET', path: '/v2', status: 200 },
  { name: 'GET model metadata', method: 'GET', path: '/v2/models/simple', status: 200 },
  { name: 'GET model config', method: 'GET', path: '/v2/models/simple/config', status: 200 },
  { name: '404 GET', method: 'GET', path: '/nope', status: 404 },
  { name: '404 POST, body unread', method: 'POST', path: '/nope', body: json({ inputs: [] }), headers: { 'content-type': 'application/json' }, status: 404 },
  { name: '405', method: 'GET', path: '/v2/models/simple/infer', status: 405 },
  { name: 'early 400 (bad Inference-Header-Content-Length)', method: 'POST', path: '/v2/models/simple/infer', body: bin.body,
    headers: { 'inference-header-content-length': 'abc' }, status: 400 },
  { name: '415 (Content-Encoding br)', method: 'POST', path: '/v2/models/simple/infer', body: json({ inputs: [] }), headers: { 'content-encoding': 'br' }, status: 415 },
  { name: '400 (a decoupled model without Accept: text/event-stream)', method: 'POST', path: '/v2/models/repeat_int32/infer', body: json({ inputs: [] }), status: 400 },
  { name: '413 (body over limits.maxBodyBytes)', method: 'POST', path: '/v2/models/simple/infer', body: Buffer.alloc(MAX_BODY * 2, 0x20), status: 413 },
  { name: 'infer V2 JSON', method: 'POST', path: '/v2/models/simple/infer', status: 200,
    body: json({ inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [1, 16], data: X }, { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], data: X }] }) },
  { name: 'infer binary extension', method: 'POST', path: '/v2/models/simple/infer', body: bin.body,
    headers: { 'inference-header-content-length': String(bin.headers['Inference-Header-Content-Length']) }, status: 200 },
  { name: 'infer, a 1 MiB answer', method: 'POST', path: '/v2/models/big_output/infer', body: big.body,
    headers: { 'inference-header-content-length': String(big.headers['Inference-Header-Content-Length']) }, status: 200 },
  { name: 'streamed answer (generate_stream, SSE)', method: 'POST', path: '/v2/models/repeat_int32/generate_stream', body: Buffer.from('{"INPUT0":3,"id":"abc"}'), status: 200 },
  { name: 'streamed answer (V2 infer as events, SSE)', method: 'POST', path: '/v2/models/repeat_int32/infer', headers: { accept: 'text/event-stream', 'content-type': 'application/json' },
    body: json({ id: 'abc', inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [1], data: [3] }] }), status: 200 },
  { name: 'gRPC ServerLive', method: 'POST', path: '/inference.GRPCInferenceService/ServerLive', body: grpcMessage(Buffer.alloc(0)),
    headers: GRPC_HEADERS, status: 200, grpc: { body: grpcMessage(Buffer.from([0x08, 0x01])), status: '0' } },
  { name: 'gRPC ModelMetadata', method: 'POST', path: '/inference.GRPCInferenceService/ModelMetadata', body: grpcMessage(Buffer.from([0x0a, 6, ...Buffer.from('simple')])),
    headers: GRPC_HEADERS, status: 200, grpc: { body: Buffer.alloc(0), status: '0' } },
];

/** What the gRPC port serves (the rest there is 415). */
const GRPC_CASES = CASES.filter((c) => c.grpc !== undefined);

interface Expected { readonly status: number; readonly body: Buffer | undefined }

/** What each case must get: the HTTP/1.1 answer of the same gateway (gRPC: fixed, or only its status). */
async function expectations(url: string): Promise<Map<string, Expected>> {
  const out = new Map<string, Expected>();
  for (const c of CASES) {
    if (c.grpc !== undefined) {
      out.set(c.name, { status: c.status, body: c.grpc.body.length > 0 ? c.grpc.body : undefined });
      continue;
    }
    const r = await send(`${url}${c.path}`, { method: c.method, headers: c.headers, body: c.body });
    expect([c.name, r.status]).toEqual([c.name, c.status]);
    out.set(c.name, { status: r.status, body: r.body });
  }
  return out;
}

interface Answer {
  readonly name: string;
  readonly status?: number;
  readonly body?: string;
  readonly trailers?: Record<string, string>;
  readonly error?: string;
}

/** Every line of a JSON-lines client's output checked against the expectations; the problems, one line each. */
function problems(answers: readonly Answer[], expected: Map<string, Expected>, repeat: number, client: string, cases = CASES): string[] {
  const out: string[] = [];
  for (const c of cases) {
    const mine = answers.filter((a) => a.name === c.name);
    if (mine.length !== repeat) out.push(`${client} ${c.name}: ${mine.length} answers, not ${repeat}`);
    const want = expected.get(c.name)!;
    for (const a of mine) {
      if (a.error !== undefined) out.push(`${client} ${c.name}: ${a.error}`);
      else if (a.status !== want.status) out.push(`${client} ${c.name}: status ${a.status}, not ${want.status}`);
      else if (want.body !== undefined && Buffer.from(a.body ?? '', 'base64').compare(want.body) !== 0) {
        out.push(`${client} ${c.name}: body of ${Buffer.from(a.body ?? '', 'base64').length} bytes differs from the ${want.body.length} expected`);
      } else if (c.grpc !== undefined && a.trailers !== undefined && a.trailers['Grpc-Status'] !== c.grpc.status) {
        out.push(`${client} ${c.name}: grpc-status ${a.trailers['Grpc-Status']}, not ${c.grpc.status}`);
      }
    }
  }
  return out;
}

const parseLines = (stdout: string): Answer[] => stdout.split('\n').filter((l) => l.trim() !== '').map((l) => JSON.parse(l) as Answer);

describe.each([
  { transport: 'h2c', tls: false },
  { transport: 'h2 (TLS)', tls: true },
])('$transport', ({ tls }) => {
  let pki: Pki | undefined;
  let gw: RunningGateway;
  let work: string;
  let casesFile: string;
  /** The gRPC cases alone, and the gRPC port's URL (server.grpc.enabled: our own HTTP/2 server). */
  let grpcCasesFile: string;
  let grpcUrl: string;
  let expected: Map<string, Expected>;
  let ca: string[];
  beforeAll(async () => {
    work = mkdtempSync(path.join(tmpdir(), 'tg-interop-'));
    if (tls) pki = makePki();
    gw = await gatewayFor(['--demo', '--max-body-size', String(MAX_BODY), '--grpc-port-enabled', '--grpc-port', '0',
      ...(pki === undefined ? [] : ['--tls-cert', pki.server.cert, '--tls-key', pki.server.key])]);
    // The expected answers from a cleartext twin over HTTP/1.1 (same config, same zoo).
    const twin = tls ? await gatewayFor(['--demo', '--max-body-size', String(MAX_BODY)]) : gw;
    try {
      expected = await expectations(twin.url);
    } finally {
      if (twin !== gw) await twin.close(2000);
    }
    casesFile = path.join(work, 'cases.json');
    const listed = (cases: readonly Case[]): string => JSON.stringify(cases.map((c) => ({
      name: c.name, method: c.method, path: c.path, headers: c.headers ?? {}, body: c.body?.toString('base64') ?? '', repeat: REPEAT,
    })));
    writeFileSync(casesFile, listed(CASES));
    grpcCasesFile = path.join(work, 'grpc-cases.json');
    writeFileSync(grpcCasesFile, listed(GRPC_CASES));
    grpcUrl = `${tls ? 'https' : 'http'}://127.0.0.1:${gw.grpcPort!}`;
    ca = pki === undefined ? [] : [pki.ca.cert];
  });
  afterAll(async () => {
    await gw?.close(2000);
    pki?.remove();
    rmSync(work, { recursive: true, force: true });
  });

  needs(PYTHON()).test('Python httpx (h2): every answer whole', async () => {
    const python = await interopPython();
    const r = await run(python, [path.join(HERE, 'httpx_client.py'), casesFile, gw.url, ...ca], { maxBufferBytes: 256 << 20 });
    expect(r.stderr).toBe('');
    const answers = parseLines(r.stdout);
    expect(answers.every((a) => a.error !== undefined || (a as { version?: string }).version === 'HTTP/2')).toBe(true);
    expect(problems(answers, expected, REPEAT, 'httpx')).toEqual([]);
  });

  needs(GO()).test('Go net/http (golang.org/x/net/http2): every answer whole, gRPC trailers included', async () => {
    const client = await goClient();
    const r = await run(client, [casesFile, gw.url, ...ca], { maxBufferBytes: 256 << 20 });
    expect([r.code, r.stderr]).toEqual([0, '']);
    const answers = parseLines(r.stdout);
    expect(problems(answers, expected, REPEAT, 'go')).toEqual([]);
    for (const c of CASES.filter((x) => x.grpc !== undefined)) {
      for (const a of answers.filter((x) => x.name === c.name)) expect([c.name, a.trailers?.['Grpc-Status']]).toEqual([c.name, c.grpc!.status]);
    }
  });

  needs(GO()).test('Go net/http: an answer given while the body is still arriving (1 KiB of a declared 1 MiB) arrives whole', async () => {
    if (tls) return; // the early mode speaks h2c only
    const client = await goClient();
    const r = await run(client, ['early', `${gw.url}/nope`], { timeoutMs: 30_000 });
    expect([r.code, r.stderr]).toEqual([0, '']);
    const a = JSON.parse(r.stdout) as Answer;
    expect(a.error).toBeUndefined();
    expect([a.status, Buffer.from(a.body ?? '', 'base64').toString()]).toEqual([404, expected.get('404 GET')!.body!.toString()]);
  });

  needs(CURL()).test('curl: every answer whole', async () => {
    const found: string[] = [];
    for (const [i, c] of CASES.entries()) {
      const args = [tls ? '--http2' : '--http2-prior-knowledge', ...(tls ? ['--cacert', ca[0]!] : []), '-X', c.method, '--max-time', '30'];
      for (const [k, v] of Object.entries(c.headers ?? {})) args.push('-H', `${k}: ${v}`);
      if (c.body !== undefined) {
        const bodyFile = path.join(work, `curl-${i}.body`);
        writeFileSync(bodyFile, c.body);
        args.push('--data-binary', `@${bodyFile}`);
      }
      const r = await curl(...args, `${gw.url}${c.path}`);
      const answer: Answer = r.exit === 0 && r.version === '2'
        ? { name: c.name, status: r.status, body: r.body.toString('base64') }
        : { name: c.name, error: `curl exit ${r.exit}, HTTP version ${r.version}: ${r.stderr.trim()}` };
      found.push(...problems([answer], new Map([[c.name, expected.get(c.name)!]]), 1, 'curl').filter((p) => p.includes(c.name)));
    }
    expect(found).toEqual([]);
  });

  needs(PYTHON()).test('the gRPC port: httpx gets every gRPC answer whole', async () => {
    const python = await interopPython();
    const r = await run(python, [path.join(HERE, 'httpx_client.py'), grpcCasesFile, grpcUrl, ...ca], { maxBufferBytes: 256 << 20 });
    expect(r.stderr).toBe('');
    expect(problems(parseLines(r.stdout), expected, REPEAT, 'httpx', GRPC_CASES)).toEqual([]);
  });

  needs(GO()).test('the gRPC port: Go net/http gets every gRPC answer whole, trailers included', async () => {
    const client = await goClient();
    const r = await run(client, [grpcCasesFile, grpcUrl, ...ca], { maxBufferBytes: 256 << 20 });
    expect([r.code, r.stderr]).toEqual([0, '']);
    const answers = parseLines(r.stdout);
    expect(problems(answers, expected, REPEAT, 'go', GRPC_CASES)).toEqual([]);
    for (const c of GRPC_CASES) {
      for (const a of answers.filter((x) => x.name === c.name)) expect([c.name, a.trailers?.['Grpc-Status']]).toEqual([c.name, c.grpc!.status]);
    }
  });

  needs(H2LOAD()).test('the gRPC port: h2load\'s gRPC calls all done, none errored; a REST request there is 415 to h2load and curl', async () => {
    const found: string[] = [];
    for (const c of GRPC_CASES) {
      const bodyFile = path.join(work, `h2load-port-${c.name.replace(/\W/g, '')}.body`);
      writeFileSync(bodyFile, c.body!);
      const args = ['-n', '200', '-c', '2', '-m', '8', '-t', '1', '-d', bodyFile];
      for (const [k, v] of Object.entries(c.headers ?? {})) args.push('-H', `${k}: ${v}`);
      const r = await run('h2load', [...args, `${grpcUrl}${c.path}`]);
      const req = /requests: (\d+) total, (\d+) started, (\d+) done, (\d+) succeeded, (\d+) failed, (\d+) errored, (\d+) timeout/.exec(r.stdout);
      if (r.code !== 0 || req === null || Number(req[4]) !== 200) found.push(`h2load ${c.name}: exit ${r.code}: ${r.stdout}${r.stderr}`);
    }
    const rest = await run('h2load', ['-n', '4', '-c', '1', `${grpcUrl}/v2/health/ready`]);
    if (!/status codes: 0 2xx, 0 3xx, 4 4xx/.test(rest.stdout)) found.push(`h2load REST on the gRPC port: ${rest.stdout}`);
    if (!tls) {
      const r = await curl('--http2-prior-knowledge', `${grpcUrl}/v2/health/ready`);
      if (r.status !== 415 || r.exit !== 0) found.push(`curl REST on the gRPC port: exit ${r.exit}, status ${r.status}`);
    }
    expect(found).toEqual([]);
  });

  needs(H2LOAD()).test('h2load: every request done, none errored, every DATA byte there', async () => {
    const n = 12;
    const found: string[] = [];
    for (const [i, c] of CASES.entries()) {
      const args = ['-n', String(n), '-c', '1', '-m', '4', '-t', '1'];
      for (const [k, v] of Object.entries(c.headers ?? {})) args.push('-H', `${k}: ${v}`);
      if (c.method !== 'GET' && c.method !== 'POST') args.push('-H', `:method: ${c.method}`);
      if (c.body !== undefined) {
        const bodyFile = path.join(work, `h2load-${i}.body`);
        writeFileSync(bodyFile, c.body);
        args.push('-d', bodyFile);
      }
      const r = await run('h2load', [...args, `${gw.url}${c.path}`]);
      const req = /requests: (\d+) total, (\d+) started, (\d+) done, (\d+) succeeded, (\d+) failed, (\d+) errored, (\d+) timeout/.exec(r.stdout);
      const data = /traffic: .* total, .* headers .*, .*\((\d+)\) data/.exec(r.stdout);
      const codes = /status codes: (\d+) 2xx, (\d+) 3xx, (\d+) 4xx, (\d+) 5xx/.exec(r.stdout);
      if (r.code !== 0 || req === null || data === null || codes === null) {
        found.push(`h2load ${c.name}: exit ${r.code}: ${r.stdout}${r.stderr}`);
        continue;
      }
      const want = expected.get(c.name)!;
      const wantCodes = [0, 0, 0, 0];
      wantCodes[Math.floor(want.status / 100) - 2] = n;
      if (Number(req[3]) !== n || Number(req[6]) !== 0 || Number(req[7]) !== 0) found.push(`h2load ${c.name}: ${req[0]}`);
      if (codes.slice(1).map(Number).join() !== wantCodes.join()) found.push(`h2load ${c.name}: ${codes[0]}, not ${n} × ${want.status}`);
      const bodyBytes = want.body?.length ?? c.grpc?.body.length;
      if (bodyBytes !== undefined && c.grpc?.body.length !== 0 && Number(data[1]) !== n * bodyBytes) {
        found.push(`h2load ${c.name}: ${data[1]} DATA bytes, not ${n} × ${bodyBytes}`);
      }
    }
    expect(found).toEqual([]);
  });
});
