// Loads the configuration once at start: defaults < YAML file < TENSORGATE_* variables < flags.
// Every problem is collected and reported together, by key; the result is deep-frozen and
// nothing reads process.env after this.
import { closeSync, fstatSync, openSync, readFileSync } from 'node:fs';
import { parse as parseYaml } from 'yaml';
import { type Config, OPTIONS, type OptionSpec, coerce, envName, isListKind, type TlsConfig } from './schema';
import { readTlsMaterial, tlsConfigProblems } from './tls';
import { socketPath } from './address';
import { type ModelRoute, modelRouteProblems, type PoolSpec } from './pools';
import { type LimitsConfig, NO_LIMITS } from '../auth/limits';
import { cloudDialectProblems } from './cloud-dialects';
import { demoOpenAiModels, openAiPrefixProblems } from './openai';
import { isObject } from './problems';

/**
 * What stops the start: each problem one line that names the key (or flag) and says what to do.
 * main.ts prints them one per line and exits 2, without a stack.
 */
export class ConfigError extends Error {
  readonly code = 'GW_ERR_CONFIG_INVALID';
  constructor(readonly problems: readonly string[]) {
    super(problems.join('; '));
    this.name = 'ConfigError';
  }
}

export type LoadResult = { help: true } | { help: false; config: Config };

/**
 * What the command line asks for: `help` and `version` print and exit; `demo-backend` runs the
 * reference backend alone on host:port (`tensorgate --demo-backend [--host H] [--port P]`).
 */
export type Command =
  | { run: 'help' } | { run: 'version' }
  | { run: 'demo-backend'; host: string; port: number }
  | { run: 'gateway'; config: Config };

/** The demo backend's default address: Triton's own gRPC port, on loopback. */
const DEMO_BACKEND_DEFAULTS = { host: '127.0.0.1', port: 8001 };

export interface Sources {
  readonly argv: readonly string[];
  readonly env: Readonly<Record<string, string | undefined>>;
}

/** The gateway's configuration (for `--help`, `{ help: true }`). */
export function loadConfig(sources: Sources): LoadResult {
  const c = loadCommand(sources);
  if (c.run === 'gateway') return { help: false, config: c.config };
  if (c.run === 'help') return { help: true };
  throw new ConfigError([`--${c.run}: not a configuration`]);
}

