// The clients we did not write, ready to run: the Go client of test/interop/goclient (built once per
// source hash into the cache directory) and the Python venv with httpx and h2 (test/triton/venv.sh,
// cached by the requirements' hash).
import { run } from './run';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import path from 'node:path';
import { GO } from './tools';

const INTEROP = path.join(__dirname, '..', 'interop');
const CACHE = process.env.TENSORGATE_CACHE_DIR ?? path.join(homedir(), '.cache', 'tensorgate');

/** The Go client's binary (`go build`, the Go module proxy for golang.org/x/net the first time). */
export async function goClient(): Promise<string> {
  const dir = path.join(INTEROP, 'goclient');
  const hash = createHash('sha256');
  for (const f of readdirSync(dir).sort()) hash.update(f).update(readFileSync(path.join(dir, f)));
  const bin = path.join(CACHE, `interop-goclient-${hash.digest('hex').slice(0, 12)}`);
  if (existsSync(bin)) return bin;
  mkdirSync(CACHE, { recursive: true });
  const go = GO().path;
  if (go === undefined) throw new Error(`go is not installed (${GO().install})`);
  const r = await run(go, ['build', '-o', bin, '.'], { cwd: dir, timeoutMs: 600_000 });
  if (r.code !== 0) throw new Error(`go build of test/interop/goclient failed: ${r.stderr}`);
  return bin;
}

/** The python of the venv with httpx and h2 (test/interop/requirements.txt). */
export async function interopPython(): Promise<string> {
  const r = await run('bash', [path.join(INTEROP, '..', 'triton', 'venv.sh'), path.join(INTEROP, 'requirements.txt')], { timeoutMs: 600_000 });
  if (r.code !== 0) throw new Error(`test/triton/venv.sh test/interop/requirements.txt failed: ${r.stderr}`);
  return path.join(r.stdout.trim(), 'bin', 'python');
}
