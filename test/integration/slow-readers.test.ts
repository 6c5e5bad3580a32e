// Slow readers over HTTP/2 (the built CLI, its RSS measured from /proc): a client that opens no
// flow-control window (SETTINGS_INITIAL_WINDOW_SIZE 0) and asks for large answers cannot make the
// gateway hold more than server.h2.maxUnreadAnswerBytes of them per connection; the streams past
// it are reset with CANCEL at once, and the access log and the error counter say why
// (GW_ERR_REQUEST_ANSWER_UNREAD). A stream whose answer does not move for server.h2.unreadAnswerMs is
// reset too. The one stream with bytes queued is never reset for the byte budget.
import { type ChildProcessWithoutNullStreams, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { type ClientHttp2Session, connect, constants } from 'node:http2';
import { join } from 'node:path';
import { binaryBody } from '../support/http';
import { nextEvent, waitForStall, waitUntil } from '../support/wait';
import { type ReferenceBackend, startReferenceBackend } from '../../gateway/reference-backend/server';

const BIN = join(__dirname, '../../bin/tensorgate');
const MIB = 1024 * 1024;
const BUDGET = 32 * MIB;
const ANSWER = 8 * MIB;
const STREAMS = 40;

jest.setTimeout(60_000);

interface Gateway { readonly child: ChildProcessWithoutNullStreams; readonly url: string; readonly lines: Record<string, unknown>[] }

/** The gateway alone in its process (its RSS is what is measured), in front of `backend`. */
async function start(backend: string, args: readonly string[]): Promise<Gateway> {
  const child = spawn(BIN, ['--backend', backend, '--host', '127.0.0.1', '--port', '0', '--metrics-port', '0', ...args], { stdio: ['pipe', 'pipe', 'pipe'] });
  const lines: Record<string, unknown>[] = [];
  let out = '';
  const url = await new Promise<string>((resolve, reject) => {
    child.stdout.setEncoding('utf8').on('data', (s: string) => {
      out += s;
      let nl: number;
      while ((nl = out.indexOf('\n')) >= 0) {
        const line = out.slice(0, nl);
        out = out.slice(nl + 1);
        const m = /^tensorgate listening on (\S+) /.exec(line);
        if (m) resolve(m[1]!);
        else if (line.startsWith('{')) lines.push(JSON.parse(line) as Record<string, unknown>);
      }
    });
    child.once('exit', (code) => reject(new Error(`exited ${code} before listening`)));
  });
  return { child, url, lines };
}

const rssBytes = (pid: number): number => Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]) * 1024;

const big = binaryBody({
  inputs: [{ name: 'N', datatype: 'INT64', shape: [1], parameters: { binary_data_size: 8 } }],
  outputs: [{ name: 'DATA', parameters: { binary_data: true } }],
}, Buffer.from(new BigInt64Array([BigInt(ANSWER)]).buffer));

/** A stream asking big_output for ANSWER bytes; resolves with its RST_STREAM code when it closes. */
function ask(session: ClientHttp2Session): Promise<number> {
  const stream = session.request({
    ':method': 'POST', ':path': '/v2/models/big_output/infer', 'content-length': big.body.length,
    'inference-header-content-length': big.headers['Inference-Header-Content-Length'],
  });
  stream.on('error', () => undefined);
  stream.end(big.body);
  return new Promise((resolve) => stream.once('close', () => resolve(stream.rstCode)));
}

