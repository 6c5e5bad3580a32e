// Static API keys (auth.keysFile): the file's format, and the set of keys held in memory as
// SHA-256 digests only. A presented token is hashed and compared with every digest in constant
// time (node:crypto timingSafeEqual, no early exit), so neither the tokens nor their position in
// the file can be learnt from timing. Problems never quote a token, only where it is.
import { createHash, timingSafeEqual } from 'node:crypto';
import { parse as parseYaml, YAMLError } from 'yaml';
import { API_CATEGORIES, type ApiCategory, isApiCategory } from '../api-access';
import { isObject, problemsAt } from '../config/problems';
import { type Limit, parseLimit } from './limits';

/** What a credential may use: API groups, and optionally only some models. */
export interface Grant {
  /** For logs and metrics: a key's `id`, a JWT's `sub`. Never the credential. */
  readonly subject: string;
  readonly groups: ReadonlySet<ApiCategory>;
  /** undefined: every model. */
  readonly models: ReadonlySet<string> | undefined;
  /** A key's own rate and concurrency (its `limits` in the key file); undefined: auth.limits.default. */
  readonly limits?: Limit;
  /** A JWT's groups for auth.limits.groups (the values of auth.limits.groupsClaim). */
  readonly limitGroups?: readonly string[];
}

export interface ApiKey extends Grant {
  /** SHA-256 of the token. */
  readonly digest: Buffer;
}

/** A plain token shorter than this is refused: a key must not be guessable. */
export const MIN_TOKEN_CHARS = 16;

export const sha256 = (token: string): Buffer => createHash('sha256').update(token, 'utf8').digest();

/**
 * Reads a key file:
 *
 *     keys:
 *       - id: ci-bot                 # names the key in logs and metrics
 *         token: sha256:<64 hex>     # or the token itself (then hashed at once)
 *         groups: [inference, metadata]   # or "*": every API group
 *         models: [simple]           # optional: only these models
 *         limits: {rate: 20, burst: 40, concurrency: 4}   # optional (auth/limits.ts)
 *
 * Returns the keys, or every problem found (naming `keys[i].<field>`, never a token's value).
 * `plain`: ids of keys whose token the file holds in plain text (the gateway warns about them).
 */
export function parseKeyFile(text: string): { keys: ApiKey[]; plain: string[] } | { problems: string[] } {
  let doc: unknown;
  try {
    doc = parseYaml(text);
  } catch (err) {
    // yaml's message quotes the offending line, which may hold a token: only its position is kept.
    const at = err instanceof YAMLError && err.linePos !== undefined ? ` at line ${err.linePos[0].line}, column ${err.linePos[0].col}` : '';
    return { problems: [`not YAML (${err instanceof YAMLError ? err.code : 'unreadable'}${at})`] };
  }
  if (!isObject(doc) || !Array.isArray(doc.keys)) return { problems: ['must be a mapping with a list `keys`'] };
  for (const k of Object.keys(doc)) if (k !== 'keys') return { problems: [`${k}: unknown key`] };
  const problems: string[] = [];
  const keys: ApiKey[] = [];
  const plain: string[] = [];
  const ids = new Set<string>();
  doc.keys.forEach((entry: unknown, i) => {
    const bad = problemsAt(problems, `keys[${i}]`);
    if (!isObject(entry)) { bad('', 'must be a mapping with id, token and groups'); return; }
    for (const k of Object.keys(entry)) if (!['id', 'token', 'groups', 'models', 'limits'].includes(k)) bad(k, 'unknown key');
    const id = entry.id;
    if (typeof id !== 'string' || !/^[\w.@:-]{1,64}$/.test(id)) bad('id', 'must be 1 to 64 letters, digits or _ . @ : -');
    else if (ids.has(id)) bad('id', `${id} is given twice`);
    else ids.add(id);
    const digest = tokenDigest(entry.token);
    if (typeof digest === 'string') bad('token', digest);
    else if (keys.some((k) => timingSafeEqual(k.digest, digest.digest))) bad('token', 'the same token as an earlier key');
    else if (digest.plain && typeof id === 'string') plain.push(id);
    const groups = groupList(entry.groups);
    if (typeof groups === 'string') bad('groups', groups);
    const models = entry.models === undefined ? undefined : modelList(entry.models);
    if (typeof models === 'string') bad('models', models);
    const limits = entry.limits === undefined ? undefined : parseLimit(entry.limits, `keys[${i}].limits`);
    if (Array.isArray(limits)) problems.push(...limits);
    if (typeof id === 'string' && typeof digest !== 'string' && typeof groups !== 'string' && typeof models !== 'string' && !Array.isArray(limits)) {
      keys.push({ subject: id, digest: digest.digest, groups, models, ...(limits === undefined ? {} : { limits }) });
    }
  });
  return problems.length > 0 ? { problems } : { keys, plain };
}

function tokenDigest(token: unknown): { digest: Buffer; plain: boolean } | string {
  if (typeof token !== 'string') return 'must be a string: the token, or sha256:<64 hex digits> of it';
  const m = /^sha256:(.*)$/i.exec(token);
  if (m !== null) {
    if (!/^[0-9a-fA-F]{64}$/.test(m[1]!)) return 'sha256: must be followed by 64 hex digits';
    return { digest: Buffer.from(m[1]!, 'hex'), plain: false };
  }
  if (token.length < MIN_TOKEN_CHARS) return `a plain token must have at least ${MIN_TOKEN_CHARS} characters`;
  // RFC 6750 §2.1 b64token: what a client can send after "Bearer ".
  if (!/^[A-Za-z0-9\-._~+/]+=*$/.test(token)) return 'a plain token may hold letters, digits and - . _ ~ + / (then = padding) only';
  return { digest: sha256(token), plain: true };
}

/** A list of API groups, or "*" for all of them. */
export function groupList(v: unknown): ReadonlySet<ApiCategory> | string {
  if (v === '*' || (Array.isArray(v) && v.length === 1 && v[0] === '*')) return new Set(API_CATEGORIES);
  if (!Array.isArray(v)) return `must be a list of API groups (${API_CATEGORIES.join(', ')}) or "*"`;
  const out = new Set<ApiCategory>();
  for (const g of v) {
    if (typeof g !== 'string' || !isApiCategory(g)) return `unknown API group ${JSON.stringify(g)} (known: ${API_CATEGORIES.join(', ')})`;
    out.add(g);
  }
  return out;
}

function modelList(v: unknown): ReadonlySet<string> | string {
  if (!Array.isArray(v) || v.length === 0 || !v.every((m) => typeof m === 'string' && m !== '')) return 'must be a non-empty list of model names';
  return new Set(v as string[]);
}

/** The keys in memory: digests only. */
export class KeyStore {
  constructor(readonly keys: readonly ApiKey[]) {}

  /** The key whose token this is: every digest is compared, in constant time each. */
  match(token: string): ApiKey | undefined {
    const digest = sha256(token);
    let found: ApiKey | undefined;
    for (const k of this.keys) if (timingSafeEqual(k.digest, digest) && found === undefined) found = k;
    return found;
  }
}
