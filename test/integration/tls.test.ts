// HTTPS in (docs/production.md#tls): server.tls.cert/key serve HTTPS on server.port to the reference
// backend, server.tls.clientCa requires client certificates, server.tls.minVersion/ciphers are
// honoured, and the certificate is reloaded when its directory changes — laid out as Kubernetes
// mounts a Secret (files that are symlinks through `..data`, swapped by one rename) — with no
// failed request during the swap, and a broken set keeps the old certificate and is counted.
import { execFile } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { Agent, request, type RequestOptions } from 'node:https';
import path from 'node:path';
import { connect as netConnect } from 'node:net';
import { connect } from 'node:tls';
import type { RunningGateway } from '../../gateway/gateway';
import { makePki, type Pem, type Pki, pemText } from '../support/certs';
import { gatewayFor } from '../support/gateway';
import { prometheusSamples } from '../support/prometheus';
import { handshake, secretDir } from '../support/tls';
import { Client, credentials } from '@grpc/grpc-js';
import { waitUntil } from '../support/wait';
import { CURL, needs, needsFile, OPENSSL } from '../support/tools';
import { curl, type CurlAnswer } from '../support/curl';

needsFile(OPENSSL()); // the certificates (test/support/certs.ts)

jest.setTimeout(60_000);

const INFER = '/v2/models/identity_fp32/infer';
const BODY = JSON.stringify({ inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 4], data: [1, 2, 3, 4] }] });
const RELOADS = 'tensorgate_tls_reloads_total';

let pki: Pki;
beforeAll(() => { pki = makePki(); });
afterAll(() => pki.remove());

const serialOf = (p: Pem): string => new X509Certificate(pemText(p.cert)).serialNumber;

interface Answer { readonly status: number; readonly body: string; readonly serial: string; readonly alpn: string | false | null }

/** One HTTPS request; `agent: false` makes a new connection for it. */
function httpsRequest(url: string, options: RequestOptions & { body?: string }): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = request(url, { method: options.body === undefined ? 'GET' : 'POST', ...options }, (res) => {
      const socket = res.socket as import('node:tls').TLSSocket;
      const serial = socket.getPeerCertificate().serialNumber;
      const alpn = socket.alpnProtocol;
      let body = '';
      res.setEncoding('utf8').on('data', (s: string) => { body += s; });
      res.on('end', () => resolve({ status: res.statusCode!, body, serial, alpn }));
      res.on('error', reject);
    });
    req.setTimeout(10_000, () => req.destroy(new Error('no answer within 10 s')));
    req.on('error', reject);
    req.end(options.body);
  });
}

async function reloads(gw: RunningGateway): Promise<{ success: number; failure: number }> {
  const m = prometheusSamples(await (await fetch(gw.metricsUrl!)).text());
  return { success: m.get(`${RELOADS}{result="ok"}`) ?? NaN, failure: m.get(`${RELOADS}{result="failed"}`) ?? NaN };
}

/** The reload counts once they reach `want` (a reload is seen only on /metrics), or after 10 s. */
async function reloadsReach(gw: RunningGateway, want: { success: number; failure: number }): Promise<{ success: number; failure: number }> {
  let r = await reloads(gw);
  for (const end = Date.now() + 10_000; (r.success < want.success || r.failure < want.failure) && Date.now() < end;) {
    await new Promise((resolve) => setTimeout(resolve, 25));
    r = await reloads(gw);
  }
  return r;
}

