// Slow readers over HTTP/2 (the built CLI, its RSS measured from /proc): a client that opens no
// flow-control window (SETTINGS_INITIAL_WINDOW_SIZE 0) and asks for large answers cannot make the
// gateway hold more than server.h2.maxUnreadAnswerBytes of them per connection: a streamed answer
// holds what its paused upstream call let in (the upstream stream's window), Triton the rest; the
// streams past the budget are reset with CANCEL, and the access log and the error counter say why
// (GW_ERR_REQUEST_ANSWER_UNREAD). A stream whose answer does not move for server.h2.unreadAnswerMs is
// reset too, and what it held is let go. The one stream with bytes queued is never reset for the
// byte budget. Meanwhile other clients (h2load, nghttp2-client) keep their latency.
import { type ChildProcessWithoutNullStreams, execFile, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { type ClientHttp2Session, connect, constants } from 'node:http2';
import { join } from 'node:path';
import { binaryBody } from '../support/http';
import { framedModelInfer } from '../support/model-infer';
import { nextEvent, waitForStall, waitUntil } from '../support/wait';
import { H2LOAD, needs } from '../support/tools';
import { type ReferenceBackend, startReferenceBackend } from '../../gateway/reference-backend/server';

const BIN = join(__dirname, '../../bin/tensorgate');
const MIB = 1024 * 1024;
const BUDGET = 8 * MIB;
const ANSWER = 8 * MIB;
const STREAMS = 40;
/** What a paused streamed answer holds at least: the upstream stream's window (upstream/connections/h2-sessions.ts). */
const UPSTREAM_WINDOW = 1 * MIB;

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

/** Stops `gw` if it still runs (SIGKILL: nothing of it is measured after). */
async function stop(gw: Gateway | undefined): Promise<void> {
  if (gw === undefined || gw.child.exitCode !== null) return;
  const exited = nextEvent(gw.child, 'exit');
  gw.child.kill('SIGKILL');
  await exited;
}

const rssBytes = (pid: number): number => Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]) * 1024;

/** A binary-extension request to big_output for `bytes` bytes, its output binary. */
const bigOutput = (bytes: number): ReturnType<typeof binaryBody> => binaryBody({
  inputs: [{ name: 'N', datatype: 'INT64', shape: [1], parameters: { binary_data_size: 8 } }],
  outputs: [{ name: 'DATA', parameters: { binary_data: true } }],
}, Buffer.from(new BigInt64Array([BigInt(bytes)]).buffer));
const big = bigOutput(ANSWER);

/** A stream asking big_output for `request`'s bytes; resolves with its RST_STREAM code when it closes. */
function ask(session: ClientHttp2Session, request = big): Promise<number> {
  const stream = session.request({
    ':method': 'POST', ':path': '/v2/models/big_output/infer', 'content-length': request.body.length,
    'inference-header-content-length': request.headers['Inference-Header-Content-Length'],
  });
  stream.on('error', () => undefined);
  stream.end(request.body);
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
    await stop(gw);
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
    // Each answer held holds at least the upstream window; the streams past the budget are reset.
    const reset = (): number => gw.lines.filter((l) => l.error_code === 'GW_ERR_REQUEST_ANSWER_UNREAD').length;
    await waitUntil(() => reset() >= STREAMS - BUDGET / UPSTREAM_WINDOW, 'the streams past the budget reset', 30_000);
    await waitForStall(() => rssBytes(gw.child.pid!), 'the gateway\'s RSS', 500, 10_000);
    const rise = rssBytes(gw.child.pid!) - before;
    process.stdout.write(`slow readers: RSS ${Math.round(before / MIB)} MiB before, +${Math.round(rise / MIB)} MiB with ${STREAMS} unread ${ANSWER / MIB} MiB answers (budget ${BUDGET / MIB} MiB)\n`);
    // Slack: the allocator's own (freed answers are not all given back at once), and Node's.
    expect(rise).toBeLessThan(BUDGET + 96 * MIB);
    session.destroy();
    const closed = await Promise.all(codes);
    expect(closed.filter((c) => c === constants.NGHTTP2_CANCEL).length).toBeGreaterThanOrEqual(STREAMS - BUDGET / UPSTREAM_WINDOW);
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

  test('20 stalled streams cut at once past server.h2.maxResetsPerSecond: each gets CANCEL, and the session lives on', async () => {
    gw = await start(backend.address, ['--h2-unread-answer-ms', '500', '--h2-max-resets-per-second', '5']);
    session = connect(gw.url, { settings: { initialWindowSize: 0 } });
    session.on('error', () => undefined);
    const codes = await Promise.all(Array.from({ length: 20 }, () => ask(session!, bigOutput(256 * 1024))));
    // Before: the rapid-reset bound counted the gateway's own cuts, and ended the session with
    // ENHANCE_YOUR_CALM (11) for the streams still open.
    expect(codes).toEqual(Array.from({ length: 20 }, () => constants.NGHTTP2_CANCEL));
    expect(session.destroyed || session.closed).toBe(false);
    const status = await new Promise<number>((resolve, reject) => {
      const s = session!.request({ ':path': '/v2/health/ready' });
      s.on('response', (h) => resolve(Number(h[':status'])));
      s.on('error', reject);
      s.end();
    });
    expect(status).toBe(200);
  });
});

