// A built gateway (bin/tensorgate, --demo) on 127.0.0.1 with its metrics port, its stdout (the
// access log) kept line by line, and a mixed load against it: V2 JSON and binary inferences of the
// zoo's `simple`, an unknown model (404), a malformed body (400), and, with TLS, a plain-HTTP
// request on the TLS port (a failed handshake). For the dashboard's tests (Prometheus and the
// browser). Every process started here has a bounded stop.
import { type ChildProcessWithoutNullStreams, spawn } from 'node:child_process';
import { Agent as HttpAgent, request as httpRequest } from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';
import { createServer, connect } from 'node:net';
import path from 'node:path';
import { binaryBody } from './http';
import { simpleBody } from './load';
import { int32 } from './int32';

const BIN = path.join(__dirname, '../../bin/tensorgate');

/** A port free on 127.0.0.1 now (the OS picks it; closed again before it is used). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
  });
}

/** SIGTERM, then SIGKILL after `ms`; resolves once the process is gone. */
export function stopChild(child: { exitCode: number | null; signalCode: string | null; kill(s?: NodeJS.Signals): boolean; once(e: 'exit', f: () => void): unknown },
  ms = 5000): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    const timer = setTimeout(() => child.kill('SIGKILL'), ms);
    child.once('exit', () => {
      clearTimeout(timer);
      resolve();
    });
    child.kill('SIGTERM');
  });
}

export interface ObservedGateway {
  readonly url: string;
  readonly port: number;
  readonly metricsPort: number;
  readonly child: ChildProcessWithoutNullStreams;
  /** Every stdout line so far (access log lines are JSON with msg "request"). */
  readonly lines: string[];
  stop(): Promise<void>;
}

/**
 * bin/tensorgate --demo on free ports; `args` adds flags (TLS, telemetry.recent). A port taken
 * between freePort() and the gateway's listen (another suite's connection given it as its local
 * port) is the gateway's exit 2 naming EADDRINUSE: two more tries on other ports.
 */
export async function startObservedGateway(args: readonly string[]): Promise<ObservedGateway> {
  for (let tries = 1; ; tries++) {
    try {
      return await startOnce(args, await freePort(), await freePort());
    } catch (err) {
      if (tries === 3 || !/EADDRINUSE/.test(String(err))) throw err;
    }
  }
}

async function startOnce(args: readonly string[], port: number, metricsPort: number): Promise<ObservedGateway> {
  const child = spawn(BIN, ['--demo', '--host', '127.0.0.1', '--port', String(port), '--metrics-port', String(metricsPort), ...args],
    { stdio: ['pipe', 'pipe', 'pipe'] });
  const lines: string[] = [];
  let rest = '';
  let stderr = '';
  child.stderr.setEncoding('utf8').on('data', (s: string) => { stderr += s.slice(0, 4096); });
  const listening = new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`gateway not listening within 20 s: ${stderr}`)), 20_000);
    child.stdout.setEncoding('utf8').on('data', (s: string) => {
      const parts = (rest + s).split('\n');
      rest = parts.pop()!;
      lines.push(...parts);
      const m = lines.length > 0 ? /^tensorgate listening on (\S+) /.exec(lines[0]!) : null;
      if (m !== null) {
        clearTimeout(timer);
        resolve(m[1]!);
      }
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`gateway exited ${code} before listening: ${stderr}`));
    });
  });
  let url: string;
  try {
    url = (await listening).replace('0.0.0.0', '127.0.0.1');
  } catch (err) {
    await stopChild(child);
    throw err;
  }
  return { url, port, metricsPort, child, lines, stop: () => stopChild(child) };
}

/** The access log lines (msg "request") so far, parsed. */
export function accessLines(gw: ObservedGateway): Record<string, unknown>[] {
  return gw.lines.filter((l) => l.startsWith('{') && l.includes('"msg":"request"')).map((l) => JSON.parse(l) as Record<string, unknown>);
}