describe('HTTPS to the reference backend', () => {
  let gw: RunningGateway;
  beforeAll(async () => { gw = await gatewayFor(['--demo', '--tls-cert', pki.server.cert, '--tls-key', pki.server.key]); });
  afterAll(async () => { await gw?.close(); });

  test('an inference over HTTPS; ALPN chooses http/1.1 for a client offering only it (h2 is test/integration/h2.test.ts)', async () => {
    expect(gw.url).toMatch(/^https:\/\/127\.0\.0\.1:\d+$/);
    const r = await httpsRequest(`${gw.url}${INFER}`, { ca: pemText(pki.ca.cert), servername: 'localhost', body: BODY, agent: false, ALPNProtocols: ['http/1.1'] } as RequestOptions);
    expect(r.status).toBe(200);
    expect(JSON.parse(r.body).outputs[0].data).toEqual([1, 2, 3, 4]);
    expect(r.alpn).toBe('http/1.1');
    expect(r.serial).toBe(serialOf(pki.server));
    // A client offering a protocol the gateway does not speak is refused in the handshake
    // (RFC 7301 §3.2 no_application_protocol).
    await expect(handshake(gw.port, { ca: pemText(pki.ca.cert), ALPNProtocols: ['spdy/3'] })).rejects.toThrow(/no application protocol/i);
  });

  test('plain HTTP on the TLS port is not served', async () => {
    await expect(fetch(`http://127.0.0.1:${gw.port}/v2/health/live`)).rejects.toThrow();
  });

  test('the default minimum version refuses a TLS 1.1 client; TLS 1.2 and 1.3 are served', async () => {
    // SECLEVEL=0 lets this client's OpenSSL offer TLS 1.1 at all: the refusal is the gateway's alert.
    await expect(handshake(gw.port, { ca: pemText(pki.ca.cert), minVersion: 'TLSv1', maxVersion: 'TLSv1.1', ciphers: 'DEFAULT@SECLEVEL=0' }))
      .rejects.toMatchObject({ code: 'ERR_SSL_TLSV1_ALERT_PROTOCOL_VERSION' });
    expect((await handshake(gw.port, { ca: pemText(pki.ca.cert), maxVersion: 'TLSv1.2' })).protocol).toBe('TLSv1.2');
    expect((await handshake(gw.port, { ca: pemText(pki.ca.cert) })).protocol).toBe('TLSv1.3');
  });

  test('timeouts and the drain work over TLS: a slow head gets the 408 answer, a silent handshake is cut', async () => {
    const slow = await gatewayFor(['--demo', '--tls-cert', pki.server.cert, '--tls-key', pki.server.key, '--headers-timeout-ms', '300']);
    try {
      const text = await new Promise<string>((resolve, reject) => {
        const socket = connect({ host: '127.0.0.1', port: slow.port, ca: pemText(pki.ca.cert), servername: 'localhost' });
        let out = '';
        socket.on('secureConnect', () => socket.write('GET /v2/health/live HTTP/1.1\r\nHost: x\r\n'));
        socket.setEncoding('latin1').on('data', (d: string) => { out += d; });
        socket.on('close', () => resolve(out));
        socket.on('error', reject);
        socket.setTimeout(10_000, () => socket.destroy(new Error('not closed within 10 s')));
      });
      expect(text).toMatch(/^HTTP\/1\.1 408 /);
      expect(text).toContain('x-tensorgate-error: GW_ERR_REQUEST_TIMEOUT');
      // A TCP connection that never starts its handshake is cut at the same bound. Regression: the
      // handshake timeout reached the clientError handler, which wrote an HTTP 400 into a socket
      // without a TLS session and waited for it to flush, forever.
      const silent = await new Promise<number>((resolve, reject) => {
        const t0 = Date.now();
        const socket = netConnect({ host: '127.0.0.1', port: slow.port });
        socket.on('close', () => resolve(Date.now() - t0));
        socket.on('error', () => undefined);
        socket.setTimeout(10_000, () => { socket.destroy(); reject(new Error('a silent connection was still open after 10 s')); });
      });
      expect(silent).toBeGreaterThanOrEqual(250);
    } finally {
      // An idle keep-alive TLS connection is closed at once by the drain.
      const agent = new Agent({ keepAlive: true, ca: pemText(pki.ca.cert) });
      expect((await httpsRequest(`${slow.url}/v2/health/live`, { agent, servername: 'localhost' })).status).toBe(200);
      const t0 = Date.now();
      expect(await slow.close(30_000)).toEqual({ requestsCut: 0 });
      expect(Date.now() - t0).toBeLessThan(20_000);
      agent.destroy();
    }
  });
});

