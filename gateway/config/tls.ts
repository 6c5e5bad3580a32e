// The server's TLS material (server.tls.*): the PEM files read, checked and turned into the
// options of a secure context. Used once at load (a bad file is a configuration error at start)
// and again on every reload (ingress/tls.ts), so both give the same messages.
import { createPrivateKey, X509Certificate } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createSecureContext, type SecureContextOptions } from 'node:tls';
import type { TlsConfig } from './schema';

/**
 * The cipher list when server.tls.ciphers is empty: at TLS 1.2 only forward-secret AEAD suites
 * (ECDHE key exchange with AES-GCM or ChaCha20-Poly1305, Mozilla's "intermediate" profile without
 * DHE), so a recorded session cannot be decrypted later with the server's key; Node's own default
 * (tls.DEFAULT_CIPHERS, whose `HIGH` takes in AES128-SHA, AES256-SHA256, AES128-GCM-SHA256 with
 * RSA key exchange) is not. TLS 1.3 suites are all forward-secret: Node's three, named here
 * because a list without `TLS_` names turns TLS 1.3 off (Node's processCiphers).
 */
export const DEFAULT_TLS_CIPHERS = [
  'TLS_AES_256_GCM_SHA384', 'TLS_CHACHA20_POLY1305_SHA256', 'TLS_AES_128_GCM_SHA256',
  'ECDHE-ECDSA-AES128-GCM-SHA256', 'ECDHE-RSA-AES128-GCM-SHA256', 'ECDHE-ECDSA-AES256-GCM-SHA384',
  'ECDHE-RSA-AES256-GCM-SHA384', 'ECDHE-ECDSA-CHACHA20-POLY1305', 'ECDHE-RSA-CHACHA20-POLY1305',
].join(':');

/** What a secure context is made of, and its leaf certificate (for logs). */
export interface TlsMaterial {
  readonly files: TlsFiles;
  readonly options: SecureContextOptions;
  readonly leaf: X509Certificate;
}

/** The problems with the combination of server.tls.* keys (no file is read). */
export function tlsConfigProblems(tls: TlsConfig): string[] {
  const problems: string[] = [];
  if (tls.cert !== '' && tls.key === '') problems.push('server.tls.key: required when server.tls.cert is set');
  if (tls.key !== '' && tls.cert === '') problems.push('server.tls.cert: required when server.tls.key is set');
  if (tls.cert === '' && tls.key === '') {
    for (const k of ['clientCa', 'ciphers'] as const) {
      if (tls[k] !== '') problems.push(`server.tls.${k}: needs server.tls.cert and server.tls.key (the gateway serves plain HTTP without them)`);
    }
  }
  return problems;
}

/** The files' bytes, as read: compared between reloads so an unchanged set is not applied again. */
export interface TlsFiles {
  readonly cert: Buffer;
  readonly key: Buffer;
  readonly ca: Buffer | undefined;
}

function read(key: string, file: string): Buffer {
  try {
    return readFileSync(file);
  } catch (err) {
    throw new Error(`server.tls.${key}: cannot read ${file}: ${(err as Error).message}`, { cause: err });
  }
}

/** Reads the PEM files; throws an Error naming the key and the file. */
export function readTlsFiles(tls: TlsConfig): TlsFiles {
  return { cert: read('cert', tls.cert), key: read('key', tls.key), ca: tls.clientCa === '' ? undefined : read('clientCa', tls.clientCa) };
}

/** Whether two reads found the same bytes. */
export function sameTlsFiles(a: TlsFiles, b: TlsFiles): boolean {
  return a.cert.equals(b.cert) && a.key.equals(b.key) && (a.ca === undefined ? b.ca === undefined : b.ca !== undefined && a.ca.equals(b.ca));
}

/**
 * Checks what the files hold: a certificate, a private key that matches it, a CA bundle that
 * parses, a cipher list OpenSSL knows. Throws an Error naming the key and the file.
 */
export function tlsMaterial(tls: TlsConfig, { cert, key, ca }: TlsFiles): TlsMaterial {
  let leaf: X509Certificate;
  try {
    leaf = new X509Certificate(cert);
  } catch (err) {
    throw new Error(`server.tls.cert: ${tls.cert} holds no PEM certificate (${(err as Error).message})`, { cause: err });
  }
  let privateKey;
  try {
    privateKey = createPrivateKey(key);
  } catch (err) {
    throw new Error(`server.tls.key: ${tls.key} holds no unencrypted PEM private key (${(err as Error).message})`, { cause: err });
  }
  if (!leaf.checkPrivateKey(privateKey)) {
    throw new Error(`server.tls.key: the key in ${tls.key} does not belong to the certificate in ${tls.cert} (server.tls.cert)`);
  }
  if (ca !== undefined) {
    try {
      new X509Certificate(ca);
    } catch (err) {
      throw new Error(`server.tls.clientCa: ${tls.clientCa} holds no PEM certificate (${(err as Error).message})`, { cause: err });
    }
  }
  const options: SecureContextOptions = {
    cert, key, ca, minVersion: tls.minVersion, ciphers: tls.ciphers === '' ? DEFAULT_TLS_CIPHERS : tls.ciphers,
  };
  try {
    createSecureContext(options);
  } catch (err) {
    const which = tls.ciphers !== '' && /cipher/i.test((err as Error).message) ? 'server.tls.ciphers' : 'server.tls.cert';
    throw new Error(`${which}: OpenSSL refused the TLS settings: ${(err as Error).message}`, { cause: err });
  }
  return { files: { cert, key, ca }, options, leaf };
}

/** Reads and checks the files (load time, a reload). */
export function readTlsMaterial(tls: TlsConfig): TlsMaterial {
  return tlsMaterial(tls, readTlsFiles(tls));
}
