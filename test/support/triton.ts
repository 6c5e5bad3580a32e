// Real Triton for tests: makes (or reuses) the cached venv with nvidia-pytriton, starts
// test/triton/zoo.py on 127.0.0.1 with free ports, waits for its TRITON_READY line and stops
// it with SIGTERM (then SIGKILL if it lingers).
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { join } from 'node:path';

export interface RunningTriton {
  readonly http: number;
  readonly grpc: number;
  readonly metrics: number;
  readonly version: string;
  readonly startupMs: number;
  stop(): Promise<void>;
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

export async function startTriton(): Promise<RunningTriton> {
  const venv = tritonVenv();
  const started = Date.now();
  const child = spawn(join(venv, 'bin', 'python'), [join(ROOT, 'test/triton/zoo.py')], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, PYTHONUNBUFFERED: '1' },
  });
  const log: string[] = [];
  child.stderr.setEncoding('utf8').on('data', (s: string) => {
    log.push(s);
    if (log.length > 400) log.shift();
  });

  const ready = await new Promise<{ http: number; grpc: number; metrics: number; version: string }>((resolve, reject) => {
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

  return {
    ...ready,
    startupMs: Date.now() - started,
    stop: () => stopChild(child),
  };
}

function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise<void>((resolve) => {
    const kill = setTimeout(() => child.kill('SIGKILL'), 30_000);
    child.once('exit', () => {
      clearTimeout(kill);
      resolve();
    });
    child.kill('SIGTERM');
  });
}