test('the drain deadline also cuts a connection that never finished its TLS handshake', async () => {
  const gw = await gatewayFor(['--demo', '--tls-cert', pki.server.cert, '--tls-key', pki.server.key]); // handshakes bounded at 10 s
  const socket = netConnect({ host: '127.0.0.1', port: gw.port });
  socket.on('error', () => undefined);
  const closed = new Promise<void>((resolve) => socket.on('close', () => resolve()));
  await new Promise<void>((resolve) => socket.once('connect', () => resolve()));
  const t0 = Date.now();
  try {
    expect(await gw.close(200)).toEqual({ requestsCut: 0 });
    expect(Date.now() - t0).toBeLessThan(5000);
    await closed;
  } finally {
    socket.destroy();
  }
});

describe('server.tls.minVersion and server.tls.ciphers', () => {
  test('TLSv1.3 refuses a TLS 1.2 client; a cipher list leaves only its ciphers', async () => {
    const gw = await gatewayFor(['--demo', '--tls-cert', pki.server.cert, '--tls-key', pki.server.key, '--tls-min-version', 'TLSv1.3']);
    try {
      await expect(handshake(gw.port, { ca: pemText(pki.ca.cert), maxVersion: 'TLSv1.2' })).rejects.toMatchObject({ code: 'ERR_SSL_TLSV1_ALERT_PROTOCOL_VERSION' });
      expect((await handshake(gw.port, { ca: pemText(pki.ca.cert) })).protocol).toBe('TLSv1.3');
    } finally {
      await gw.close();
    }
    const only = await gatewayFor(['--demo', '--tls-cert', pki.server.cert, '--tls-key', pki.server.key, '--tls-ciphers', 'ECDHE-ECDSA-AES128-GCM-SHA256']);
    try {
      const ca = pemText(pki.ca.cert);
      expect((await handshake(only.port, { ca, maxVersion: 'TLSv1.2' })).cipher).toBe('ECDHE-ECDSA-AES128-GCM-SHA256');
      await expect(handshake(only.port, { ca, maxVersion: 'TLSv1.2', ciphers: 'ECDHE-ECDSA-AES256-GCM-SHA384' })).rejects.toThrow(/handshake failure/i);
    } finally {
      await only.close();
    }
  });
});

// Suites with RSA key exchange need an RSA certificate to be chosen at all: with the EC one they
// would fail whatever the list, so these run on an RSA certificate, and a gateway that names them
// in server.tls.ciphers shows the clients below do get them where they are allowed.
describe('the default cipher list: forward secrecy only at TLS 1.2, TLS 1.3 as is', () => {
  const NOT_FORWARD_SECRET = ['AES128-SHA', 'AES256-SHA256', 'AES128-GCM-SHA256'];
  let rsa: Pem;
  let gw: RunningGateway;
  let open: RunningGateway;
  beforeAll(async () => {
    rsa = pki.issue('server-rsa', { rsa: true });
    gw = await gatewayFor(['--demo', '--tls-cert', rsa.cert, '--tls-key', rsa.key]);
    open = await gatewayFor(['--demo', '--tls-cert', rsa.cert, '--tls-key', rsa.key, '--tls-ciphers', `${NOT_FORWARD_SECRET.join(':')}:ECDHE-RSA-AES128-GCM-SHA256`]);
  });
  afterAll(async () => {
    await gw?.close();
    await open?.close();
  });

  needs(CURL()).test.each(NOT_FORWARD_SECRET)('a TLS 1.2 client offering only %s: handshake refused (node:tls, openssl s_client, curl)', async (cipher) => {
    const ca = pemText(pki.ca.cert);
    await expect(handshake(gw.port, { ca, maxVersion: 'TLSv1.2', ciphers: cipher })).rejects.toThrow(/handshake failure/i);
    expect((await handshake(open.port, { ca, maxVersion: 'TLSv1.2', ciphers: cipher })).cipher).toBe(cipher);
    const sClient = (port: number): Promise<{ code: number; out: string }> => run('openssl',
      ['s_client', '-connect', `127.0.0.1:${port}`, '-tls1_2', '-cipher', cipher, '-CAfile', pki.ca.cert, '-servername', 'localhost']);
    const refused = await sClient(gw.port);
    expect([refused.code, refused.out]).toEqual([1, expect.stringMatching(/handshake failure/)]);
    expect((await sClient(open.port)).out).toMatch(new RegExp(`Cipher is ${cipher}\\b`));
    const viaCurl = (port: number): Promise<CurlAnswer> => curl('--cacert', pki.ca.cert, '--tlsv1.2', '--tls-max', '1.2', '--ciphers', cipher, `https://localhost:${port}/v2/health/live`);
    expect((await viaCurl(gw.port)).exit).toBe(35); // CURLE_SSL_CONNECT_ERROR
    expect(await viaCurl(open.port)).toMatchObject({ exit: 0, status: 200 });
  });

  needs(CURL()).test('ECDHE suites with AES-GCM and ChaCha20-Poly1305 at TLS 1.2, and TLS 1.3, are served', async () => {
    const ca = pemText(pki.ca.cert);
    for (const cipher of ['ECDHE-RSA-AES128-GCM-SHA256', 'ECDHE-RSA-AES256-GCM-SHA384', 'ECDHE-RSA-CHACHA20-POLY1305']) {
      expect((await handshake(gw.port, { ca, maxVersion: 'TLSv1.2', ciphers: cipher })).cipher).toBe(cipher);
    }
    expect(await handshake(gw.port, { ca })).toMatchObject({ protocol: 'TLSv1.3', cipher: 'TLS_AES_256_GCM_SHA384' });
    const viaCurl = await curl('--cacert', pki.ca.cert, '--tlsv1.2', '--tls-max', '1.2', '--ciphers', 'ECDHE-RSA-AES128-GCM-SHA256',
      `https://localhost:${gw.port}/v2/health/live`);
    expect(viaCurl).toMatchObject({ exit: 0, status: 200 });
    const sClient = await run('openssl', ['s_client', '-connect', `127.0.0.1:${gw.port}`, '-tls1_2', '-CAfile', pki.ca.cert, '-servername', 'localhost']);
    expect(sClient.out).toMatch(/Cipher is ECDHE-RSA-(AES256-GCM-SHA384|AES128-GCM-SHA256|CHACHA20-POLY1305)\b/);
  });
});

