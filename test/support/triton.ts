// Real Triton for tests: makes (or reuses) the cached venv with nvidia-pytriton, starts
// test/triton/zoo.py on 127.0.0.1 with free ports (the whole zoo or a subset of it), waits for its
// TRITON_READY line and stops it with SIGTERM (then SIGKILL if it lingers). Several at once for
// tests of replicas that serve different models.
import { execFileSync, spawn } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { type AddressInfo, createServer } from 'node:net';
import { join } from 'node:path';
import { stopChild } from './observed';

export interface RunningTriton {
  readonly http: number;
  readonly grpc: number;
  readonly metrics: number;
  readonly version: string;
  /** The Unix socket gRPC listens on (TritonOptions.grpcSocket): `grpc` is then only its path's suffix. */
  readonly grpcSocket?: string;
  /** The port of Triton's SageMaker frontend, when asked for (TritonOptions.sagemakerDefaultModel). */
  readonly sagemaker?: number;
  readonly startupMs: number;
  /** The zoo.py process (tritonserver and the model stubs are its descendants). */
  readonly pid: number;
  /** Resolves when zoo.py has exited (stopped, or after its tritonserver died). */
  readonly exited: Promise<void>;
  stop(): Promise<void>;
}

export interface TritonOptions {
  /** Fixed ports (0 or absent: free ones); a restarted Triton takes the ports of the one it replaces. */
  readonly http?: number;
  readonly grpc?: number;
  readonly metrics?: number;
  /** tritonserver --log-verbose. */
  readonly logVerbose?: number;
  /** tritonserver's own log file (zoo.py --log-file). */
  readonly logFile?: string;
  /**
   * gRPC over TLS with this server certificate (tritonserver --grpc-use-ssl); `mutual` also
   * requires a client certificate signed by `rootCert` (--grpc-use-ssl-mutual). HTTP stays plain.
   */
  readonly grpcTls?: { readonly cert: string; readonly key: string; readonly rootCert?: string; readonly mutual?: boolean };
  /** gRPC on a Unix domain socket at this path (zoo.py --grpc-socket; tritonserver appends `:<grpc port>`). */
  readonly grpcSocket?: string;
  /** The models its repository holds (zoo.py --models; absent: the whole zoo). Fewer models start faster. */
  readonly models?: readonly string[];
  /** Models in the repository that are not loaded at start-up (zoo.py --unloaded); load them with loadModel(). */
  readonly unloaded?: readonly string[];
  /** Also serve Triton's SageMaker frontend, /invocations calling this model (zoo.py --sagemaker-default-model). */
  readonly sagemakerDefaultModel?: string;
}

const ROOT = join(__dirname, '..', '..');
const START_TIMEOUT_MS = 300_000;

/** The cached venv of test/triton/requirements.txt, or of another requirements file (made on first use). */
export function tritonVenv(requirements?: string): string {
  const args = [join(ROOT, 'test/triton/venv.sh'), ...(requirements === undefined ? [] : [join(ROOT, requirements)])];
  const out = execFileSync('bash', args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] });
  const dir = out.trim().split('\n').pop();
  if (!dir) throw new Error('test/triton/venv.sh printed no venv path');
  return dir;
}

