// TLS to Triton (upstream.tls): the CA that signs Triton's gRPC certificate, optionally a client
// certificate for Triton's --grpc-use-ssl-mutual, and a server name override. One object for the
// h2 data plane (connectOptions), the grpc-js clients (channelCredentials: the control, grpc-js
// and stream planes) and the health checker, so every connection to Triton uses the same material.
//
// The files reload when they change: their directories are watched (a Kubernetes Secret volume
// swaps its `..data` symlink, which a watch on the file itself would not see), changes are
// debounced, and the new material is checked (the PEMs parse, the key matches the certificate)
// before it replaces the old. New connections use it; open ones keep theirs until they close (a
// TLS session's certificate is fixed at its handshake). A failed reload keeps the old material
// and is reported ('reloadFailed'; gateway.ts logs and counts it).
//
// grpc-js takes reloadable material through its CertificateProvider interface (grpc-js
// certificate-provider.ts): its channel asks for the latest secure context at each connection.
import { EventEmitter } from 'node:events';
import { readFileSync } from 'node:fs';
import { checkServerIdentity, type ConnectionOptions, createSecureContext, type SecureContext } from 'node:tls';
import { X509Certificate } from 'node:crypto';
import { type ChannelCredentials, experimental } from '@grpc/grpc-js';
import { DEFAULT_TLS_CIPHERS } from '../../config/tls';
import { type FileWatch, watchFiles } from '../../file-watch';

export interface UpstreamTlsFiles {
  /** PEM file of the CA (or CAs) that sign Triton's server certificate. */
  readonly ca: string;
  /** PEM files of the client certificate and its key ('' for none: Triton without --grpc-use-ssl-mutual). */
  readonly cert: string;
  readonly key: string;
  /** The name Triton's certificate must carry, and the SNI sent; '' = the backend's host. */
  readonly serverName: string;
}

interface Material {
  readonly ca: Buffer;
  readonly cert: Buffer | undefined;
  readonly key: Buffer | undefined;
  readonly context: SecureContext;
  /** The client certificate's notAfter (ms since the epoch), for the expiry gauge. */
  readonly certNotAfterMs: number | undefined;
}

type CaListener = (update: { caCertificate: Buffer } | null) => void;
type IdentityListener = (update: { certificate: Buffer; privateKey: Buffer } | null) => void;

export interface UpstreamTlsEvents {
  /** New material is in use for new connections. */
  reloaded: [{ readonly files: readonly string[] }];
  /** The files changed but could not be used; the previous material stays. */
  reloadFailed: [{ readonly files: readonly string[]; readonly message: string }];
}

/** Changes closer together than this are one reload (a Secret update writes several files). */
export const RELOAD_DEBOUNCE_MS = 200;

export class UpstreamTls extends EventEmitter<UpstreamTlsEvents> {
  readonly files: UpstreamTlsFiles;
  readonly #paths: readonly string[];
  #material: Material;
  readonly #caListeners = new Set<CaListener>();
  readonly #identityListeners = new Set<IdentityListener>();
  #watch: FileWatch | undefined;
  #credentials: ChannelCredentials | undefined;
  reloads = 0;
  reloadFailures = 0;