/** Runs a command line client with no input; its exit code and stdout plus stderr. */
function run(cmd: string, args: readonly string[]): Promise<{ code: number; out: string }> {
  return new Promise((resolve) => {
    const child = execFile(cmd, args, { timeout: 20_000 }, (err, stdout, stderr) => {
      resolve({ code: err === null ? 0 : typeof err.code === 'number' ? err.code : -1, out: `${stdout}${stderr}` });
    });
    child.stdin?.end();
  });
}

describe('server.tls.clientCa: client certificates required', () => {
  let gw: RunningGateway;
  beforeAll(async () => {
    gw = await gatewayFor(['--demo', '--tls-cert', pki.server.cert, '--tls-key', pki.server.key, '--tls-client-ca', pki.ca.cert]);
  });
  afterAll(async () => { await gw?.close(); });
  const base = (): RequestOptions => ({ ca: pemText(pki.ca.cert), servername: 'localhost', agent: false });

  test('a certificate the CA signed is served', async () => {
    const r = await httpsRequest(`${gw.url}${INFER}`, { ...base(), cert: pemText(pki.client.cert), key: pemText(pki.client.key), body: BODY });
    expect(r.status).toBe(200);
  });

  // The client reads the server's alert, or a reset when the close overtakes it (the server
  // closes with the client's last flight unread). TLS 1.3 checks the client's certificate after
  // the client has sent its Finished and its request; TLS 1.2 inside the handshake, so a 1.2
  // handshake that fails proves the refusal came before any HTTP.
  const RESET = ['ECONNRESET'];

  test('no certificate: the handshake is refused (TLS 1.3 and 1.2)', async () => {
    const e = await httpsRequest(`${gw.url}${INFER}`, { ...base(), body: BODY }).then(() => undefined, (err: NodeJS.ErrnoException) => err.code);
    expect([...RESET, 'ERR_SSL_TLSV13_ALERT_CERTIFICATE_REQUIRED']).toContain(e);
    const e12 = await handshake(gw.port, { ca: pemText(pki.ca.cert), maxVersion: 'TLSv1.2' }).then(() => undefined, (err: NodeJS.ErrnoException) => err.code);
    expect([...RESET, 'ERR_SSL_SSL/TLS_ALERT_HANDSHAKE_FAILURE']).toContain(e12);
  });

  test('a certificate of another CA: refused (TLS 1.3 and 1.2)', async () => {
    const wrong = { cert: pemText(pki.otherCa.cert), key: pemText(pki.otherCa.key) };
    const e = await httpsRequest(`${gw.url}${INFER}`, { ...base(), ...wrong, body: BODY }).then(() => undefined, (err: NodeJS.ErrnoException) => err.code);
    expect([...RESET, 'ERR_SSL_TLSV1_ALERT_UNKNOWN_CA']).toContain(e);
    const e12 = await handshake(gw.port, { ca: pemText(pki.ca.cert), maxVersion: 'TLSv1.2', ...wrong }).then(() => undefined, (err: NodeJS.ErrnoException) => err.code);
    expect([...RESET, 'ERR_SSL_TLSV1_ALERT_UNKNOWN_CA']).toContain(e12);
  });

  test('refused handshakes leave nothing open: the drain ends at once, long before its deadline', async () => {
    // Each refused handshake's socket is closed when it is refused, not held until the deadline.
    const t0 = Date.now();
    expect(await gw.close(30_000)).toEqual({ requestsCut: 0 });
    expect(Date.now() - t0).toBeLessThan(10_000);
  });
});

