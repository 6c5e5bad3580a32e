// HTTPS on the gateway's port (server.tls.*): the server's TLS options, and the reload of the
// certificate when its files change, without a restart.
//
// Reload. Kubernetes mounts a Secret as a directory whose files are symlinks through `..data`,
// itself a symlink to a timestamped directory; an update writes a new timestamped directory and
// renames a fresh `..data` over the old one (kubernetes/kubernetes, pkg/volume/util/atomic_writer.go).
// The files' own inodes never change, so a watch on a file sees nothing: we watch each file's
// directory, and on any change there (debounced: cert-manager or a hand copy writes the cert and
// the key one after the other) read the files again by path. A set that reads, parses and
// matches becomes a new secure context with tls.Server#setSecureContext: connections already
// open keep theirs, new handshakes get the new certificate. A set that fails keeps the old
// context; the failure is reported (logged and counted by the caller) and the next change tries again.
import { EventEmitter } from 'node:events';
import type { SecureContextOptions, TlsOptions } from 'node:tls';
import type { X509Certificate } from 'node:crypto';
import type { TlsConfig } from '../config/schema';
import { type FileWatch, watchFiles } from '../file-watch';
import { readTlsFiles, sameTlsFiles, type TlsFiles, tlsMaterial, type TlsMaterial } from '../config/tls';

/**
 * The protocols ALPN offers, in order of preference: the one place that names them. A connection
 * that agrees on h2 goes to the HTTP/2 server (ingress/h2.ts); http/1.1, or no ALPN, stays with node:https.
 */
export const ALPN_PROTOCOLS: readonly string[] = ['h2', 'http/1.1'];

/**
 * Quiet time after the last change in a watched directory before the files are read. Kubernetes'
 * swap is one rename; tools that write the certificate and then the key need the pause, or the
 * first read pairs a new certificate with the old key (that read would fail and be counted).
 */
export const RELOAD_DEBOUNCE_MS = 200;

/** The https server's options: the secure context, ALPN, and client certificates when server.tls.clientCa is set. */
export function tlsServerOptions(tls: TlsConfig, material: TlsMaterial): TlsOptions {
  const mutual = tls.clientCa !== '';
  return { ...material.options, ALPNProtocols: [...ALPN_PROTOCOLS], requestCert: mutual, rejectUnauthorized: mutual };
}

/** A reload's outcome: the new leaf certificate, or why the old context stays. */
export type TlsReload =
  | { readonly outcome: 'success'; readonly leaf: X509Certificate }
  | { readonly outcome: 'failure'; readonly error: Error };

interface ReloaderEvents {
  reload: [TlsReload];
  /** A directory could no longer be watched (removed): reloads from it stop. */
  watchError: [Error];
}

/** Watches server.tls.*'s directories and applies a changed, valid set to `server`. close() stops it. */
export class TlsReloader extends EventEmitter<ReloaderEvents> {
  private readonly watch: FileWatch;
  /** The files of the last reload tried (applied or not): an unchanged set is not tried again. */
  private tried: TlsFiles;

  constructor(
    private readonly server: { setSecureContext(options: SecureContextOptions): void },
    private readonly tls: TlsConfig,
    current: TlsMaterial,
  ) {
    super();
    this.tried = current.files;
    const files = [tls.cert, tls.key, ...(tls.clientCa === '' ? [] : [tls.clientCa])];
    this.watch = watchFiles(files, RELOAD_DEBOUNCE_MS, () => this.reload(), (_dir, err) => this.emit('watchError', err));
  }

  /** Reads the files again; applies them when they changed and hold a valid set. */
  reload(): void {
    let files: TlsFiles;
    try {
      files = readTlsFiles(this.tls);
    } catch (err) {
      this.emit('reload', { outcome: 'failure', error: err as Error });
      return;
    }
    if (sameTlsFiles(files, this.tried)) return; // another file of the directory changed, or a touch
    this.tried = files;
    let material: TlsMaterial;
    try {
      material = tlsMaterial(this.tls, files);
      this.server.setSecureContext(material.options);
    } catch (err) {
      this.emit('reload', { outcome: 'failure', error: err as Error });
      return;
    }
    this.emit('reload', { outcome: 'success', leaf: material.leaf });
  }

  close(): void {
    this.watch.close();
  }
}
