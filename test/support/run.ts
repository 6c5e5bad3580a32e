// A program the tests run to its end (a third-party client, a Python script, a build): its exit
// code and output. Bounded: killed (SIGKILL) past `timeoutMs`, its output cut at `maxBufferBytes`.
import { execFile } from 'node:child_process';

export interface Ran {
  /** 0, the program's exit code, or 1 when it was killed or could not start. */
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

export interface RunOptions {
  /** 120 s unless given. */
  readonly timeoutMs?: number;
  readonly cwd?: string;
  /** The whole environment (the test's own unless given). */
  readonly env?: NodeJS.ProcessEnv;
  /** 64 MiB unless given. */
  readonly maxBufferBytes?: number;
}

/** Runs `file` with `args` to its end; resolves whatever the outcome (see `code`). */
export function run(file: string, args: readonly string[], o: RunOptions = {}): Promise<Ran> {
  return new Promise((resolve) => {
    execFile(file, args, { cwd: o.cwd, env: o.env, timeout: o.timeoutMs ?? 120_000, killSignal: 'SIGKILL', maxBuffer: o.maxBufferBytes ?? 64 << 20, encoding: 'utf8' },
      (err, stdout, stderr) => resolve({ code: err === null ? 0 : typeof err.code === 'number' ? err.code : 1, stdout, stderr }));
  });
}