describe('the gRPC port over TLS (server.grpc.enabled with server.tls.cert)', () => {
  test('h2 by ALPN: a grpc-js call with the CA answered, a client offering only http/1.1 refused; a certificate reload reaches the port', async () => {
    const secret = secretDir(pki.server.cert, pki.server.key);
    const renewed = pki.issue('server-renewed-grpc');
    const gw = await gatewayFor(['--demo', '--tls-cert', secret.cert, '--tls-key', secret.key, '--grpc-port-enabled', '--grpc-port', '0']);
    try {
      const port = gw.grpcPort!;
      const ca = pemText(pki.ca.cert);
      const first = await handshake(port, { ca, ALPNProtocols: ['h2'] });
      expect(first.serial).toBe(serialOf(pki.server));
      await expect(handshake(port, { ca, ALPNProtocols: ['http/1.1'] })).rejects.toThrow(/no application protocol/i);
      const client = new Client(`localhost:${port}`, credentials.createSsl(Buffer.from(ca)));
      try {
        const status = await new Promise<number>((resolve, reject) => {
          client.makeUnaryRequest('/grpc.health.v1.Health/Check', (m: Buffer) => m, (b: Buffer) => b, Buffer.alloc(0), (err, res) => {
            if (err) reject(err);
            else resolve(res![1]!); // HealthCheckResponse { status = 1 }: 08 01
          });
        });
        expect(status).toBe(1);
      } finally {
        client.close();
      }
      secret.publish(renewed.cert, renewed.key);
      expect(await reloadsReach(gw, { success: 1, failure: 0 })).toEqual({ success: 1, failure: 0 });
      expect((await handshake(port, { ca, ALPNProtocols: ['h2'] })).serial).toBe(serialOf(renewed));
    } finally {
      await gw.close();
      secret.remove();
    }
  });
});

