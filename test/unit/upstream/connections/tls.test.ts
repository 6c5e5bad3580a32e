// upstream/connections/tls.ts without a network: the files are read and checked at start, reloads swap the
// material for grpc-js' listeners and for new h2 connections, a bad reload keeps the old, and the
// handshake failures of both planes come out in words that name the setting to look at.
import { X509Certificate } from 'node:crypto';
import { copyFileSync, mkdtempSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { grpcJsTransportDetails } from '../../../../gateway/upstream/connections/grpc-clients';
import { closedAfterHandshake, tlsFailure, UpstreamTls } from '../../../../gateway/upstream/connections/tls';
import { makePki, pemText, type Pki } from '../../../support/certs';
import { nextEvent } from '../../../support/wait';
import { needsFile, OPENSSL } from '../../../support/tools';

needsFile(OPENSSL()); // the certificates (test/support/certs.ts)

let pki: Pki;
beforeAll(() => {
  pki = makePki();
});
afterAll(() => pki.remove());

const A = '10.0.0.7:8001';

describe('UpstreamTls', () => {
  test('reads and checks the files at start, naming the key of a bad one', () => {
    const ok = new UpstreamTls({ ca: pki.ca.cert, cert: pki.client.cert, key: pki.client.key, serverName: '' }, { watch: false });
    expect(ok.mutual).toBe(true);
    expect(ok.channelOptions()).toEqual({});
    expect(Object.keys(ok.connectOptions())).toEqual(['secureContext']);
    const named = new UpstreamTls({ ca: pki.ca.cert, cert: '', key: '', serverName: 'triton.internal' }, { watch: false });
    expect(named.mutual).toBe(false);
    expect(named.clientCertNotAfterMs).toBeUndefined();
    expect(named.channelOptions()).toEqual({ 'grpc.ssl_target_name_override': 'triton.internal', 'grpc.default_authority': 'triton.internal' });
    expect(named.connectOptions().servername).toBe('triton.internal');

    const missing = path.join(pki.dir, 'missing.pem');
    expect(() => new UpstreamTls({ ca: missing, cert: '', key: '', serverName: '' }, { watch: false }))
      .toThrow(`upstream.tls.ca: cannot read ${missing}: ENOENT`);
    expect(() => new UpstreamTls({ ca: pki.client.key, cert: '', key: '', serverName: '' }, { watch: false }))
      .toThrow(`upstream.tls.ca: ${pki.client.key} holds no PEM certificate`);
    expect(() => new UpstreamTls({ ca: pki.ca.cert, cert: pki.client.cert, key: pki.server.key, serverName: '' }, { watch: false }))
      .toThrow(/^upstream\.tls\.cert\/key \(.*client\.crt, .*server\.key\): .*key values mismatch/);
  });

  test('a reload tells grpc-js\' listeners; unchanged files are no reload; a bad pair keeps the old one, counted', () => {
    const dir = mkdtempSync(path.join(pki.dir, 'reload-'));
    const cert = path.join(dir, 'tls.crt');
    const key = path.join(dir, 'tls.key');
    copyFileSync(pki.client.cert, cert);
    copyFileSync(pki.client.key, key);
    const tls = new UpstreamTls({ ca: pki.ca.cert, cert, key, serverName: '' }, { watch: false });
    const seen: string[] = [];
    tls.addIdentityCertificateListener((u) => seen.push(u === null ? 'null' : u.certificate.toString()));
    tls.addCaCertificateListener((u) => seen.push(u === null ? 'null' : u.caCertificate.toString()));
    expect(seen).toEqual([pemText(pki.client.cert), pemText(pki.ca.cert)]);
    expect(tls.reload()).toBe(false); // nothing changed
    const before = tls.connectOptions().secureContext;

    const notAfter = (file: string): number => new X509Certificate(pemText(file)).validToDate.getTime();
    expect(tls.clientCertNotAfterMs).toBe(notAfter(pki.client.cert));
    const renewed = pki.issue('renewed', { client: true, days: 90 });
    copyFileSync(renewed.cert, cert);
    copyFileSync(renewed.key, key);
    expect(tls.reload()).toBe(true);
    // The expiry gauge (certificate="upstream_client") follows the reload.
    expect(tls.clientCertNotAfterMs).toBe(notAfter(renewed.cert));
    expect(tls.clientCertNotAfterMs! - notAfter(pki.client.cert)).toBeGreaterThan(59 * 86_400_000);
    expect(seen.slice(2)).toEqual([pemText(pki.ca.cert), pemText(renewed.cert)]);
    expect(tls.connectOptions().secureContext).not.toBe(before);

    const failures: string[] = [];
    tls.on('reloadFailed', (e) => failures.push(e.message));
    copyFileSync(pki.client.key, key); // no longer the certificate's key
    const kept = tls.connectOptions().secureContext;
    expect(tls.reload()).toBe(false);
    expect(failures).toEqual([expect.stringMatching(/key values mismatch/)]);
    expect([tls.reloads, tls.reloadFailures]).toEqual([1, 1]);
    expect(tls.connectOptions().secureContext).toBe(kept);
    expect(seen).toHaveLength(4);
  });

  test('watches the directory: a changed file is reloaded once after the debounce', async () => {
    const dir = mkdtempSync(path.join(pki.dir, 'watch-'));
    const ca = path.join(dir, 'ca.crt');
    copyFileSync(pki.otherCa.cert, ca);
    const tls = new UpstreamTls({ ca, cert: '', key: '', serverName: '' }, { debounceMs: 20 });
    try {
      const reloaded = nextEvent(tls, 'reloaded', 10_000);
      writeFileSync(ca, pemText(pki.ca.cert).slice(0, 10)); // a partial write first ...
      writeFileSync(ca, pemText(pki.ca.cert)); // ... then the whole file, within the debounce
      await reloaded;
      expect([tls.reloads, tls.reloadFailures]).toEqual([1, 0]);
    } finally {
      tls.close();
    }
  });
});

describe('handshake failures in words', () => {
  test('OpenSSL\'s verification errors name the setting', () => {
    expect(tlsFailure('self-signed certificate in certificate chain', A))
      .toBe(`TLS handshake with ${A} failed: self-signed certificate in certificate chain (Triton's certificate is not signed by upstream.tls.ca)`);
    expect(tlsFailure('unable to get local issuer certificate', A)).toMatch(/not signed by upstream\.tls\.ca\)$/);
    expect(tlsFailure('Hostname/IP does not match certificate\'s altnames: IP: 10.0.0.7 is not in the cert\'s list: ', A))
      .toMatch(/\(set upstream\.tls\.serverName to a name Triton's certificate carries\)$/);
    const openssl = '40BD4517E57F0000:error:0A00010B:SSL routines:tls_validate_record_header:wrong version number:../deps/openssl/openssl/ssl/record/'
      + 'methods/tlsany_meth.c:77:\n';
    expect(tlsFailure(openssl, A)).toBe(`TLS handshake with ${A} failed: wrong version number (is Triton's gRPC serving TLS? tritonserver --grpc-use-ssl)`);
    expect(tlsFailure('error:0A00045C:SSL routines::tlsv13 alert certificate required', A))
      .toBe(`TLS handshake with ${A} failed: tlsv13 alert certificate required`);
    expect(tlsFailure('certificate has expired', A)).toBe(`TLS handshake with ${A} failed: certificate has expired`);
    expect(tlsFailure('connect ECONNREFUSED 10.0.0.7:8001', A)).toBeUndefined();
  });

  test('grpc-js\' "Last error" is read; "Failed to connect" on a TLS channel is a refused client certificate', () => {
    const tls = new UpstreamTls({ ca: pki.ca.cert, cert: '', key: '', serverName: '' }, { watch: false });
    const last = (e: string): string => `No connection established. Last error: ${e}. Resolution note: `;
    expect(grpcJsTransportDetails(last('Error: self-signed certificate in certificate chain'), A, tls))
      .toBe(tlsFailure('self-signed certificate in certificate chain', A));
    expect(grpcJsTransportDetails(last('Failed to connect (2026-11-24T02:59:14.534Z)'), A, tls)).toBe(closedAfterHandshake(A, false));
    expect(grpcJsTransportDetails(last('connect ECONNREFUSED 10.0.0.7:8001'), A, tls)).toBe(last('connect ECONNREFUSED 10.0.0.7:8001'));
    expect(grpcJsTransportDetails(last('Failed to connect (2026-11-24T02:59:14.534Z)'), A, undefined)).toBe(last('Failed to connect (2026-11-24T02:59:14.534Z)'));
    expect(closedAfterHandshake(A, true)).toMatch(/Triton refused the client certificate \(the one in upstream\.tls\.cert;/);
  });
});