export function loadCommand({ argv, env }: Sources): Command {
  const problems: string[] = [];
  const flags = parseFlags(argv, problems);
  if (flags.help) return { run: 'help' };
  if (flags.version) return { run: 'version' };
  if (flags.demoBackend) {
    if (problems.length > 0) throw new ConfigError(problems);
    return demoBackendMode(flags);
  }

  const configPath = flags.config ?? env.TENSORGATE_CONFIG;
  const fileValues = configPath === undefined ? new Map<string, unknown>() : readConfigFile(configPath, problems);
  // A file that cannot be read or parsed: what the rest would say (no backend…) may be in it.
  if (fileValues === undefined) throw new ConfigError(problems);

  const { values, refused } = optionValues(fileValues, configPath, env, flags, problems);
  // After a mistyped flag only the values' own problems are listed: what the checks across keys
  // would add may follow from the typo (a backend "missing" because its flag was misspelt).
  if (flags.problems > 0) throw new ConfigError(problems);

  problems.push(...upstreamProblems(values, refused));
  // Each worker binds the gRPC port itself: port 0 would give each a free port of its own.
  const workers = values.get('workers') as number;
  if (values.get('server.grpc.enabled') === true && values.get('server.grpc.port') === 0 && workers > 1) {
    problems.push(`server.grpc.port: 0 (a free port) with ${workers} workers would give each worker a port of its own; choose a port (--grpc-port)`);
  }
  const port = values.get('server.port') as number;
  if (values.get('server.grpc.enabled') === true && port !== 0 && values.get('server.grpc.port') === port) {
    problems.push(`server.grpc.port: ${port} is server.port too; the gRPC port needs a port of its own (--grpc-port), or leave it off and call gRPC on server.port`);
  }
  // node:http refuses a headersTimeout above a non-zero requestTimeout.
  const headersTimeout = values.get('server.headersTimeoutMs') as number;
  const requestTimeout = values.get('server.requestTimeoutMs') as number;
  if (requestTimeout > 0 && headersTimeout > requestTimeout) {
    problems.push(`server.headersTimeoutMs: ${headersTimeout} must not exceed server.requestTimeoutMs (${requestTimeout})`);
  }
  problems.push(...authProblems(values));
  problems.push(...cloudDialectProblems(values, env));
  problems.push(...openAiPrefixProblems(values.get('openai.prefix') as string));
  if (values.get('demo') === true && (values.get('openai.models') as unknown[]).length === 0) values.set('openai.models', demoOpenAiModels());
  // The TLS files are read here too: a missing or mismatched one stops the start with its key
  // named, before a cluster forks workers that would each fail.
  const tls = Object.fromEntries(['cert', 'key', 'clientCa', 'minVersion', 'ciphers'].map((k) => [k, values.get(`server.tls.${k}`)])) as unknown as TlsConfig;
  const tlsProblems = [...tlsConfigProblems(tls), ...unreadableFiles(values, SERVER_TLS_FILE_KEYS)];
  problems.push(...tlsProblems);
  if (tlsProblems.length === 0 && tls.cert !== '' && problems.length === 0) {
    try {
      readTlsMaterial(tls);
    } catch (err) {
      problems.push((err as Error).message);
    }
  }
  if (problems.length > 0) throw new ConfigError(problems);
  return { run: 'gateway', config: deepFreeze(nest(values)) as unknown as Config };
}

/**
 * Each option's value: its default, replaced by each source that gives one, in order — the file,
 * the environment, the flag. A value refused is a problem, and its key is in `refused`: the checks
 * across keys say nothing more of it.
 */
function optionValues(fileValues: ReadonlyMap<string, unknown>, configPath: string | undefined, env: Sources['env'], flags: Flags,
  problems: string[]): { values: Map<string, unknown>; refused: Set<string> } {
  const values = new Map<string, unknown>();
  const refused = new Set<string>();
  for (const spec of OPTIONS) {
    const sources: [string, unknown][] = [];
    if (fileValues.has(spec.key)) sources.push([`${spec.key} (in ${configPath})`, fileValues.get(spec.key)]);
    const e = env[envName(spec.key)];
    if (e !== undefined) sources.push([envName(spec.key), e]);
    const f = flags.values.get(spec.flag);
    if (f !== undefined) sources.push([`--${spec.flag}`, isListKind(spec.kind) ? f : f[f.length - 1]]);
    let value = spec.default;
    for (const [where, raw] of sources) {
      const r = coerce(spec, raw);
      if ('problem' in r) {
        refused.add(spec.key);
        // A structured value (routes) lists every problem, each with its own key.
        if (typeof r.problem === 'string') problems.push(`${where}: ${r.problem}`);
        else for (const p of r.problem) problems.push(`${p} (${where})`);
      } else value = r.value;
    }
    values.set(spec.key, value);
  }
  return { values, refused };
}