interface Latency { readonly done: number; readonly failed: number; readonly p50: number; readonly p99: number }

/** Other clients: h2load, 300 small binary-extension requests to `simple` on 4 connections; times from its log. */
function otherClients(url: string, work: string, tag: string): Promise<Latency> {
  const body = binaryBody({
    inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [1, 16], parameters: { binary_data_size: 64 } },
      { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], parameters: { binary_data_size: 64 } }],
    parameters: { binary_data_output: true },
  }, Buffer.alloc(64, 1), Buffer.alloc(64, 2));
  const bodyFile = join(work, 'simple.body');
  writeFileSync(bodyFile, body.body);
  const log = join(work, `h2load-${tag}.log`);
  const args = ['-n', '300', '-c', '4', '-m', '1', '-t', '1', '-d', bodyFile, '-H', `inference-header-content-length: ${body.headers['Inference-Header-Content-Length']}`,
    '--log-file', log, `${url}/v2/models/simple/infer`];
  return new Promise((resolve, reject) => {
    execFile(H2LOAD().path!, args, { timeout: 60_000, encoding: 'utf8' }, (err, stdout) => {
      if (err !== null) {
        reject(new Error(`h2load: ${err.message} ${stdout}`));
        return;
      }
      const rows = readFileSync(log, 'utf8').trim().split('\n').map((l) => l.split('\t'));
      const ms = rows.filter((r) => r[1] === '200').map((r) => Number(r[2]) / 1000).sort((a, b) => a - b);
      const at = (q: number): number => ms[Math.min(ms.length - 1, Math.ceil(q * ms.length) - 1)] ?? Infinity;
      resolve({ done: ms.length, failed: rows.length - ms.length, p50: at(0.5), p99: at(0.99) });
    });
  });
}

