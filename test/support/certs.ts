// Certificates for TLS tests, made by the openssl command line into a temporary directory: a CA,
// leaf certificates it signs (server ones name localhost and 127.0.0.1), and an unrelated CA for
// "wrong CA" cases. Keys are EC P-256 (fast to make), or RSA 2048 where asked (cipher suites with
// RSA key exchange need an RSA certificate). Everything is PEM files, as the gateway's
// config and Triton's --grpc-server-cert/--grpc-root-cert take them.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { OPENSSL } from './tools';

export interface Pem {
  readonly cert: string;
  readonly key: string;
}

export interface LeafOptions {
  readonly cn?: string;
  readonly client?: boolean;
  readonly days?: number;
  readonly rsa?: boolean;
}

export interface Pki {
  readonly dir: string;
  readonly ca: Pem;
  /** Signed by `ca`; SAN localhost, 127.0.0.1, ::1. */
  readonly server: Pem;
  /** Signed by `ca`; extendedKeyUsage clientAuth. */
  readonly client: Pem;
  /** A CA that signed nothing here. */
  readonly otherCa: Pem;
  /** Another leaf signed by `ca`, written to `name`.crt/.key (a renewed certificate, say). */
  issue(name: string, options?: LeafOptions): Pem;
  remove(): void;
}

function openssl(args: readonly string[], cwd: string): void {
  const file = OPENSSL().path;
  if (file === undefined) throw new Error(`openssl is not installed (${OPENSSL().install})`);
  execFileSync(file, args, { cwd, stdio: ['ignore', 'ignore', 'pipe'], timeout: 20_000 });
}

function makeCa(dir: string, name: string): Pem {
  const key = path.join(dir, `${name}.key`);
  const cert = path.join(dir, `${name}.crt`);
  openssl(['ecparam', '-name', 'prime256v1', '-genkey', '-noout', '-out', key], dir);
  openssl(['req', '-x509', '-new', '-key', key, '-sha256', '-days', '30', '-subj', `/CN=tensorgate test ${name}`, '-out', cert,
    '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign,cRLSign'], dir);
  return { cert, key };
}

function makeLeaf(dir: string, ca: Pem, name: string, { cn = 'localhost', client = false, days = 30, rsa = false }: LeafOptions): Pem {
  const key = path.join(dir, `${name}.key`);
  const cert = path.join(dir, `${name}.crt`);
  const csr = path.join(dir, `${name}.csr`);
  const ext = path.join(dir, `${name}.ext`);
  if (rsa) openssl(['genpkey', '-algorithm', 'RSA', '-pkeyopt', 'rsa_keygen_bits:2048', '-out', key], dir);
  else openssl(['ecparam', '-name', 'prime256v1', '-genkey', '-noout', '-out', key], dir);
  openssl(['req', '-new', '-key', key, '-subj', `/CN=${cn}`, '-out', csr], dir);
  writeFileSync(ext, [
    'basicConstraints=CA:FALSE',
    // RSA key exchange encrypts with the key (keyEncipherment); ECDHE signs (digitalSignature).
    `keyUsage=critical,digitalSignature,${rsa ? 'keyEncipherment' : 'keyAgreement'}`,
    `extendedKeyUsage=${client ? 'clientAuth' : 'serverAuth,clientAuth'}`,
    ...(client ? [] : ['subjectAltName=DNS:localhost,IP:127.0.0.1,IP:::1']),
  ].join('\n'));
  openssl(['x509', '-req', '-in', csr, '-CA', ca.cert, '-CAkey', ca.key, '-CAcreateserial', '-days', String(days), '-sha256',
    '-extfile', ext, '-out', cert], dir);
  rmSync(csr);
  rmSync(ext);
  return { cert, key };
}

/** A fresh CA with a server and a client certificate, in a new temporary directory. */
export function makePki(): Pki {
  const dir = mkdtempSync(path.join(tmpdir(), 'tg-pki-'));
  const ca = makeCa(dir, 'ca');
  const otherCa = makeCa(dir, 'other-ca');
  const server = makeLeaf(dir, ca, 'server', {});
  const client = makeLeaf(dir, ca, 'client', { cn: 'tensorgate-client', client: true });
  return {
    dir, ca, server, client, otherCa,
    issue: (name, o = {}) => makeLeaf(dir, ca, name, o),
    remove: () => rmSync(dir, { recursive: true, force: true }),
  };
}

/** A PEM file's text. */
export function pemText(file: string): string {
  return readFileSync(file, 'utf8');
}
