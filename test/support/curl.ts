// curl, the HTTP client most users try first, as the tests run it: the program tools.ts finds
// (wrap the test in needs(CURL())), one run giving curl's exit code, the answer's status, head and
// body apart (the body on stdout, then curl's own account of the transfer, -w '%{json}'; the heads,
// and HTTP/2 trailers, dumped into a file of their own). Bounded: 60 s (give --max-time for less), 64 MiB.
import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CURL } from './tools';

export interface CurlAnswer {
  /** curl's exit code: 0, or why the transfer failed (7 no connection, 28 timed out, 35 TLS, 60 certificate). */
  readonly exit: number;
  /** The answer's status; 0 when none came. */
  readonly status: number;
  /** HTTP version as curl names it: '1.1', '2'. */
  readonly version: string;
  /** Content-Type, '' when none. */
  readonly type: string;
  /** The status line and header lines of the (last) head, as they came; trailers left out. */
  readonly head: string;
  /** The head's fields by lower-case name (a repeated one joined with ', '). */
  readonly headers: Readonly<Record<string, string>>;
  readonly body: Buffer;
  readonly stderr: string;
}

/** What -w '%{json}' says, of what is read here. */
interface Written {
  readonly exitcode: number;
  readonly http_code: number;
  readonly http_version: string;
  readonly content_type: string | null;
}

/**
 * curl -sS with `args` (the URL among them; not -o, -D or -w, which are the helper's). A failed
 * transfer resolves too, with its `exit`.
 */
export function curl(...args: string[]): Promise<CurlAnswer> {
  return new Promise((resolve, reject) => {
    const dump = join(tmpdir(), `tg-curl-${randomUUID()}`);
    execFile(CURL().path!, ['-sS', '-D', dump, '-o', '-', '-w', '\n%{json}', ...args], { encoding: 'buffer', timeout: 60_000, maxBuffer: 64 << 20 }, (err, stdout, stderr) => {
      const heads = readDump(dump);
      const cut = stdout.lastIndexOf(0x0a);
      if (cut < 0) {
        reject(new Error(`curl ${args.join(' ')}: ${err?.message ?? 'no output'} ${stderr.toString()}`));
        return;
      }
      const w = JSON.parse(stdout.subarray(cut + 1).toString()) as Written;
      const head = heads.split('\r\n\r\n').filter((h) => h.startsWith('HTTP/')).at(-1) ?? '';
      const headers: Record<string, string> = {};
      for (const line of head.split('\r\n').slice(1)) {
        const name = line.slice(0, line.indexOf(':')).toLowerCase();
        const value = line.slice(line.indexOf(':') + 1).trim();
        headers[name] = name in headers ? `${headers[name]}, ${value}` : value;
      }
      resolve({
        exit: w.exitcode, status: w.http_code, version: w.http_version, type: w.content_type ?? '', head, headers,
        body: stdout.subarray(0, cut), stderr: stderr.toString(),
      });
    });
  });
}

/** What curl dumped (-D), the file removed; '' when it wrote none. */
function readDump(file: string): string {
  try {
    return readFileSync(file, 'latin1');
  } catch {
    return '';
  } finally {
    rmSync(file, { force: true });
  }
}
