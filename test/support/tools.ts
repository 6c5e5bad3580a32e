// The programs tests run that are not npm packages (Debian's curl, nghttp2-client, prometheus,
// chromium, podman, redis-server, openssl, python3.11 for the venvs; kubectl or kustomize; Go), in one place:
// each looked up once per test file. Tests that need one go through `needs(…)`: where a program is
// missing they are skipped, with one loud line on stderr naming it and how to install it (.ci/run
// installs them all); under CI (CI=true) a missing program fails instead, as one failed test in
// their place, so that CI never passes by skipping.
import { accessSync, constants } from 'node:fs';
import { homedir } from 'node:os';
import path from 'node:path';

export interface Tool {
  /** What the tests call it. */
  readonly name: string;
  /** Where it is, or undefined when missing. */
  readonly path: string | undefined;
  /** How to install it. */
  readonly install: string;
}

const CI = process.env.CI === 'true' || process.env.CI === '1';
const CACHE = process.env.TENSORGATE_CACHE_DIR ?? path.join(homedir(), '.cache', 'tensorgate');

const executable = (file: string): boolean => {
  try {
    accessSync(file, constants.X_OK);
    return true;
  } catch {
    return false;
  }
};

/** `name` on PATH (or itself, a path), or the first of `places` that is executable. */
function find(name: string, places: readonly string[] = []): string | undefined {
  if (path.isAbsolute(name)) return [name, ...places].find(executable);
  const dirs = (process.env.PATH ?? '').split(path.delimiter).filter((d) => d !== '');
  return [...dirs.map((d) => path.join(d, name)), ...places].find(executable);
}

const found = new Map<string, Tool>();

/** A program, looked up once. */
export function tool(name: string, install: string, places?: readonly string[]): Tool {
  let t = found.get(name);
  if (t === undefined) {
    t = { name, path: find(name, places), install };
    found.set(name, t);
  }
  return t;
}

/** curl: the HTTP client most users try first. */
export const CURL = (): Tool => tool('curl', 'apt-get install curl');
/** nghttp and h2load (nghttp2's clients): HTTP/2 with its trailers and frames, and load. */
export const NGHTTP = (): Tool => tool('nghttp', 'apt-get install nghttp2-client');
export const H2LOAD = (): Tool => tool('h2load', 'apt-get install nghttp2-client');
export const PROMETHEUS = (): Tool => tool('prometheus', 'apt-get install prometheus');
export const PROMTOOL = (): Tool => tool('promtool', 'apt-get install prometheus');
export const CHROMIUM = (): Tool => tool('chromium', 'apt-get install chromium', ['/usr/bin/chromium-browser']);
export const PODMAN = (): Tool => tool('podman', 'apt-get install podman runc debootstrap');
export const OPENSSL = (): Tool => tool('openssl', 'apt-get install openssl');
/** redis-server: the store of shared limits (auth.limits.store), started by the tests on a free port. */
export const REDIS_SERVER = (): Tool => tool('redis-server', 'apt-get install redis-server');
/** Go's toolchain: the official tarball's place when not on PATH. */
export const GO = (): Tool => tool('go', 'install Go (https://go.dev/dl/)', ['/usr/local/go/bin/go']);
/** The interpreter test/triton/venv.sh builds every venv from (PyTriton's stub embeds libpython3.11). */
export const PYTHON = (): Tool => tool(process.env.TENSORGATE_PYTHON ?? '/usr/bin/python3.11', 'apt-get install python3.11 python3.11-venv');
export const KUBECTL = (): Tool => tool('kubectl', 'apt-get install kubectl');
/** `kubectl kustomize`, or kustomize's own CLI (.ci/run: go install …/kustomize/v5 into the cache). */
export const KUSTOMIZE = (): Tool => {
  const kubectl = KUBECTL();
  if (kubectl.path !== undefined) return kubectl;
  return tool('kustomize', 'apt-get install kubectl, or go install sigs.k8s.io/kustomize/kustomize/v5 (.ci/run does)', [path.join(CACHE, 'bin', 'kustomize')]);
};