export interface Answer {
  readonly status: number;
  readonly body: string;
}

/** One POST, over TLS when `ca` is given (trusting only it). */
export function post(url: string, body: Buffer | string, headers: Record<string, string | number>, agent: HttpAgent, ca?: string): Promise<Answer> {
  const data = typeof body === 'string' ? Buffer.from(body) : body;
  return new Promise((resolve, reject) => {
    const options = { method: 'POST', agent, headers: { 'content-type': 'application/json', 'content-length': data.length, ...headers }, timeout: 10_000 };
    const req = ca === undefined ? httpRequest(url, options) : httpsRequest(url, { ...options, ca });
    req.on('response', (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode!, body: Buffer.concat(chunks).toString() }));
      res.on('error', reject);
    });
    req.on('timeout', () => req.destroy(new Error(`no answer from ${url} within 10 s`)));
    req.on('error', reject);
    req.end(data);
  });
}

/** The zoo's `simple` as a binary-extension body. */
export function simpleBinary(): { body: Buffer; headers: Record<string, number> } {
  return binaryBody({
    inputs: [
      { name: 'INPUT0', datatype: 'INT32', shape: [1, 16], parameters: { binary_data_size: 64 } },
      { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], parameters: { binary_data_size: 64 } },
    ],
  }, int32(16), int32(16));
}

export interface MixedLoad {
  /** Answers by status so far. */
  readonly statuses: Map<number, number>;
  /** Failures of the client itself (none expected). */
  readonly failures: string[];
  stop(): Promise<void>;
}

/** A plain-HTTP request on a TLS port: the server sees a failed handshake (not TLS). */
function notTls(port: number): Promise<void> {
  return new Promise((resolve) => {
    const s = connect(port, '127.0.0.1', () => s.end('GET / HTTP/1.1\r\nHost: x\r\n\r\n'));
    s.on('error', () => resolve());
    s.on('close', () => resolve());
    s.setTimeout(5000, () => s.destroy());
    s.resume();
  });
}

/**
 * `clients` loops, each on its own keep-alive connection, cycling through the forms; `pauseMs`
 * between requests keeps a 2-core machine usable.
 */
export function startMixedLoad(gw: ObservedGateway, clients: number, ca?: string, pauseMs = 5): MixedLoad {
  const statuses = new Map<number, number>();
  const failures: string[] = [];
  let stopping = false;
  const agents: HttpAgent[] = [];
  const infer = (model: string): string => `${gw.url}/v2/models/${model}/infer`;
  const loops = Array.from({ length: clients }, async (_, client) => {
    const agent = ca === undefined ? new HttpAgent({ keepAlive: true, maxSockets: 1 }) : new HttpsAgent({ keepAlive: true, maxSockets: 1 });
    agents.push(agent);
    for (let i = 0; !stopping; i++) {
      try {
        const kind = (i + client) % 8;
        let a: Answer;
        if (kind === 6) a = await post(infer('no_such_model'), simpleBody(), {}, agent, ca);
        else if (kind === 7) a = await post(infer('simple'), '{"inputs": [', {}, agent, ca);
        else if (kind % 2 === 1) {
          const { body, headers } = simpleBinary();
          a = await post(infer('simple'), body, headers, agent, ca);
        } else a = await post(infer('simple'), simpleBody(), { 'x-request-id': `load-${client}-${i}` }, agent, ca);
        statuses.set(a.status, (statuses.get(a.status) ?? 0) + 1);
        if (ca !== undefined && i % 50 === 0) await notTls(gw.port);
      } catch (err) {
        failures.push(String(err));
      }
      await new Promise((r) => setTimeout(r, pauseMs));
    }
  });
  return {
    statuses, failures,
    stop: async () => {
      stopping = true;
      await Promise.all(loops);
      for (const a of agents) a.destroy();
    },
  };
}