/** The upstream keys' checks across keys: backends (or pools), TLS to Triton, shared memory, model routes. */
function upstreamProblems(values: ReadonlyMap<string, unknown>, refused: ReadonlySet<string>): string[] {
  const problems: string[] = [];
  const backends = values.get('upstream.backends') as string[];
  // --demo with backends: the demo backend takes their place (gateway.ts says so in the log), so
  // any role's configuration can be tried without a Triton. A backend that was refused is missing
  // because of its own problem, already listed.
  if (values.get('demo') !== true && backends.length === 0 && !refused.has('upstream.backends') && (values.get('upstream.pools') as PoolSpec[]).length === 0) {
    problems.push('upstream.backends: at least one Triton gRPC address is required; give --backend host:port (Triton\'s gRPC port, 8001 by default), or --demo');
  }
  // upstream.tls: a client certificate or a server name without TLS would be silently unused.
  const upTls = (k: string): string => values.get(`upstream.tls.${k}`) as string;
  if ((upTls('cert') === '') !== (upTls('key') === '')) problems.push('upstream.tls.cert and upstream.tls.key: give both or neither');
  for (const k of ['cert', 'key', 'serverName']) {
    if (upTls(k) !== '' && upTls('ca') === '') problems.push(`upstream.tls.${k}: needs upstream.tls.ca (TLS to Triton is on when the CA is set)`);
  }
  if (values.get('demo') === true && upTls('ca') !== '') problems.push('upstream.tls.ca: --demo starts a plaintext reference backend; remove upstream.tls (--upstream-tls-ca) to try this configuration on the demo');
  problems.push(...sharedMemoryProblems(values, backends));
  const pools = values.get('upstream.pools') as PoolSpec[];
  // A socket of this host is the sidecar's own Triton: nothing on the way for TLS to keep out.
  const socket = [...backends, ...pools.flatMap((p) => p.targets)].find((a) => socketPath(a) !== undefined);
  if (socket !== undefined && upTls('ca') !== '') problems.push(`upstream.tls.ca: TLS to Triton is not spoken over a Unix socket (${socket}); remove upstream.tls or give Triton's host:port`);
  problems.push(...modelRouteProblems(pools, values.get('upstream.models') as ModelRoute[]));
  if (pools.length > 0 && values.get('upstream.sharedMemory.enabled') === true) problems.push('upstream.pools: shared-memory mode serves one Triton of the same pod; remove upstream.pools or upstream.sharedMemory.enabled');
  return problems;
}

/**
 * The files the configuration names that cannot be read, one problem each naming its key. Not
 * part of loadConfig (which checks a configuration, wherever it will run): main.ts asks before
 * anything starts, so a cluster's primary reports a missing file once instead of each worker.
 * The server.tls files are read by loadConfig already (their content is checked too).
 */
export function unreadableFileProblems(config: Config): string[] {
  const values = new Map<string, unknown>();
  const walk = (node: object, prefix: string): void => {
    for (const [k, v] of Object.entries(node)) {
      if (isObject(v)) walk(v, `${prefix}${k}.`);
      else values.set(`${prefix}${k}`, v);
    }
  };
  walk(config, '');
  return unreadableFiles(values);
}

const SERVER_TLS_FILE_KEYS = ['server.tls.cert', 'server.tls.key', 'server.tls.clientCa'];
/** The other keys that name a file the gateway reads at start (and again on a change). */
const FILE_KEYS = ['upstream.tls.ca', 'upstream.tls.cert', 'upstream.tls.key',
  'auth.keysFile', 'auth.jwt.jwksFile'] as const;

/** Each file key whose file cannot be opened for reading: one problem naming the key, the cause and the flag. */
function unreadableFiles(values: ReadonlyMap<string, unknown>, keys: readonly string[] = FILE_KEYS): string[] {
  const problems: string[] = [];
  for (const key of keys) {
    const path = values.get(key) as string;
    if (path === '') continue;
    const problem = unreadable(path);
    if (problem !== undefined) problems.push(`${key}: cannot read ${path} (${problem}); give a readable file (--${flagOf(key)})`);
  }
  return problems;
}