/** h2spec, the HTTP/2 conformance suite (a Go module; .ci/run: go install …/h2spec into the cache). */
export const H2SPEC_MODULE = 'github.com/summerwind/h2spec/cmd/h2spec@v2.2.1+incompatible';
export const H2SPEC = (): Tool => tool('h2spec', `go install ${H2SPEC_MODULE} (.ci/run does, into ${path.join(CACHE, 'bin')})`, [path.join(CACHE, 'bin', 'h2spec')]);

const told = new Set<string>();

const why = (gone: readonly Tool[]): string => gone.map((t) => `${t.name} is not installed (${t.install})`).join('; ');

/** The missing ones among `tools`, said once per test file: one loud line on stderr. */
function missing(tools: readonly Tool[]): Tool[] {
  const gone = tools.filter((t) => t.path === undefined);
  const untold = gone.filter((t) => !told.has(t.name));
  if (untold.length > 0) {
    for (const t of untold) told.add(t.name);
    const file = path.relative(process.cwd(), expect.getState().testPath ?? '');
    process.stderr.write(`\n*** ${file}: tests ${CI ? 'FAILED (CI=true)' : 'SKIPPED'}: ${why(untold)}\n\n`);
  }
  return gone;
}

type Body = jest.ProvidesCallback;
/* eslint-disable-next-line @typescript-eslint/no-explicit-any -- as jest's own test.each */
type EachBody = (...args: any[]) => unknown;
type TestFn = ((title: string, fn: Body, timeout?: number) => void) & {
  /** A table of rows, each the test's arguments (an array) or its one argument, as jest's test.each. */
  each: <Row>(table: readonly Row[]) => (title: string, fn: (...row: Row extends readonly unknown[] ? [...Row] : [Row]) => unknown, timeout?: number) => void;
};

/**
 * jest's describe and test (with test.each) for tests that run `tools`: themselves when every
 * one is installed; otherwise skipped (locally), or one failing test in their place (CI=true).
 */
export function needs(...tools: Tool[]): { describe: (title: string, fn: () => void) => void; test: TestFn } {
  const gone = missing(tools);
  if (gone.length === 0) return { describe, test };
  const failing = (title: string): void => test(`${title}: ${why(gone)}`, () => {
    throw new Error(`${why(gone)}: CI=true must run every test`);
  });
  if (CI) {
    return { describe: (title) => describe(title, () => failing(title)), test: Object.assign(failing, { each: () => failing }) };
  }
  const skipped = (title: string): string => `${title} (${why(gone)})`;
  return {
    describe: (title, fn) => describe.skip(skipped(title), fn),
    test: Object.assign((title: string, fn: Body) => test.skip(skipped(title), fn), {
      each: (table: readonly unknown[]) => (title: string, fn: EachBody) => test.skip.each(table)(skipped(title), fn),
    }),
  };
}

/**
 * For a test file whose every test needs `tools` (real Triton: PYTHON()), called before its tests
 * are declared: when one is missing, the file's tests are skipped (CI=true: one failed test in
 * their place) and its hooks do not run. jest gives each test file globals of its own.
 */
export function needsFile(...tools: Tool[]): void {
  const gone = missing(tools);
  if (gone.length === 0) return;
  if (CI) {
    test(`every test of this file: ${why(gone)}`, () => {
      throw new Error(`${why(gone)}: CI=true must run every test`);
    });
  }
  const g = globalThis as Record<string, unknown>;
  const skipTest = Object.assign((title: string, fn: Body) => test.skip(title, fn), {
    each: (table: readonly unknown[]) => (title: string, fn: EachBody) => test.skip.each(table)(title, fn),
    skip: test.skip, only: test.skip,
  });
  g.test = skipTest;
  g.it = skipTest;
  g.describe = Object.assign((title: string, fn: () => void) => describe.skip(title, fn), {
    each: (table: readonly unknown[]) => (title: string, fn: EachBody) => describe.skip.each(table)(title, fn),
    skip: describe.skip, only: describe.skip,
  });
  for (const hook of ['beforeAll', 'afterAll', 'beforeEach', 'afterEach']) g[hook] = () => undefined;
}
