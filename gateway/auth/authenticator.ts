// Who is calling (the auth section of the config): a bearer token or API key from the request's
// headers, matched against the static keys (auth.keysFile) or verified as a JWT (auth.jwt.*). The
// key file and a JWKS file are reloaded when they change; a reload that fails keeps what was
// loaded before and says so in a 'reload' event (gateway.ts logs and counts it). Nothing here
// keeps or reports a credential: only digests, and the key's id or the token's `sub`.
import { EventEmitter } from 'node:events';
import type { IncomingHttpHeaders } from 'node:http';
import { readFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import type { ApiCategory } from '../api-access';
import { type Grant, KeyStore, parseKeyFile, sha256 } from './key-file';
import { type JwtOptions, JwtVerifier, looksLikeJwt } from './jwt';
import { WorkerStore } from './cluster-store';
import { type Applied, appliedLimits, Limiter, type LimitsConfig, NO_LIMITS, STORE_TIMEOUT_DEFAULT_MS } from './limits';
import { LimitsStore } from './limits-store';
import { SharedLimiter } from './shared-limiter';
import { type LimitsWithQuotas, Quotas } from './usage';
import { type FileWatch, watchFiles } from '../file-watch';

export interface AuthOptions {
  readonly enabled: boolean;
  readonly keysFile: string;
  /** A header that may carry the key instead of `Authorization: Bearer` (e.g. X-API-Key); '' = none. */
  readonly keyHeader: string;
  /** API groups served without credentials. */
  readonly open: readonly ApiCategory[];
  readonly jwt: JwtOptions;
  /** auth.limits: per-subject, per-group and default limits (auth/limits.ts); none when absent. */
  readonly limits?: LimitsConfig;
}

export type AuthMethod = 'key' | 'jwt' | 'none';

/** What the headers prove. `header`: the (lower-case) header the credential came in. */
export type Authentication =
  | { readonly kind: 'missing' }
  | { readonly kind: 'invalid'; readonly method: AuthMethod; readonly header: string; readonly reason: string }
  | { readonly kind: 'unavailable'; readonly method: AuthMethod; readonly header: string; readonly reason: string }
  | { readonly kind: 'granted'; readonly method: AuthMethod; readonly header: string; readonly grant: Grant };

/** A reload of the key file or the JWKS file: applied, or failed and the previous content kept. */
export interface ReloadEvent {
  readonly file: 'keys' | 'jwks';
  readonly path: string;
  readonly ok: boolean;
  /** The keys loaded (ok). */
  readonly keys?: number;
  /** Ids of keys whose token the file holds in plain text (ok). */
  readonly plain?: readonly string[];
  /** Why it failed (never quotes the file's content). */
  readonly problem?: string;
}

/** Quiet time after the last change in the directory before the file is read again. */
export const RELOAD_DEBOUNCE_MS = 100;

export class Authenticator extends EventEmitter<{ reload: [ReloadEvent] }> {
  readonly open: ReadonlySet<ApiCategory>;
  /** Ids of keys stored in plain text in the key file as first loaded. */
  readonly plainKeys: readonly string[];
  /**
   * The per-identity limits (auth.limits, and each key's own from the key file as it is now):
   * judged by auth/guard.ts and the gRPC pass-through once a request is let in.
   */
  readonly limiter: LimitsWithQuotas;
  private keys: KeyStore = new KeyStore([]);
  private readonly jwt: JwtVerifier | undefined;
  private readonly keyHeader: string;
  private readonly watches: FileWatch[] = [];
  /** Digest of each watched file's last content: a change elsewhere in its directory is no reload. */
  private readonly seen = new Map<string, string>();

  /**
   * Reads the files at once: throws, naming the file and its problems, when one cannot be used.
   * `clustered`: a worker of our node:cluster primary, which counts the limits without a store.
   */
  constructor(private readonly o: AuthOptions, clustered = false) {
    super();
    this.open = new Set(o.open);
    this.keyHeader = o.keyHeader.toLowerCase();
    const limits = o.limits ?? NO_LIMITS;
    // With a store, the limits are counted there for every process (started by start()); without,
    // a cluster's workers count them in the primary (auth/cluster-store.ts).
    const { url, timeoutMs = STORE_TIMEOUT_DEFAULT_MS, failure = 'local' } = limits.store ?? {};
    const store = url !== undefined ? new LimitsStore(url, timeoutMs) : clustered ? new WorkerStore(timeoutMs) : undefined;
    this.limiter = store === undefined ? Object.assign(new Limiter(limits), { quotas: new Quotas(limits, undefined) })
      : new SharedLimiter(limits, store, failure);
    let plain: string[] = [];
    if (o.keysFile !== '') {
      const text = readStartFile(o.keysFile, 'auth.keysFile');
      const r = parseKeyFile(text);
      if ('problems' in r) throw new Error(`auth.keysFile ${o.keysFile}: ${r.problems.join('; ')}`);
      this.keys = new KeyStore(r.keys);
      plain = r.plain;
      this.seen.set(o.keysFile, digest(text));
      this.watch(o.keysFile, 'keys');
    }
    this.plainKeys = plain;
    if (o.jwt.jwksUrl !== '' || o.jwt.jwksFile !== '') {
      let jwks: unknown;
      if (o.jwt.jwksFile !== '') {
        const text = readStartFile(o.jwt.jwksFile, 'auth.jwt.jwksFile');
        try {
          jwks = JSON.parse(text);
          this.jwt = new JwtVerifier(o.jwt, jwks, limits.groupsClaim);
        } catch (err) {
          throw new Error(`auth.jwt.jwksFile ${o.jwt.jwksFile}: ${jwksProblem(err)}`);
        }
        this.seen.set(o.jwt.jwksFile, digest(text));
        this.watch(o.jwt.jwksFile, 'jwks');
      } else this.jwt = new JwtVerifier(o.jwt, undefined, limits.groupsClaim);
    }
  }

  /** The credential of a request, and what it is worth. */
  async authenticate(headers: IncomingHttpHeaders): Promise<Authentication> {
    const c = credential(headers, this.keyHeader);
    if (c === undefined) return { kind: 'missing' };
    const { token, header } = c;
    if (token === '') return { kind: 'invalid', method: 'none', header, reason: 'the token is empty' };
    const key = this.keys.match(token);
    if (key !== undefined) return { kind: 'granted', method: 'key', header, grant: key };
    if (this.jwt === undefined || !looksLikeJwt(token)) return { kind: 'invalid', method: 'key', header, reason: 'unknown API key' };
    const r = await this.jwt.verify(token);
    if ('grant' in r) return { kind: 'granted', method: 'jwt', header, grant: r.grant };
    if ('invalid' in r) return { kind: 'invalid', method: 'jwt', header, reason: r.invalid };
    return { kind: 'unavailable', method: 'jwt', header, reason: r.unavailable };
  }

  /**
   * GET /usage/<id> (telemetry/usage-page.ts): the quotas of `key:<id>`, `jwt:<sub>` (its own or
   * the default; a token's groups are not known without it) or `group:<name>` in their current
   * windows, and what the identity used in this process; undefined when nothing configures it.
   */
  async usage(id: string): Promise<object | undefined> {
    const limits = this.o.limits ?? NO_LIMITS;
    const colon = id.indexOf(':');
    const kind = id.slice(0, colon);
    const name = id.slice(colon + 1);
    let applied: Applied[];
    if (kind === 'key') {
      const key = this.keys.keys.find((k) => k.subject === name);
      if (key === undefined) return undefined;
      applied = appliedLimits(limits, key, 'key');
    } else if (kind === 'jwt') applied = appliedLimits(limits, { subject: name }, 'jwt');
    else if (kind === 'group' && limits.groups.has(name)) applied = [{ id, label: id, limit: limits.groups.get(name)! }];
    else return undefined;
    const { quotas } = this.limiter;
    if (quotas === undefined) return undefined;
    return { id, quotas: await quotas.state(applied), process: quotas.book.of(id) };
  }

  /**
   * Connects to auth.limits.store, if any, within its start-up bound: throws one line naming the
   * key and what to do when it cannot be used (a wrong password, nothing answering).
   */
  async start(): Promise<void> {
    if (!(this.limiter instanceof SharedLimiter)) return;
    const { store } = this.limiter;
    try {
      await store.start();
    } catch (err) {
      throw new Error(`auth.limits.store: cannot use ${store.where}: ${(err as Error).message}; check the URL, its password and that Redis answers there`);
    }
  }

  close(): void {
    for (const w of this.watches.splice(0)) w.close();
    this.limiter.close();
  }

  private watch(path: string, file: 'keys' | 'jwks'): void {
    this.watches.push(watchFiles([path], RELOAD_DEBOUNCE_MS, () => void this.reload(path, file),
      (_dir, err) => this.emit('reload', { file, path, ok: false, problem: `watching its directory failed: ${err.message}` })));
  }

  private async reload(path: string, file: 'keys' | 'jwks'): Promise<void> {
    let text: string;
    try {
      text = await readFile(path, 'utf8');
    } catch (err) {
      // A swap in progress (the link briefly gone) is followed by the event that completes it.
      this.emit('reload', { file, path, ok: false, problem: `unreadable (${(err as NodeJS.ErrnoException).code ?? 'error'})` });
      return;
    }
    const d = digest(text);
    if (this.seen.get(path) === d) return;
    if (file === 'keys') {
      const r = parseKeyFile(text);
      if ('problems' in r) {
        this.emit('reload', { file, path, ok: false, problem: r.problems.join('; ') });
        return;
      }
      this.keys = new KeyStore(r.keys);
      this.seen.set(path, d);
      this.emit('reload', { file, path, ok: true, keys: r.keys.length, plain: r.plain });
      return;
    }
    try {
      const jwks = JSON.parse(text) as { keys?: unknown[] };
      this.jwt!.setKeys(jwks);
      this.seen.set(path, d);
      this.emit('reload', { file, path, ok: true, keys: jwks.keys?.length ?? 0 });
    } catch (err) {
      this.emit('reload', { file, path, ok: false, problem: jwksProblem(err) });
    }
  }
}

function readStartFile(path: string, key: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch (err) {
    throw new Error(`${key} ${path}: cannot be read (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`);
  }
}

/** JSON.parse's message quotes the text around the error: only jose's own (which quote nothing) are kept. */
const jwksProblem = (err: unknown): string => (err instanceof SyntaxError ? 'not JSON' : `not a JWKS (${(err as Error).message})`);

const digest = (text: string): string => sha256(text).toString('hex');

/**
 * `Authorization: Bearer <token>` (RFC 6750 §2.1; the scheme is case-insensitive, RFC 9110 §11.1),
 * else the configured key header. Another scheme (Basic …) is no credential of ours.
 */
function credential(headers: IncomingHttpHeaders, keyHeader: string): { token: string; header: string } | undefined {
  const a = headers.authorization;
  if (a !== undefined) {
    const m = /^Bearer(?: +(.*))?$/i.exec(a);
    if (m !== null) return { token: (m[1] ?? '').trim(), header: 'authorization' };
  }
  if (keyHeader !== '') {
    const v = headers[keyHeader];
    if (typeof v === 'string') return { token: v.trim(), header: keyHeader };
  }
  return undefined;
}
