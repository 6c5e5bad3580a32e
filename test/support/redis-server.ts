// A redis-server of the tests' own and the built CLI as gateway processes with a key file
// (test/integration/shared-limits.test.ts, quotas.test.ts).
import { type ChildProcessWithoutNullStreams, spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createClient } from '@redis/client';
import { type ReferenceBackend, startReferenceBackend } from '../../gateway/reference-backend/server';
import { freePort } from './observed';
import { REDIS_SERVER } from './tools';
import { firstLine } from './wait';

const BIN = join(__dirname, '../../bin/tensorgate');
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** A redis-server of our own on `port` (no persistence: a restart starts empty, as a lost pod). */
export class RedisServer {
  child: ChildProcessWithoutNullStreams | undefined;
  constructor(readonly port: number, readonly password: string) {}

  async start(): Promise<void> {
    const child = spawn(REDIS_SERVER().path!, ['--port', String(this.port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no',
      '--requirepass', this.password, '--loglevel', 'warning'], { stdio: ['pipe', 'pipe', 'pipe'] });
    this.child = child;
    // Ready once it answers a PING.
    for (let i = 0; i < 100; i++) {
      const r = spawnSync('redis-cli', ['-p', String(this.port), '-a', this.password, '--no-auth-warning', 'PING'], { encoding: 'utf8', timeout: 2000 });
      if (r.stdout.trim() === 'PONG') return;
      await sleep(50);
    }
    throw new Error('redis-server did not answer');
  }

  async kill(): Promise<void> {
    const c = this.child;
    if (c === undefined || c.exitCode !== null || c.signalCode !== null) return;
    c.kill('SIGKILL');
    await once(c, 'exit');
  }

  /** INFO commandstats: calls per command (lower case), for the commands the limits use. */
  async calls(): Promise<Record<string, number>> {
    const client = createClient({ url: `redis://:${this.password}@127.0.0.1:${this.port}` });
    await client.connect();
    try {
      const info = await client.sendCommand<string>(['INFO', 'commandstats']);
      const out: Record<string, number> = {};
      for (const m of info.matchAll(/^cmdstat_(\w+):calls=(\d+)/gm)) out[m[1]!] = Number(m[2]);
      return out;
    } finally {
      client.destroy();
    }
  }
}

/** Store calls of the limits: the scripts and the releases. */
export const storeCalls = (c: Record<string, number>): number => (c.evalsha ?? 0) + (c.eval ?? 0) + (c.zrem ?? 0);

export interface Gw {
  readonly child: ChildProcessWithoutNullStreams;
  readonly url: string;
  out: string;
  err: string;
  stop(): Promise<void>;
}

export async function cliGateway(dir: string, args: string[]): Promise<Gw> {
  const defaults = (flag: string, value: string): string[] => (args.includes(flag) ? [] : [flag, value]);
  const child = spawn(BIN, ['--host', '127.0.0.1', '--port', '0', ...defaults('--metrics-port', '0'), ...defaults('--log-level', 'warn'), '--auth',
    '--auth-keys-file', join(dir, 'keys.yaml'), ...args], { stdio: ['pipe', 'pipe', 'pipe'] });
  const gw = {
    child, url: '', out: '', err: '',
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill('SIGTERM');
      const t = setTimeout(() => child.kill('SIGKILL'), 10_000);
      await once(child, 'exit');
      clearTimeout(t);
    },
  };
  child.stderr.setEncoding('utf8').on('data', (s: string) => { gw.err += s; });
  // Everything the gateway prints, its first line included: a log line that came in the same read
  // as the listening line (the cluster's worker_pids under load) is not lost.
  child.stdout.setEncoding('utf8').on('data', (s: string) => { gw.out += s; });
  const line = await firstLine(child).catch((e: Error) => { throw new Error(`${e.message}: ${gw.err}`); });
  const m = /^tensorgate listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(line);
  if (m === null) throw new Error(`not a listening line: ${line}`);
  return Object.assign(gw, { url: m[1]! });
}

/** What a Redis suite shares: its key file's directory, its redis-server and reference backend, and its gateways. */
export interface RedisSuite {
  dir: string;
  redis: RedisServer;
  backend: ReferenceBackend;
  /** The store's URL (with its password). */
  readonly store: () => string;
  /** A gateway of the built CLI on the suite's key file and backend; stopped after the test. */
  gateway(args: string[]): Promise<Gw>;
}

/**
 * The set-up of a suite on a real redis-server (call it inside its describe): `keys` as the key
 * file, a redis-server with `password` on a free port and the reference backend before all, the
 * gateways started by a test stopped after it, everything gone after all.
 */
export function redisSuite(name: string, keys: string, password: string): RedisSuite {
  const started: Gw[] = [];
  const suite: RedisSuite = {
    dir: '', redis: undefined!, backend: undefined!,
    store: () => `redis://:${password}@127.0.0.1:${suite.redis.port}`,
    async gateway(args) {
      const g = await cliGateway(suite.dir, ['--backend', suite.backend.address, ...args]);
      started.push(g);
      return g;
    },
  };
  beforeAll(async () => {
    suite.dir = mkdtempSync(join(tmpdir(), `tg-${name}-`));
    writeFileSync(join(suite.dir, 'keys.yaml'), keys);
    suite.redis = new RedisServer(await freePort(), password);
    await suite.redis.start();
    suite.backend = await startReferenceBackend({ host: '127.0.0.1' });
  });
  afterEach(async () => {
    await Promise.all(started.splice(0).map((g) => g.stop()));
  });
  afterAll(async () => {
    await suite.redis?.kill();
    await suite.backend?.close();
    if (suite.dir !== '') rmSync(suite.dir, { recursive: true, force: true });
  });
  return suite;
}
