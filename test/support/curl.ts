// curl, the HTTP client most users try first, as the tests run it: the program tools.ts finds
// (wrap the test in needs(CURL())), one run giving curl's exit code, the answer's status, head and
// body apart (the body on stdout, then curl's own account of the transfer, -w '%{json}'; the heads
// and an HTTP/1.1 trailer dumped into a file of their own). Bounded: 60 s (give --max-time for less), 64 MiB.
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
  /** The trailer's fields, as `headers` (HTTP/1.1 chunked answers; curl does not dump HTTP/2 trailers). */
  readonly trailers: Readonly<Record<string, string>>;
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
      // Each head ends in an empty line; the trailer's lines follow the last one.
      const blocks = heads.split('\r\n\r\n');
      const last = blocks.findLastIndex((h) => h.startsWith('HTTP/'));
      const head = blocks[last] ?? '';
      resolve({
        exit: w.exitcode, status: w.http_code, version: w.http_version, type: w.content_type ?? '', head,
        headers: fieldsOf(head.split('\r\n').slice(1)), trailers: fieldsOf(blocks.slice(last + 1).join('\r\n').split('\r\n')),
        body: stdout.subarray(0, cut), stderr: stderr.toString(),
      });
    });
  });
}

/** Header lines as fields by lower-case name, a repeated one joined with ', '. */
function fieldsOf(lines: readonly string[]): Record<string, string> {
  const fields: Record<string, string> = {};
  for (const line of lines) {
    if (line === '') continue;
    const name = line.slice(0, line.indexOf(':')).toLowerCase();
    const value = line.slice(line.indexOf(':') + 1).trim();
    fields[name] = name in fields ? `${fields[name]}, ${value}` : value;
  }
  return fields;
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
