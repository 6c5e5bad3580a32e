// server.tls.*: the combinations and the files are checked when the configuration is loaded, so a
// gateway (or a cluster's primary, before it forks) refuses to start with the key and file named.
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { ConfigError, loadConfig } from '../../../gateway/config/load';
import { makePki, type Pki } from '../../support/certs';
import { needsFile, OPENSSL } from '../../support/tools';

needsFile(OPENSSL()); // the certificates (test/support/certs.ts)

let pki: Pki;
beforeAll(() => { pki = makePki(); });
afterAll(() => pki.remove());

function problems(...argv: string[]): readonly string[] {
  try {
    loadConfig({ argv: ['--demo', ...argv], env: {} });
  } catch (err) {
    expect((err as ConfigError).code).toBe('GW_ERR_CONFIG_INVALID');
    return (err as ConfigError).problems;
  }
  return [];
}

test('a certificate, its key and a client CA load, from flags or the environment', () => {
  expect(problems('--tls-cert', pki.server.cert, '--tls-key', pki.server.key, '--tls-client-ca', pki.ca.cert)).toEqual([]);
  const r = loadConfig({ argv: ['--demo'], env: { TENSORGATE_SERVER_TLS_CERT: pki.server.cert, TENSORGATE_SERVER_TLS_KEY: pki.server.key } });
  expect(!r.help && r.config.server.tls).toEqual({ cert: pki.server.cert, key: pki.server.key, clientCa: '', minVersion: 'TLSv1.2', ciphers: '' });
});

test('incomplete combinations are configuration errors', () => {
  expect(problems('--tls-cert', pki.server.cert)).toEqual(['server.tls.key: required when server.tls.cert is set']);
  expect(problems('--tls-key', pki.server.key)).toEqual(['server.tls.cert: required when server.tls.key is set']);
  expect(problems('--tls-client-ca', pki.ca.cert, '--tls-ciphers', 'ECDHE-ECDSA-AES128-GCM-SHA256')).toEqual([
    'server.tls.clientCa: needs server.tls.cert and server.tls.key (the gateway serves plain HTTP without them)',
    'server.tls.ciphers: needs server.tls.cert and server.tls.key (the gateway serves plain HTTP without them)',
  ]);
  expect(problems('--tls-cert', pki.server.cert, '--tls-key', pki.server.key, '--tls-min-version', 'TLSv1.1'))
    .toEqual(['--tls-min-version: must be one of TLSv1.2, TLSv1.3, got "TLSv1.1"']);
});

test('unreadable files, no PEM, a key of another certificate, an unknown cipher: each named', () => {
  const missing = path.join(pki.dir, 'missing.crt');
  expect(problems('--tls-cert', missing, '--tls-key', pki.server.key)).toEqual([
    `server.tls.cert: cannot read ${missing} (ENOENT: no such file); give a readable file (--tls-cert)`,
  ]);
  const junk = path.join(pki.dir, 'junk.pem');
  writeFileSync(junk, 'not PEM\n');
  expect(problems('--tls-cert', junk, '--tls-key', pki.server.key)).toEqual([expect.stringMatching(/^server\.tls\.cert: .*junk\.pem holds no PEM certificate/)]);
  expect(problems('--tls-cert', pki.server.cert, '--tls-key', junk)).toEqual([expect.stringMatching(/^server\.tls\.key: .*junk\.pem holds no unencrypted PEM private key/)]);
  expect(problems('--tls-cert', pki.server.cert, '--tls-key', pki.client.key))
    .toEqual([`server.tls.key: the key in ${pki.client.key} does not belong to the certificate in ${pki.server.cert} (server.tls.cert)`]);
  expect(problems('--tls-cert', pki.server.cert, '--tls-key', pki.server.key, '--tls-client-ca', junk))
    .toEqual([expect.stringMatching(/^server\.tls\.clientCa: .*junk\.pem holds no PEM certificate/)]);
  expect(problems('--tls-cert', pki.server.cert, '--tls-key', pki.server.key, '--tls-ciphers', 'NO-SUCH-CIPHER'))
    .toEqual([expect.stringMatching(/^server\.tls\.ciphers: OpenSSL refused the TLS settings: .*no cipher match/i)]);
});
