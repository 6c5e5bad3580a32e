// Loads the configuration once at start: defaults < YAML file < TENSORGATE_* variables < flags.
// Every problem is collected and reported together, by key; the result is deep-frozen and
// nothing reads process.env after this.
import { readFileSync } from 'node:fs';
import { parse as parseYaml } from 'yaml';
import { type Config, OPTIONS, type OptionSpec, coerce, envName, isListKind, type TlsConfig } from './schema';
import { readTlsMaterial, tlsConfigProblems } from './tls';

export class ConfigError extends Error {
  readonly code = 'GW_ERR_CONFIG_INVALID';
  constructor(readonly problems: readonly string[]) {
    super(`invalid configuration:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
    this.name = 'ConfigError';
  }
}

export type LoadResult = { help: true } | { help: false; config: Config };

export interface Sources {
  readonly argv: readonly string[];
  readonly env: Readonly<Record<string, string | undefined>>;
}

export function loadConfig({ argv, env }: Sources): LoadResult {
  const problems: string[] = [];
  const flags = parseFlags(argv, problems);
  if (flags.help) return { help: true };

  const configPath = flags.config ?? env.TENSORGATE_CONFIG;
  const fileValues = configPath === undefined ? new Map<string, unknown>() : readConfigFile(configPath, problems);

  const values = new Map<string, unknown>();
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
        // A structured value (routes) lists every problem, each with its own key.
        if (typeof r.problem === 'string') problems.push(`${where}: ${r.problem}`);
        else for (const p of r.problem) problems.push(`${p} (${where})`);
      } else value = r.value;
    }
    values.set(spec.key, value);
  }

  const backends = values.get('upstream.backends') as string[];
  if (values.get('demo') === true && backends.length > 0) {
    problems.push('upstream.backends: --demo starts its own backend; give either --demo or backends, not both');
  }
  if (values.get('demo') !== true && backends.length === 0) {
    problems.push('upstream.backends: at least one Triton gRPC address is required (--backend host:port), or --demo');
  }
  // upstream.tls: a client certificate or a server name without TLS would be silently unused.
  const upTls = (k: string): string => values.get(`upstream.tls.${k}`) as string;
  if ((upTls('cert') === '') !== (upTls('key') === '')) problems.push('upstream.tls.cert and upstream.tls.key: give both or neither');
  for (const k of ['cert', 'key', 'serverName']) {
    if (upTls(k) !== '' && upTls('ca') === '') problems.push(`upstream.tls.${k}: needs upstream.tls.ca (TLS to Triton is on when the CA is set)`);
  }
  if (values.get('demo') === true && upTls('ca') !== '') problems.push('upstream.tls.ca: --demo starts a plaintext reference backend; give either --demo or upstream.tls');
  problems.push(...sharedMemoryProblems(values, backends));
  // node:http refuses a headersTimeout above a non-zero requestTimeout.
  const headersTimeout = values.get('server.headersTimeoutMs') as number;
  const requestTimeout = values.get('server.requestTimeoutMs') as number;
  if (requestTimeout > 0 && headersTimeout > requestTimeout) {
    problems.push(`server.headersTimeoutMs: ${headersTimeout} must not exceed server.requestTimeoutMs (${requestTimeout})`);
  }
  problems.push(...authProblems(values));
  // The TLS files are read here too: a missing or mismatched one stops the start with its key
  // named, before a cluster forks workers that would each fail.
  const tls = Object.fromEntries(['cert', 'key', 'clientCa', 'minVersion', 'ciphers'].map((k) => [k, values.get(`server.tls.${k}`)])) as unknown as TlsConfig;
  const tlsProblems = tlsConfigProblems(tls);
  problems.push(...tlsProblems);
  if (tlsProblems.length === 0 && tls.cert !== '') {
    try {
      readTlsMaterial(tls);
    } catch (err) {
      problems.push((err as Error).message);
    }
  }
  if (problems.length > 0) throw new ConfigError(problems);
  return { help: false, config: deepFreeze(nest(values)) as unknown as Config };
}

/** The auth keys that only make sense together (docs/production.md "Authentication"). */
function authProblems(values: Map<string, unknown>): string[] {
  const enabled = values.get('auth.enabled') === true;
  const keysFile = values.get('auth.keysFile') as string;
  const jwksUrl = values.get('auth.jwt.jwksUrl') as string;
  const jwksFile = values.get('auth.jwt.jwksFile') as string;
  const problems: string[] = [];
  const given = [['auth.keysFile', keysFile], ['auth.jwt.jwksUrl', jwksUrl], ['auth.jwt.jwksFile', jwksFile]].filter(([, v]) => v !== '').map(([k]) => k);
  // Fail closed both ways: credentials configured but not required, or required but none can be valid.
  if (!enabled && given.length > 0) problems.push(`auth.enabled: ${given.join(' and ')} given but auth is off; set auth.enabled (--auth) or remove them`);
  if (enabled && keysFile === '' && jwksUrl === '' && jwksFile === '') problems.push('auth.enabled: needs auth.keysFile, auth.jwt.jwksUrl or auth.jwt.jwksFile');
  if (jwksUrl !== '' && jwksFile !== '') problems.push('auth.jwt.jwksUrl: give either auth.jwt.jwksUrl or auth.jwt.jwksFile, not both');
  if (jwksUrl !== '' && !/^https?:\/\/[^/]/.test(jwksUrl)) problems.push(`auth.jwt.jwksUrl: must be an http(s) URL, got ${JSON.stringify(jwksUrl)}`);
  else if (jwksUrl !== '' && !URL.canParse(jwksUrl)) problems.push(`auth.jwt.jwksUrl: not a URL: ${JSON.stringify(jwksUrl)}`);
  return problems;
}

interface Flags {
  help: boolean;
  config: string | undefined;
  values: Map<string, string[]>;
}

function parseFlags(argv: readonly string[], problems: string[]): Flags {
  const byFlag = new Map<string, OptionSpec>(OPTIONS.map((o) => [o.flag, o]));
  const out: Flags = { help: false, config: undefined, values: new Map() };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (arg === '--help' || arg === '-h') { out.help = true; continue; }
    const m = /^--([a-z][a-z0-9-]*)(?:=(.*))?$/.exec(arg);
    if (m === null) { problems.push(`unexpected argument ${JSON.stringify(arg)}`); continue; }
    const name = m[1]!;
    let value = m[2];
    const spec = byFlag.get(name);
    if (name !== 'config' && spec === undefined) { problems.push(`unknown flag --${name}`); continue; }
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
  return out;
}

function readConfigFile(path: string, problems: string[]): Map<string, unknown> {
  const out = new Map<string, unknown>();
  let doc: unknown;
  try {
    doc = parseYaml(readFileSync(path, 'utf8'));
  } catch (err) {
    problems.push(`config file ${path}: ${(err as Error).message}`);
    return out;
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
  lines.push('  -h, --help               this text');
  return lines.join('\n');
}

/** upstream.sharedMemory: regions are registered with one Triton, which must read the same /dev/shm. */
function sharedMemoryProblems(values: ReadonlyMap<string, unknown>, backends: readonly string[]): string[] {
  if (values.get('upstream.sharedMemory.enabled') !== true) return [];
  const problems: string[] = [];
  if (values.get('demo') === true) problems.push('upstream.sharedMemory.enabled: the --demo backend reads no shared memory');
  else if (backends.length !== 1 || backends[0]!.startsWith('dns:')) {
    problems.push(`upstream.sharedMemory.enabled: needs exactly one host:port backend (the Triton of the same pod), got ${JSON.stringify(backends)}`);
  }
  if (values.get('upstream.transport') !== 'h2') problems.push('upstream.sharedMemory.enabled: needs upstream.transport h2');
  if (values.get('upstream.cutThrough') !== true) problems.push('upstream.sharedMemory.enabled: needs upstream.cutThrough');
  if (!/^[A-Za-z0-9_.]+$/.test(values.get('upstream.sharedMemory.prefix') as string)) {
    problems.push('upstream.sharedMemory.prefix: letters, digits, `_` and `.` only (it names files under /dev/shm)');
  }
  return problems;
}