/** Why `path` cannot be read as a file, in a few words; undefined when it can. */
export function unreadable(path: string): string | undefined {
  let fd: number | undefined;
  try {
    fd = openSync(path, 'r');
    return fstatSync(fd).isDirectory() ? 'a directory, not a file' : undefined;
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') return 'ENOENT: no such file';
    if (code === 'EACCES') return `EACCES: permission denied to uid ${process.getuid?.() ?? '?'}`;
    if (code === 'EISDIR') return 'a directory, not a file';
    return (err as Error).message;
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}

const flagOf = (key: string): string => OPTIONS.find((o) => o.key === key)!.flag;

/** `--demo-backend [--host H] [--port P]`: no other flag means anything to the reference backend alone. */
function demoBackendMode(flags: Flags): Command {
  const problems: string[] = [];
  const others = [...flags.values.keys()].filter((f) => f !== 'host' && f !== 'port' && f !== 'demo-backend');
  if (others.length > 0 || flags.config !== undefined) {
    problems.push(`--demo-backend: takes only --host and --port, got ${[...others, ...(flags.config === undefined ? [] : ['config'])].map((f) => `--${f}`).join(', ')}; start the gateway separately (tensorgate --backend HOST:PORT)`);
  }
  const host = flags.values.get('host')?.at(-1) ?? DEMO_BACKEND_DEFAULTS.host;
  const portText = flags.values.get('port')?.at(-1);
  const port = portText === undefined ? DEMO_BACKEND_DEFAULTS.port : Number(portText);
  if (!/^\d+$/.test(portText ?? '0') || port > 65535) problems.push(`--port: must be an integer in [0, 65535], got ${JSON.stringify(portText)}`);
  if (problems.length > 0) throw new ConfigError(problems);
  return { run: 'demo-backend', host, port };
}

/** The auth keys that only make sense together (docs/production.md "Authentication"). */
function authProblems(values: Map<string, unknown>): string[] {
  const enabled = values.get('auth.enabled') === true;
  const keysFile = values.get('auth.keysFile') as string;
  const jwksUrl = values.get('auth.jwt.jwksUrl') as string;
  const jwksFile = values.get('auth.jwt.jwksFile') as string;
  const problems: string[] = [];
  const limits = values.get('auth.limits') as LimitsConfig;
  const given = [['auth.keysFile', keysFile], ['auth.jwt.jwksUrl', jwksUrl], ['auth.jwt.jwksFile', jwksFile]].filter(([, v]) => v !== '').map(([k]) => k);
  if (limits !== NO_LIMITS) given.push('auth.limits');
  // Fail closed both ways: credentials configured but not required, or required but none can be valid.
  if (!enabled && given.length > 0) problems.push(`auth.enabled: ${given.join(' and ')} given but auth is off; set auth.enabled (--auth) or remove them`);
  if (enabled && keysFile === '' && jwksUrl === '' && jwksFile === '') problems.push('auth.enabled: needs auth.keysFile, auth.jwt.jwksUrl or auth.jwt.jwksFile');
  if ((limits.subjects.size > 0 || limits.groups.size > 0) && jwksUrl === '' && jwksFile === '') {
    problems.push(`auth.limits.${limits.subjects.size > 0 ? 'subjects' : 'groups'}: limits JWTs, but none can be valid without auth.jwt.jwksUrl or auth.jwt.jwksFile; give a JWKS, or put an API key's limits next to it in auth.keysFile`);
  }
  if (jwksUrl !== '' && jwksFile !== '') problems.push('auth.jwt.jwksUrl: give either auth.jwt.jwksUrl or auth.jwt.jwksFile, not both');
  if (jwksUrl !== '' && !/^https?:\/\/[^/]/.test(jwksUrl)) problems.push(`auth.jwt.jwksUrl: must be an http(s) URL, got ${JSON.stringify(jwksUrl)}`);
  else if (jwksUrl !== '' && !URL.canParse(jwksUrl)) problems.push(`auth.jwt.jwksUrl: not a URL: ${JSON.stringify(jwksUrl)}`);
  return problems;
}

interface Flags {
  /** How many problems the flags themselves had (unknown, without a value). */
  problems: number;
  help: boolean;
  version: boolean;
  demoBackend: boolean;
  config: string | undefined;
  values: Map<string, string[]>;
}

function parseFlags(argv: readonly string[], problems: string[]): Flags {
  const byFlag = new Map<string, OptionSpec>(OPTIONS.map((o) => [o.flag, o]));
  const out: Flags = { problems: 0, help: false, version: false, demoBackend: false, config: undefined, values: new Map() };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (arg === '--help' || arg === '-h') { out.help = true; continue; }
    if (arg === '--version') { out.version = true; continue; }
    if (arg === '--demo-backend') { out.demoBackend = true; continue; }
    const m = /^--([a-z][a-z0-9-]*)(?:=(.*))?$/.exec(arg);
    if (m === null) { problems.push(`unexpected argument ${JSON.stringify(arg)}`); continue; }
    const name = m[1]!;
    let value = m[2];
    const spec = byFlag.get(name);
    if (name !== 'config' && spec === undefined) {
      problems.push(unknownFlag(name, [...byFlag.keys()]));
      // Its value, if it took one, is no second problem.
      if (m[2] === undefined && argv[i + 1] !== undefined && !argv[i + 1]!.startsWith('--')) i++;
      continue;
    }
    if (value === undefined && spec?.kind.type !== 'bool') {
      const next = argv[i + 1];
      if (next === undefined || next.startsWith('--')) { problems.push(`--${name} needs a value`); continue; }
      value = next;
      i++;
    }
    if (name === 'config') { out.config = value; continue; }
    const list = out.values.get(name) ?? [];
    list.push(value ?? 'true');
    out.values.set(name, list);
  }
  out.problems = problems.length;
  return out;
}

