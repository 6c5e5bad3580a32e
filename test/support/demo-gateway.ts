// The built gateway (bin/tensorgate) on its embedded demo backend, as a child process on
// 127.0.0.1 with ports the OS picks: for the tests of the CLI's own behaviour (signals, exit codes,
// drain). Bounded: a gateway not listening within `ms` is stopped and the start rejects.
import { type ChildProcessWithoutNullStreams, spawn } from 'node:child_process';
import path from 'node:path';
import { stopChild } from './observed';
import { firstLine } from './wait';

const BIN = path.join(__dirname, '../../bin/tensorgate');

export interface DemoGateway {
  /** Its stdout and stderr are pipes; its first stdout line, the listening line, is read. */
  readonly child: ChildProcessWithoutNullStreams;
  /** http://127.0.0.1:<port>, from the listening line. */
  readonly url: string;
}

/** `bin/tensorgate --demo` with `flags`, once it prints its listening line. */
export async function spawnDemoGateway(flags: readonly string[] = [], ms = 20_000): Promise<DemoGateway> {
  const child = spawn(BIN, ['--demo', '--host', '127.0.0.1', '--port', '0', '--metrics-port', '0', ...flags], { stdio: ['pipe', 'pipe', 'pipe'] });
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`gateway not listening within ${ms} ms`)), ms);
  });
  try {
    const line = await Promise.race([firstLine(child), late]);
    const m = /^tensorgate listening on (\S+) /.exec(line);
    if (m === null) throw new Error(`not a listening line: ${line}`);
    return { child, url: m[1]! };
  } catch (err) {
    await stopChild(child);
    throw err;
  } finally {
    clearTimeout(timer);
  }
}