describe('a client that never opens its flow-control window', () => {
  let backend: ReferenceBackend;
  let gw: Gateway;
  let session: ClientHttp2Session | undefined;
  beforeAll(async () => {
    backend = await startReferenceBackend({ host: '127.0.0.1' });
  });
  afterAll(async () => {
    await backend?.close(500);
  });
  afterEach(async () => {
    session?.destroy();
    if (gw !== undefined && gw.child.exitCode === null) {
      const exited = nextEvent(gw.child, 'exit');
      gw.child.kill('SIGKILL');
      await exited;
    }
  });

  test(`${STREAMS} streams of ${ANSWER / MIB} MiB answers: RSS rises by less than the budget (${BUDGET / MIB} MiB) plus slack; the streams past it are reset at once and logged`, async () => {
    gw = await start(backend.address, ['--h2-max-unread-answer-bytes', String(BUDGET), '--h2-max-concurrent-streams', '100', '--max-in-flight-requests', '1000']);
    // Warm: one answer read whole, so the code paths and pools exist before the baseline.
    const warm = connect(gw.url);
    warm.on('error', () => undefined);
    await Promise.all(Array.from({ length: 2 }, () => new Promise<void>((resolve) => {
      const s = warm.request({ ':method': 'POST', ':path': '/v2/models/big_output/infer', 'content-length': big.body.length,
        'inference-header-content-length': big.headers['Inference-Header-Content-Length'] });
      s.resume();
      s.once('close', () => resolve());
      s.end(big.body);
    })));
    warm.close();
    await waitForStall(() => rssBytes(gw.child.pid!), 'the gateway\'s RSS', 500, 10_000);
    const before = rssBytes(gw.child.pid!);

    session = connect(gw.url, { settings: { initialWindowSize: 0 } });
    session.on('error', () => undefined);
    const codes = Array.from({ length: STREAMS }, () => ask(session!));
    // Every answer the budget allows stays queued; the rest are reset as they are written.
    const reset = (): number => gw.lines.filter((l) => l.error_code === 'GW_ERR_REQUEST_ANSWER_UNREAD').length;
    await waitUntil(() => reset() >= STREAMS - Math.ceil(BUDGET / ANSWER) - 1, 'the streams past the budget reset', 30_000);
    await waitForStall(() => rssBytes(gw.child.pid!), 'the gateway\'s RSS', 500, 10_000);
    const rise = rssBytes(gw.child.pid!) - before;
    process.stdout.write(`slow readers: RSS ${Math.round(before / MIB)} MiB before, +${Math.round(rise / MIB)} MiB with ${STREAMS} unread ${ANSWER / MIB} MiB answers (budget ${BUDGET / MIB} MiB)\n`);
    // Slack: the allocator's own (freed answers are not all given back at once), and Node's.
    expect(rise).toBeLessThan(BUDGET + 96 * MIB);
    session.destroy();
    const closed = await Promise.all(codes);
    expect(closed.filter((c) => c === constants.NGHTTP2_CANCEL).length).toBeGreaterThanOrEqual(STREAMS - Math.ceil(BUDGET / ANSWER) - 1);
    const line = gw.lines.find((l) => l.error_code === 'GW_ERR_REQUEST_ANSWER_UNREAD');
    expect(line).toMatchObject({ status: 200, route: expect.any(String) as string });
  });

  test('one stream whose answer does not move for server.h2.unreadAnswerMs is reset, logged and counted; the only stream is never cut for bytes', async () => {
    gw = await start(backend.address, ['--h2-max-unread-answer-bytes', String(1 * MIB), '--h2-unread-answer-ms', '500']);
    session = connect(gw.url, { settings: { initialWindowSize: 0 } });
    session.on('error', () => undefined);
    const t0 = performance.now();
    const code = await ask(session);
    const took = performance.now() - t0;
    expect(code).toBe(constants.NGHTTP2_CANCEL);
    expect(took).toBeGreaterThanOrEqual(450);
    expect(took).toBeLessThan(10_000);
    await waitUntil(() => gw.lines.some((l) => l.error_code === 'GW_ERR_REQUEST_ANSWER_UNREAD'), 'the access line', 5000);
  });
});

describe('a gRPC client that never opens its flow-control window', () => {
  let backend: ReferenceBackend;
  let gw: Gateway | undefined;
  let session: ClientHttp2Session | undefined;
  beforeAll(async () => {
    backend = await startReferenceBackend({ host: '127.0.0.1' });
  });
  afterAll(async () => {
    session?.destroy();
    if (gw !== undefined && gw.child.exitCode === null) {
      const exited = nextEvent(gw.child, 'exit');
      gw.child.kill('SIGKILL');
      await exited;
    }
    await backend?.close(500);
  });

  // Regression: a gRPC answer whose headers had gone out waited for 'wantTrailers' forever past
  // the deadline (its DATA never left), the stream open, its in-flight place already given back,
  // and the drain ended with exit 3.
  test('ModelConfig answers not read for server.h2.unreadAnswerMs are reset with CANCEL, logged and counted', async () => {
    gw = await start(backend.address, ['--h2-unread-answer-ms', '500', '--upstream-timeout-ms', '2000']);
    session = connect(gw.url, { settings: { initialWindowSize: 0 } });
    session.on('error', () => undefined);
    const message = Buffer.from([0x0a, 6, ...Buffer.from('simple')]);
    const framed = Buffer.concat([Buffer.from([0, 0, 0, 0, message.length]), message]);
    const codes = Array.from({ length: 5 }, () => {
      const stream = session!.request({ ':method': 'POST', ':path': '/inference.GRPCInferenceService/ModelConfig', 'content-type': 'application/grpc', te: 'trailers' });
      stream.on('error', () => undefined);
      stream.end(framed);
      return new Promise<number>((resolve) => stream.once('close', () => resolve(stream.rstCode ?? -1)));
    });
    const t0 = performance.now();
    const all = await Promise.race([Promise.all(codes), new Promise<undefined>((resolve) => setTimeout(() => resolve(undefined), 6000).unref())]);
    expect(all).toEqual(Array.from({ length: 5 }, () => constants.NGHTTP2_CANCEL));
    expect(performance.now() - t0).toBeGreaterThanOrEqual(450);
    await waitUntil(() => gw!.lines.filter((l) => l.error_code === 'GW_ERR_REQUEST_ANSWER_UNREAD').length === 5, 'five access lines', 5000);
    expect(gw.lines.find((l) => l.error_code === 'GW_ERR_REQUEST_ANSWER_UNREAD')).toMatchObject({ grpc_status: 1 });
  });
});