/** The flags parseFlags takes besides the options'. */
const OWN_FLAGS = ['config', 'help', 'version', 'demo-backend'];

/** `unknown flag --prot; did you mean --port?`: the nearest flag within two edits, if any. */
function unknownFlag(name: string, flags: readonly string[]): string {
  let best: string | undefined;
  let bestDistance = 3;
  for (const f of [...flags, ...OWN_FLAGS]) {
    const d = editDistance(name, f);
    if (d < bestDistance && d < f.length / 2) [best, bestDistance] = [f, d];
  }
  return `unknown flag --${name}; ${best === undefined ? '' : `did you mean --${best}? `}tensorgate --help lists the flags`;
}

/** Edits (insert, delete, replace, swap two neighbours) from a to b: optimal string alignment. */
function editDistance(a: string, b: string): number {
  const d: number[][] = Array.from({ length: a.length + 1 }, (_, i) => [i, ...Array<number>(b.length).fill(0)]);
  for (let j = 1; j <= b.length; j++) d[0]![j] = j;
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let v = Math.min(d[i - 1]![j]! + 1, d[i]![j - 1]! + 1, d[i - 1]![j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) v = Math.min(v, d[i - 2]![j - 2]! + 1);
      d[i]![j] = v;
    }
  }
  return d[a.length]![b.length]!;
}

/** The file's values by key (its problems added to `problems`); undefined when it cannot be read or parsed. */
function readConfigFile(path: string, problems: string[]): Map<string, unknown> | undefined {
  const out = new Map<string, unknown>();
  let doc: unknown;
  const cannot = unreadable(path);
  if (cannot !== undefined) {
    problems.push(`--config: cannot read ${path} (${cannot}); give the path of a readable YAML file (or TENSORGATE_CONFIG)`);
    return undefined;
  }
  try {
    doc = parseYaml(readFileSync(path, 'utf8'));
  } catch (err) {
    // The yaml package's message ends with a drawing of the line; its first line says where, and
    // ends with the colon that introduced the drawing.
    const where = (err as Error).message.split('\n')[0]!.replace(/:$/, '');
    problems.push(`--config: ${path} is not valid YAML: ${where}; fix the file there`);
    return undefined;
  }
  if (doc === null || doc === undefined) return out;
  const known = new Set(OPTIONS.map((o) => o.key));
  const walk = (node: unknown, prefix: string): void => {
    if (typeof node !== 'object' || node === null || Array.isArray(node)) {
      problems.push(`${prefix || '(top level)'} (in ${path}): must be a mapping`);
      return;
    }
    for (const [k, v] of Object.entries(node)) {
      const key = prefix ? `${prefix}.${k}` : k;
      if (known.has(key)) out.set(key, v);
      else if ([...known].some((o) => o.startsWith(key + '.'))) walk(v, key);
      else problems.push(`${key} (in ${path}): unknown key`);
    }
  };
  walk(doc, '');
  return out;
}