  /** Reads the files now: a problem with them at start is an Error naming the file and the key. */
  constructor(files: UpstreamTlsFiles, options: { readonly watch?: boolean; readonly debounceMs?: number } = {}) {
    super();
    this.files = files;
    this.#paths = [files.ca, files.cert, files.key].filter((p) => p !== '');
    this.#material = load(files);
    // A directory that goes away (a volume unmounted) ends its watch; the material stays.
    if (options.watch !== false) {
      this.#watch = watchFiles(this.#paths, options.debounceMs ?? RELOAD_DEBOUNCE_MS, () => this.reload(),
        (dir, err) => this.emit('reloadFailed', { files: this.#paths, message: `watching ${dir}: ${err.message}` }));
    }
  }

  /** When the client certificate in use expires (ms since the epoch); undefined without one. */
  get clientCertNotAfterMs(): number | undefined {
    return this.#material.certNotAfterMs;
  }

  /** Whether a client certificate is sent (Triton's --grpc-use-ssl-mutual needs one). */
  get mutual(): boolean {
    return this.files.cert !== '';
  }

  /** node:tls options of a new connection to `host` (http2.connect with an https:// authority). */
  connectOptions(): ConnectionOptions {
    const name = this.files.serverName;
    if (name === '') return { secureContext: this.#material.context };
    return { secureContext: this.#material.context, servername: name, checkServerIdentity: (_host, cert) => checkServerIdentity(name, cert) };
  }

  /** grpc-js credentials that take the current material at each new connection. */
  channelCredentials(): ChannelCredentials {
    this.#credentials ??= experimental.createCertificateProviderChannelCredentials(this, this.mutual ? this : null);
    return this.#credentials;
  }

  /** grpc-js channel options: the server name override, as grpc's ssl_target_name_override. */
  channelOptions(): Record<string, string> {
    const name = this.files.serverName;
    return name === '' ? {} : { 'grpc.ssl_target_name_override': name, 'grpc.default_authority': name };
  }

  /**
   * Reads the files again; returns whether new material is now in use. Unchanged files are no
   * reload; unusable ones leave the old material and emit 'reloadFailed'.
   */
  reload(): boolean {
    let next: Material;
    try {
      next = load(this.files);
    } catch (err) {
      this.reloadFailures++;
      this.emit('reloadFailed', { files: this.#paths, message: (err as Error).message });
      return false;
    }
    const now = this.#material;
    if (next.ca.equals(now.ca) && same(next.cert, now.cert) && same(next.key, now.key)) return false;
    this.#material = next;
    this.reloads++;
    for (const l of this.#caListeners) l({ caCertificate: next.ca });
    if (next.cert !== undefined && next.key !== undefined) for (const l of this.#identityListeners) l({ certificate: next.cert, privateKey: next.key });
    this.emit('reloaded', { files: this.#paths });
    return true;
  }

  // grpc-js CertificateProvider (used as both the CA and the identity provider).
  addCaCertificateListener(l: CaListener): void {
    this.#caListeners.add(l);
    l({ caCertificate: this.#material.ca });
  }

  removeCaCertificateListener(l: CaListener): void {
    this.#caListeners.delete(l);
  }

  addIdentityCertificateListener(l: IdentityListener): void {
    this.#identityListeners.add(l);
    const m = this.#material;
    l(m.cert === undefined || m.key === undefined ? null : { certificate: m.cert, privateKey: m.key });
  }

  removeIdentityCertificateListener(l: IdentityListener): void {
    this.#identityListeners.delete(l);
  }

  close(): void {
    this.#watch?.close();
    this.#watch = undefined;
  }
}

function same(a: Buffer | undefined, b: Buffer | undefined): boolean {
  return a === undefined ? b === undefined : b !== undefined && a.equals(b);
}

function read(file: string, key: string): Buffer {
  try {
    return readFileSync(file);
  } catch (err) {
    throw new Error(`${key}: cannot read ${file}: ${(err as Error).message}`, { cause: err });
  }
}

/** The files' material, checked: every PEM parses and the key belongs to the certificate. */
function load(files: UpstreamTlsFiles): Material {
  const ca = read(files.ca, 'upstream.tls.ca');
  try {
    new X509Certificate(ca); // parsing is the check
  } catch (err) {
    throw new Error(`upstream.tls.ca: ${files.ca} holds no PEM certificate: ${(err as Error).message}`, { cause: err });
  }
  const cert = files.cert === '' ? undefined : read(files.cert, 'upstream.tls.cert');
  const key = files.key === '' ? undefined : read(files.key, 'upstream.tls.key');
  let context: SecureContext;
  try {
    // Forward-secret suites only, as the server side (config/tls.ts); Triton's gRPC core offers
    // ECDHE with AES-GCM by default (GRPC_SSL_CIPHER_SUITES), so nothing it serves is lost.
    context = createSecureContext({ ca, cert, key, ciphers: DEFAULT_TLS_CIPHERS });
  } catch (err) {
    // OpenSSL's own words: "key values mismatch", "no start line", ...
    throw new Error(`upstream.tls.cert/key (${files.cert}, ${files.key}): ${(err as Error).message}`, { cause: err });
  }
  // The key matched the certificate above, so it parses.
  const certNotAfterMs = cert === undefined ? undefined : new X509Certificate(cert).validToDate.getTime();
  return { ca, cert, key, context, certNotAfterMs };
}

/**
 * OpenSSL's verification failures (Node's error codes) that mean Triton's certificate does not
 * chain to upstream.tls.ca: the message then says which key to look at.
 */
const UNTRUSTED = /self[- ]signed certificate|unable to get (local )?issuer certificate|unable to verify the first certificate|certificate (signature failure|not trusted)/i;
const TLS_WORDS = /certificate|ssl|tls|handshake|alert|wrong version number|packet length too long/i;

/**
 * The TLS reason of a failed connection, in words an operator can act on, or undefined when
 * `message` (a Node or OpenSSL error message, or grpc-js' "Last error") is not about TLS.
 */
export function tlsFailure(raw: string, address: string): string | undefined {
  if (!TLS_WORDS.test(raw)) return undefined;
  // OpenSSL's error strings ("40BD…:error:0A00010B:SSL routines:<function>:<reason>:<file>:<line>:"): the reason.
  const message = /error:[0-9A-F]+:[^:]*:[^:]*:([^:]+)/.exec(raw)?.[1] ?? raw;
  if (UNTRUSTED.test(message)) return `TLS handshake with ${address} failed: ${message} (Triton's certificate is not signed by upstream.tls.ca)`;
  if (/Hostname\/IP does not match|altnames/i.test(message)) {
    return `TLS handshake with ${address} failed: ${message} (set upstream.tls.serverName to a name Triton's certificate carries)`;
  }
  if (/wrong version number|packet length too long/i.test(message)) {
    return `TLS handshake with ${address} failed: ${message} (is Triton's gRPC serving TLS? tritonserver --grpc-use-ssl)`;
  }
  return `TLS handshake with ${address} failed: ${message}`;
}

/**
 * A TLS connection Triton closed right after the handshake, before its first HTTP/2 frame: with
 * TLS 1.3 the client's handshake is complete before the server has checked the client's
 * certificate, and Triton (gRPC core) then closes without an alert (observed with Triton 2.51 and
 * --grpc-use-ssl-mutual: no certificate, or one not signed by its --grpc-root-cert).
 */
export function closedAfterHandshake(address: string, mutual: boolean): string {
  const which = mutual ? 'the one in upstream.tls.cert' : 'none was sent: upstream.tls.cert is not set';
  return `TLS handshake with ${address} failed: the connection was closed right after the handshake, before Triton's first HTTP/2 frame; `
    + `Triton refused the client certificate (${which}; --grpc-use-ssl-mutual requires one signed by its --grpc-root-cert)`;
}
