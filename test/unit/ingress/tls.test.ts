// The certificate reloader (ingress/tls.ts) against a stand-in server: a changed, valid set is
// applied; an unchanged set is not tried again; a broken one is reported and the old context
// stays; a change of the client CA alone reloads too. (The directory watch itself, with a
// Kubernetes-style symlink swap, is tested on a real server in test/integration/tls.test.ts.)
import { X509Certificate } from 'node:crypto';
import { copyFileSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { SecureContextOptions } from 'node:tls';
import { readTlsMaterial } from '../../../gateway/config/tls';
import type { TlsConfig } from '../../../gateway/config/schema';
import { ALPN_PROTOCOLS, type TlsReload, TlsReloader, tlsServerOptions } from '../../../gateway/ingress/tls';
import { makePki, type Pki } from '../../support/certs';
import { needsFile, OPENSSL } from '../../support/tools';

needsFile(OPENSSL()); // the certificates (test/support/certs.ts)

let pki: Pki;
beforeAll(() => { pki = makePki(); });
afterAll(() => pki.remove());

function setup(): { tls: TlsConfig; applied: SecureContextOptions[]; reloads: TlsReload[]; reloader: TlsReloader } {
  const cert = path.join(pki.dir, 'live.crt');
  const key = path.join(pki.dir, 'live.key');
  const ca = path.join(pki.dir, 'live-ca.crt');
  copyFileSync(pki.server.cert, cert);
  copyFileSync(pki.server.key, key);
  copyFileSync(pki.ca.cert, ca);
  const tls: TlsConfig = { cert, key, clientCa: ca, minVersion: 'TLSv1.3', ciphers: '' };
  const applied: SecureContextOptions[] = [];
  const reloads: TlsReload[] = [];
  const reloader = new TlsReloader({ setSecureContext: (o) => applied.push(o) }, tls, readTlsMaterial(tls));
  reloader.on('reload', (r) => reloads.push(r));
  return { tls, applied, reloads, reloader };
}

test('server options: ALPN from the one list, client certificates required with a client CA', () => {
  const tls: TlsConfig = { cert: pki.server.cert, key: pki.server.key, clientCa: pki.ca.cert, minVersion: 'TLSv1.2', ciphers: '' };
  const o = tlsServerOptions(tls, readTlsMaterial(tls));
  expect(o).toMatchObject({ ALPNProtocols: ['h2', 'http/1.1'], requestCert: true, rejectUnauthorized: true, minVersion: 'TLSv1.2' });
  expect(ALPN_PROTOCOLS).toEqual(['h2', 'http/1.1']);
  expect(tlsServerOptions({ ...tls, clientCa: '' }, readTlsMaterial({ ...tls, clientCa: '' }))).toMatchObject({ requestCert: false, rejectUnauthorized: false });
});

test('unchanged files: nothing applied, nothing reported', () => {
  const { applied, reloads, reloader } = setup();
  try {
    reloader.reload();
    expect([applied, reloads]).toEqual([[], []]);
  } finally {
    reloader.close();
  }
});

test('a renewed certificate is applied with every setting; a broken set is reported and not applied', () => {
  const { tls, applied, reloads, reloader } = setup();
  try {
    const next = pki.issue('renewed');
    copyFileSync(next.cert, tls.cert);
    copyFileSync(next.key, tls.key);
    reloader.reload();
    expect(reloads.map((r) => r.outcome)).toEqual(['success']);
    expect(reloads[0]!.outcome === 'success' && reloads[0]!.leaf.serialNumber).toBe(new X509Certificate(readFileSync(next.cert)).serialNumber);
    expect(applied).toHaveLength(1);
    expect(applied[0]).toMatchObject({ minVersion: 'TLSv1.3' });
    expect(applied[0]!.ca).toBeDefined();

    copyFileSync(pki.server.cert, tls.cert); // the old certificate with the renewed key
    reloader.reload();
    rmSync(tls.key);
    reloader.reload();
    writeFileSync(tls.key, 'junk');
    reloader.reload();
    expect(reloads.map((r) => r.outcome)).toEqual(['success', 'failure', 'failure', 'failure']);
    expect(reloads.slice(1).map((r) => r.outcome === 'failure' && r.error.message)).toEqual([
      `server.tls.key: the key in ${tls.key} does not belong to the certificate in ${tls.cert} (server.tls.cert)`,
      expect.stringMatching(/^server\.tls\.key: cannot read .*ENOENT/),
      expect.stringMatching(/^server\.tls\.key: .* holds no unencrypted PEM private key/),
    ]);
    expect(applied).toHaveLength(1);
  } finally {
    reloader.close();
  }
});

test('a new client CA alone is a reload', () => {
  const { tls, applied, reloads, reloader } = setup();
  try {
    copyFileSync(pki.otherCa.cert, tls.clientCa);
    reloader.reload();
    expect(reloads.map((r) => r.outcome)).toEqual(['success']);
    expect(String(applied[0]!.ca)).toBe(readFileSync(pki.otherCa.cert, 'utf8'));
  } finally {
    reloader.close();
  }
});