export async function startTriton(options: TritonOptions = {}): Promise<RunningTriton> {
  const venv = tritonVenv();
  const started = Date.now();
  const args = [
    ...(options.http ? ['--http-port', String(options.http)] : []),
    ...(options.grpc ? ['--grpc-port', String(options.grpc)] : []),
    ...(options.metrics ? ['--metrics-port', String(options.metrics)] : []),
    ...(options.logVerbose ? ['--log-verbose', String(options.logVerbose)] : []),
    ...(options.logFile ? ['--log-file', options.logFile] : []),
    ...(options.grpcTls ? ['--grpc-server-cert', options.grpcTls.cert, '--grpc-server-key', options.grpcTls.key] : []),
    ...(options.grpcTls?.rootCert ? ['--grpc-root-cert', options.grpcTls.rootCert] : []),
    ...(options.grpcTls?.mutual ? ['--grpc-mutual'] : []),
    ...(options.grpcSocket === undefined ? [] : ['--grpc-socket', options.grpcSocket]),
    ...(options.models ? ['--models', options.models.join(',')] : []),
    ...(options.unloaded?.length ? ['--unloaded', options.unloaded.join(',')] : []),
    ...(options.sagemakerDefaultModel === undefined ? [] : ['--sagemaker-default-model', options.sagemakerDefaultModel]),
  ];
  const child = spawn(join(venv, 'bin', 'python'), [join(ROOT, 'test/triton/zoo.py'), ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, PYTHONUNBUFFERED: '1' },
  });
  const log: string[] = [];
  child.stderr.setEncoding('utf8').on('data', (s: string) => {
    log.push(s);
    if (log.length > 400) log.shift();
  });

  type Ready = { http: number; grpc: number; metrics: number; version: string; sagemaker?: number; grpc_socket?: string };
  const ready = await new Promise<Ready>((resolve, reject) => {
    let buffered = '';
    const timer = setTimeout(() => fail(new Error(`Triton did not become ready in ${START_TIMEOUT_MS} ms`)), START_TIMEOUT_MS);
    const fail = (err: Error): void => {
      clearTimeout(timer);
      child.kill('SIGKILL');
      reject(new Error(`${err.message}\n--- zoo.py stderr (tail) ---\n${log.join('').slice(-8000)}`));
    };
    child.stdout.setEncoding('utf8').on('data', (s: string) => {
      buffered += s;
      const m = /^TRITON_READY (\{.*\})$/m.exec(buffered);
      if (m) {
        clearTimeout(timer);
        resolve(JSON.parse(m[1]!));
      }
    });
    child.once('exit', (code, signal) => fail(new Error(`zoo.py exited (${code ?? signal}) before Triton was ready`)));
  });
  child.removeAllListeners('exit');
  const exited = new Promise<void>((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) resolve();
    else child.once('exit', () => resolve());
  });

  const { grpc_socket: grpcSocket, ...ports } = ready;
  return {
    ...ports,
    ...(grpcSocket === undefined ? {} : { grpcSocket }),
    startupMs: Date.now() - started,
    pid: child.pid!,
    exited,
    stop: () => stopChild(child, 30_000),
  };
}

/**
 * One Triton per entry of `each`, `concurrency` of them starting at a time (start-up is CPU bound:
 * on 2 cores, more at once is no faster and stretches each start towards its timeout). Resolves
 * in the order given; if one fails, the ones already started are stopped before it rejects.
 */
export async function startTritons(each: readonly TritonOptions[], concurrency = 2): Promise<RunningTriton[]> {
  const started: (RunningTriton | undefined)[] = Array.from(each, () => undefined);
  let next = 0;
  let failure: Error | undefined;
  const worker = async (): Promise<void> => {
    while (failure === undefined && next < each.length) {
      const i = next++;
      try {
        started[i] = await startTriton(each[i]);
      } catch (err) {
        failure ??= err as Error;
      }
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(concurrency, each.length)) }, worker));
  if (failure !== undefined) {
    await Promise.all(started.flatMap((t) => (t === undefined ? [] : [t.stop()])));
    throw failure;
  }
  return started as RunningTriton[];
}

/** The pids of every process descending from `pid` (Linux /proc). */
function descendants(pid: number): { pid: number; comm: string }[] {
  const children = new Map<number, { pid: number; comm: string }[]>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    let stat: string;
    try {
      stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
    } catch {
      continue; // gone meanwhile
    }
    // pid (comm) state ppid …; comm may hold spaces and parentheses, so split at the last ')'
    const close = stat.lastIndexOf(')');
    const comm = stat.slice(stat.indexOf('(') + 1, close);
    const ppid = Number(stat.slice(close + 2).split(' ')[1]);
    const list = children.get(ppid) ?? [];
    list.push({ pid: Number(entry), comm });
    children.set(ppid, list);
  }
  const out: { pid: number; comm: string }[] = [];
  const walk = (p: number): void => {
    for (const c of children.get(p) ?? []) {
      out.push(c);
      walk(c.pid);
    }
  };
  walk(pid);
  return out;
}

/**
 * SIGKILLs the tritonserver process of a running zoo (a crashed server: no GOAWAY, no FIN
 * handshake of its own), and resolves once zoo.py has noticed, cleaned up and exited (~4 s), so
 * its ports can be taken again. Returns when the kill was sent (performance.now()).
 */
export async function killTritonServer(t: RunningTriton, ms = 30_000): Promise<number> {
  const server = descendants(t.pid).find((p) => p.comm === 'tritonserver');
  if (server === undefined) throw new Error(`no tritonserver process under zoo.py (pid ${t.pid})`);
  process.kill(server.pid, 'SIGKILL');
  const at = performance.now();
  const timer = setTimeout(() => { try { process.kill(t.pid, 'SIGKILL'); } catch { /* gone */ } }, ms);
  await t.exited;
  clearTimeout(timer);
  return at;
}

/** A port that was free a moment ago on 127.0.0.1 (for a server that must keep it across restarts). */
export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}