describe('certificate reload', () => {
  test('tensorgate_tls_certificate_expiry: seconds until the serving certificate\'s notAfter, the reloaded one after a swap; absent without TLS', async () => {
    const EXPIRY = 'tensorgate_tls_certificate_expiry{certificate="server"}';
    const expiry = async (gw: RunningGateway): Promise<number | undefined> => prometheusSamples(await (await fetch(gw.metricsUrl!)).text()).get(EXPIRY);
    const notAfter = (p: Pem): number => new X509Certificate(pemText(p.cert)).validToDate.getTime();
    const secret = secretDir(pki.server.cert, pki.server.key);
    const soon = pki.issue('server-expiring', { days: 3 });
    const gw = await gatewayFor(['--demo', '--tls-cert', secret.cert, '--tls-key', secret.key]);
    try {
      const first = (await expiry(gw))!;
      expect(Math.abs(first - (notAfter(pki.server) - Date.now()) / 1000)).toBeLessThan(5);
      expect(first).toBeGreaterThan(29 * 86_400);
      secret.publish(soon.cert, soon.key);
      expect(await reloadsReach(gw, { success: 1, failure: 0 })).toEqual({ success: 1, failure: 0 });
      const after = (await expiry(gw))!;
      expect(Math.abs(after - (notAfter(soon) - Date.now()) / 1000)).toBeLessThan(5);
      expect(after).toBeLessThan(3 * 86_400 + 60);
    } finally {
      await gw.close();
      secret.remove();
    }
    const plain = await gatewayFor(['--demo']);
    try {
      const text = await (await fetch(plain.metricsUrl!)).text();
      expect(text).toContain('# HELP tensorgate_tls_certificate_expiry ');
      expect(text).not.toMatch(/^tensorgate_tls_certificate_expiry/m);
    } finally {
      await plain.close();
    }
  });

  test('a Secret-style swap during load: no failed request, new connections get the new certificate', async () => {
    const secret = secretDir(pki.server.cert, pki.server.key);
    const next = pki.issue('server-next');
    const gw = await gatewayFor(['--demo', '--tls-cert', secret.cert, '--tls-key', secret.key]);
    const ca = pemText(pki.ca.cert);
    const keepAlive = new Agent({ keepAlive: true, maxSockets: 2, ca });
    let running = true;
    let served = 0;
    const failures: string[] = [];
    const seen = new Set<string>();
    // Two keep-alive loops (connections opened before the swap keep their context) and two that
    // open a connection per request (each a handshake, racing the swap).
    const loops = [keepAlive, keepAlive, false, false].map(async (agent) => {
      while (running) {
        try {
          const r = await httpsRequest(`${gw.url}${INFER}`, { agent, ca, servername: 'localhost', body: BODY });
          if (r.status === 200) served++;
          else failures.push(`status ${r.status}: ${r.body}`);
          seen.add(r.serial);
        } catch (err) {
          failures.push(String(err));
        }
      }
    });
    try {
      await waitUntil(() => served >= 20, '20 requests served before the swap', 20_000);
      expect(await reloads(gw)).toEqual({ success: 0, failure: 0 });
      secret.publish(next.cert, next.key);
      const want = serialOf(next);
      let got = '';
      const until = Date.now() + 15_000;
      while (got !== want && Date.now() < until) got = (await handshake(gw.port, { ca })).serial;
      expect(got).toBe(want);
      const after = served;
      await waitUntil(() => served >= after + 20, '20 more requests after the swap', 20_000);
      expect(seen).toContain(want);
      expect(await reloads(gw)).toEqual({ success: 1, failure: 0 });
    } finally {
      running = false;
      await Promise.all(loops);
      keepAlive.destroy();
      await gw.close();
      secret.remove();
    }
    expect(failures).toEqual([]);
  });

  test('a broken set (key of another certificate, not PEM) keeps the old certificate and is counted; a good one is taken again', async () => {
    const secret = secretDir(pki.server.cert, pki.server.key);
    const gw = await gatewayFor(['--demo', '--tls-cert', secret.cert, '--tls-key', secret.key]);
    const ca = pemText(pki.ca.cert);
    try {
      const other = pki.issue('server-other');
      secret.publish(other.cert, pki.server.key); // a new certificate with the old key: they do not match
      expect(await reloadsReach(gw, { success: 0, failure: 1 })).toEqual({ success: 0, failure: 1 });
      expect((await handshake(gw.port, { ca })).serial).toBe(serialOf(pki.server));
      const garbage = path.join(secret.dir, 'garbage.pem');
      writeFileSync(garbage, 'not a certificate\n');
      secret.publish(garbage, other.key);
      expect(await reloadsReach(gw, { success: 0, failure: 2 })).toEqual({ success: 0, failure: 2 });
      expect((await httpsRequest(`${gw.url}${INFER}`, { agent: false, ca, servername: 'localhost', body: BODY })).serial).toBe(serialOf(pki.server));
      secret.publish(other.cert, other.key);
      expect(await reloadsReach(gw, { success: 1, failure: 2 })).toEqual({ success: 1, failure: 2 });
      expect((await handshake(gw.port, { ca })).serial).toBe(serialOf(other));
    } finally {
      await gw.close();
      secret.remove();
    }
  });
});
