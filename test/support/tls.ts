// TLS helpers for tests: a bare handshake that reports the certificate a new connection gets, and
// a directory laid out as Kubernetes mounts a Secret, to swap certificates the way it does.
import { copyFileSync, mkdirSync, mkdtempSync, renameSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { connect, type ConnectionOptions } from 'node:tls';

/** A TLS handshake alone: the certificate a new connection is served, or the error. */
export function handshake(port: number, options: ConnectionOptions): Promise<{ serial: string; protocol: string | null; cipher: string }> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host: '127.0.0.1', port, servername: 'localhost', ...options });
    socket.setTimeout(10_000, () => socket.destroy(new Error('no handshake within 10 s')));
    socket.once('secureConnect', () => {
      resolve({ serial: socket.getPeerCertificate().serialNumber, protocol: socket.getProtocol(), cipher: socket.getCipher().name });
      socket.end();
    });
    socket.once('error', reject);
  });
}

/**
 * A directory laid out as a Kubernetes Secret volume holding `cert` and `key`: tls.crt and tls.key
 * are symlinks to ..data/tls.*, ..data a symlink to a version directory; publish() writes a new
 * version and swaps ..data with one rename (kubernetes pkg/volume/util/atomic_writer.go).
 */
export interface SecretDir {
  readonly dir: string;
  /** The paths to give the gateway: dir/tls.crt and dir/tls.key. */
  readonly cert: string;
  readonly key: string;
  publish(cert: string, key: string): void;
  remove(): void;
}

export function secretDir(cert: string, key: string): SecretDir {
  const dir = mkdtempSync(path.join(tmpdir(), 'tg-secret-'));
  let version = 0;
  const publish = (cert: string, key: string): void => {
    const v = `..v${++version}`;
    mkdirSync(path.join(dir, v));
    copyFileSync(cert, path.join(dir, v, 'tls.crt'));
    copyFileSync(key, path.join(dir, v, 'tls.key'));
    symlinkSync(v, path.join(dir, '..data_tmp'));
    renameSync(path.join(dir, '..data_tmp'), path.join(dir, '..data'));
  };
  publish(cert, key);
  symlinkSync('..data/tls.crt', path.join(dir, 'tls.crt'));
  symlinkSync('..data/tls.key', path.join(dir, 'tls.key'));
  return {
    dir, publish,
    cert: path.join(dir, 'tls.crt'),
    key: path.join(dir, 'tls.key'),
    remove: () => rmSync(dir, { recursive: true, force: true }),
  };
}