describe('3 connections × 30 streams that open no window, 4 MiB binary answers, the gateway\'s defaults', () => {
  const CONNECTIONS = 3;
  const EACH = 30;
  const ANSWER4 = 4 * MIB;
  /** The bound the report set: the attack must not take the gateway's RSS up by this much. */
  const RSS_BUDGET = 150 * 1000 * 1000;
  /**
   * What may stay above the level before once the answers are let go (the allocator's own, Node's):
   * a round holds ~100 MB more; glibc kept up to ~41 MB of freed pages for seconds beside a busy
   * loop (nothing of ours referencing them), against 16–33 MB on a quiet machine.
   */
  const GIVEN_BACK = 48 * MIB;
  let backend: ReferenceBackend;
  let gw: Gateway | undefined;
  let sessions: ClientHttp2Session[] = [];
  let work: string;
  beforeAll(async () => {
    backend = await startReferenceBackend({ host: '127.0.0.1' });
    work = mkdtempSync(join(tmpdir(), 'tg-slow-readers-'));
  });
  afterAll(async () => {
    for (const s of sessions) s.destroy();
    await stop(gw);
    await backend?.close(500);
    rmSync(work, { recursive: true, force: true });
  });

  /** Opens the streams; resolves once every upstream call has started and the gateway's RSS is still. */
  async function attack(gateway: Gateway): Promise<{ codes: Promise<number>[]; peak: () => number; stop: () => void }> {
    const request = bigOutput(ANSWER4);
    const calls = backend.stats.inferCalls;
    sessions = Array.from({ length: CONNECTIONS }, () => {
      const s = connect(gateway.url, { settings: { initialWindowSize: 0 } });
      s.on('error', () => undefined);
      return s;
    });
    const codes = sessions.flatMap((s) => Array.from({ length: EACH }, () => ask(s, request)));
    let peak = 0;
    const sample = (): void => { peak = Math.max(peak, rssBytes(gateway.child.pid!)); };
    const sampler = setInterval(sample, 20);
    await waitUntil(() => backend.stats.inferCalls - calls >= CONNECTIONS * EACH, 'every upstream call started', 30_000);
    await waitForStall(() => rssBytes(gateway.child.pid!), 'the gateway\'s RSS', 500, 10_000);
    sample();
    return { codes, peak: () => peak, stop: () => clearInterval(sampler) };
  }

  needs(H2LOAD()).test('RSS held under 150 MB of growth, given back once the streams are cut or the clients gone, and reused; other clients keep their p99', async () => {
    // Defaults but for the stall bound, cut short so that the test sees it.
    const g = gw = await start(backend.address, ['--h2-unread-answer-ms', '4000']);
    await otherClients(g.url, work, 'warm');
    await waitForStall(() => rssBytes(g.child.pid!), 'the gateway\'s RSS', 500, 10_000);
    const before = rssBytes(g.child.pid!);
    const baseline = await otherClients(g.url, work, 'baseline');

    // Round 1: the clients stay; every stream is cut by the stall bound, and what it held let go.
    const first = await attack(g);
    const during = await otherClients(g.url, work, 'during');
    const codes = await Promise.all(first.codes);
    first.stop();
    const cut = (): number => g.lines.filter((l) => l.error_code === 'GW_ERR_REQUEST_ANSWER_UNREAD').length;
    await waitUntil(() => cut() >= CONNECTIONS * EACH, 'an access line for every stream cut', 5000);
    // The buffers let go are garbage until a full collection: the gateway's reclaim runs one
    // after a quiet second (buffers/reclaim.ts), later on a busy machine; a memory bound, so the
    // wait is bounded but not timed.
    const cutAt = performance.now();
    const cutBackMs = await waitUntil(() => rssBytes(g.child.pid!) - before < GIVEN_BACK, 'the gateway\'s RSS back near its level before, after the cut', 10_000)
      .then(() => Math.round(performance.now() - cutAt), () => undefined);
    const afterCut = rssBytes(g.child.pid!);
    // Round 1's cuts, counted before round 2, whose streams the stall bound may cut too when its
    // attack takes more than --h2-unread-answer-ms to settle (a busy machine).
    const cutFirst = cut();
    for (const s of sessions) s.destroy();

    // Round 2: the clients go while their answers are held.
    const second = await attack(g);
    for (const s of sessions) s.destroy();
    await Promise.all(second.codes);
    second.stop();
    const gone = performance.now();
    await new Promise((r) => setTimeout(r, 1000));
    const afterGone = rssBytes(g.child.pid!);
    // Given back to the system once the reclaim has collected what the cancelled calls let go: within
    // 1–1.5 s on a quiet machine, but beside a busy loop in more than 8 s in 3 of 6 CI runs (the
    // reclaim collects at the first tick that finds the level still, and V8's sweeping moves it for
    // longer there); bounded, not timed.
    const backMs = await waitUntil(() => rssBytes(g.child.pid!) - before < GIVEN_BACK, 'the gateway\'s RSS back near its level before', 25_000)
      .then(() => Math.round(performance.now() - gone), () => undefined);

    const mb = (n: number): string => `${Math.round(n / 1e6)} MB`;
    process.stdout.write(`3 × 30 unread 4 MiB answers: RSS ${mb(before)} before; held ${mb(first.peak())} (round 1), ${mb(second.peak())} (round 2); `
      + `${mb(afterCut)} ${cutBackMs ?? 'more than 10000'} ms after the stall cut, ${mb(afterGone)} 1 s after the clients went, within ${mb(before + GIVEN_BACK)} after ${backMs ?? 'more than 25000'} ms; others p50/p99 ${baseline.p50}/${baseline.p99} ms `
      + `before, ${during.p50}/${during.p99} ms during (${during.failed} failed); ${cutFirst} streams cut in round 1, ${cut() - cutFirst} in round 2\n`);
    expect(first.peak() - before).toBeLessThan(RSS_BUDGET);
    expect(second.peak() - before).toBeLessThan(RSS_BUDGET);
    // Freed and reused: the second round takes no more than the first did, nor does its end. Memory
    // not reused would add a round's worth (~100 MB); how much of a round is held at its peak varies
    // by some 30 MB with the machine's load (the stall cut can begin before the last streams fill).
    expect(second.peak()).toBeLessThan(first.peak() + 48 * MIB);
    expect(afterGone).toBeLessThan(first.peak() + 48 * MIB);
    // RSS after the stall cut, the clients still connected, is printed, not asserted: the gateway's
    // own level (heap and ArrayBuffers) is back within two reclaim ticks of the cut (a per-tick log
    // of buffers/reclaim.ts showed it), but when glibc returns the freed pages to the system is its
    // own: 41 ms to 8 s in quiet runs, and on a loaded machine not before later allocations or the
    // connections' close (3 runs of ~14). What is asserted is that nothing stays held: the second
    // round reuses that memory (its peak above) and everything is given back once the clients go.
    expect(backMs).toBeDefined();
    expect(codes).toEqual(Array.from({ length: CONNECTIONS * EACH }, () => constants.NGHTTP2_CANCEL));
    expect(cutFirst).toBe(CONNECTIONS * EACH);
    // Timings loosely: a shared machine.
    expect(during.failed).toBe(0);
    expect(during.done).toBe(300);
    expect(during.p99).toBeLessThan(Math.max(5 * baseline.p99, baseline.p99 + 250));
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
    await stop(gw);
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

  // The byte bound on gRPC answers, long before the stall bound (30 s here). The relay tells the
  // bound after each write (AnswerBound.afterWrite); the sweep (at most a second apart) checks it
  // too, so this does not tell the two apart. The relay stops reading upstream once a stream's
  // write is refused, so each stream queues about one 16 KiB write, and eight of them pass 64 KiB.
  test('ModelInfer answers past server.h2.maxUnreadAnswerBytes are reset at once, newest first, never the oldest holding', async () => {
    session?.destroy();
    await stop(gw); // the test before this one's
    gw = await start(backend.address, ['--h2-max-unread-answer-bytes', '65535', '--h2-unread-answer-ms', '30000']);
    session = connect(gw.url, { settings: { initialWindowSize: 0 } });
    session.on('error', () => undefined);
    const { message } = framedModelInfer('identity_uint8', Buffer.alloc(256 * 1024, 7));
    const closed: number[] = [];
    const codes = Array.from({ length: 8 }, (_, i) => {
      const stream = session!.request({ ':method': 'POST', ':path': '/inference.GRPCInferenceService/ModelInfer', 'content-type': 'application/grpc', te: 'trailers' });
      stream.on('error', () => undefined);
      stream.end(message);
      return new Promise<number>((resolve) => stream.once('close', () => {
        closed.push(i);
        resolve(stream.rstCode ?? -1);
      }));
    });
    await waitUntil(() => gw!.lines.filter((l) => l.error_code === 'GW_ERR_REQUEST_ANSWER_UNREAD').length >= 2, 'two streams cut', 10_000);
    expect(closed).not.toContain(0);
    const cut = await Promise.all(closed.map((i) => codes[i]!));
    expect(cut.every((c) => c === constants.NGHTTP2_CANCEL)).toBe(true);
    session.destroy(); // the rest, still held, go with their connection
    await Promise.all(codes);
  });
});