function nest(values: Map<string, unknown>): Record<string, unknown> {
  const root: Record<string, unknown> = {};
  for (const [key, value] of values) {
    const parts = key.split('.');
    let node = root;
    for (const p of parts.slice(0, -1)) node = (node[p] ??= {}) as Record<string, unknown>;
    node[parts[parts.length - 1]!] = value;
  }
  return root;
}

function deepFreeze<T>(o: T): T {
  if (typeof o === 'object' && o !== null) {
    for (const v of Object.values(o)) deepFreeze(v);
    Object.freeze(o);
  }
  return o;
}

/** The --help text, from the option table. */
export function helpText(): string {
  const lines = [
    'Usage: tensorgate [--config FILE] [--backend HOST:PORT ...] [options]',
    '',
    'REST inference gateway in front of NVIDIA Triton (gRPC upstream).',
    '',
    'Options (flag / environment variable / config key):',
    '  --config FILE            TENSORGATE_CONFIG; YAML file with the keys below',
  ];
  for (const o of OPTIONS) {
    const metavar = o.kind.type === 'addresses' ? 'HOST:PORT' : o.kind.type === 'restrictions' ? 'CATS:KEY=VALUE' : o.kind.type === 'categories' ? 'CATS' : o.kind.type === 'names' ? 'NAMES' : o.kind.type === 'workers' ? 'auto|N' : 'VALUE';
    const flag = o.kind.type === 'bool' ? `--${o.flag}` : `--${o.flag} ${metavar}`;
    lines.push(`  ${flag.padEnd(24)} ${envName(o.key)}; ${o.key}`);
    lines.push(`  ${''.padEnd(24)} ${o.doc} Default: ${JSON.stringify(o.default)}.`);
  }
  lines.push('  --demo-backend [--host H] [--port P]');
  lines.push(`  ${''.padEnd(24)} Run only the demo reference backend (a Triton-protocol gRPC server) on H:P (default ${DEMO_BACKEND_DEFAULTS.host}:${DEMO_BACKEND_DEFAULTS.port}).`);
  lines.push('  --version                the version, then exit');
  lines.push('  -h, --help               this text');
  return lines.join('\n');
}

/** upstream.sharedMemory: regions are registered with one Triton, which must read the same /dev/shm. */
function sharedMemoryProblems(values: ReadonlyMap<string, unknown>, backends: readonly string[]): string[] {
  if (values.get('upstream.sharedMemory.enabled') !== true) return [];
  const problems: string[] = [];
  // --demo: the demo backend, in this process, takes the backends' place and maps the same /dev/shm.
  if (values.get('demo') !== true && (backends.length !== 1 || backends[0]!.startsWith('dns:'))) {
    problems.push(`upstream.sharedMemory.enabled: needs exactly one host:port or unix:/path backend (the Triton of the same pod), got ${JSON.stringify(backends)}`);
  }
  if (values.get('upstream.transport') !== 'h2') problems.push('upstream.sharedMemory.enabled: needs upstream.transport h2');
  if (values.get('upstream.cutThrough') !== true) problems.push('upstream.sharedMemory.enabled: needs upstream.cutThrough');
  if (!/^[A-Za-z0-9_.]+$/.test(values.get('upstream.sharedMemory.prefix') as string)) {
    problems.push('upstream.sharedMemory.prefix: letters, digits, `_` and `.` only (it names files under /dev/shm)');
  }
  return problems;
}
