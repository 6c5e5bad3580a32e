// upstream.tls against a backend that serves no TLS (the reference backend, plaintext gRPC, as a
// Triton started without --grpc-use-ssl): every plane answers 503 naming the handshake's failure.
// The TLS and mTLS cases against real Triton are test/conformance/upstream-tls.test.ts.
import { createServer } from 'node:http2';
import type { AddressInfo } from 'node:net';
import { Client, credentials, type StatusObject } from '@grpc/grpc-js';
import type { RunningGateway } from '../../gateway/gateway';
import { inferenceService } from '../../proto/services';
import { type ReferenceBackend, startReferenceBackend } from '../../gateway/reference-backend/server';
import { makePki, type Pki } from '../support/certs';
import { gatewayFor } from '../support/gateway';
import { needsFile, OPENSSL } from '../support/tools';

needsFile(OPENSSL()); // the certificates (test/support/certs.ts)

let pki: Pki;
let backend: ReferenceBackend;
beforeAll(async () => {
  pki = makePki();
  backend = await startReferenceBackend({ host: '127.0.0.1' });
});
afterAll(async () => {
  await backend?.close(1000);
  pki?.remove();
});

test.each(['h2', 'grpc-js'])('TLS to a plaintext backend (%s data plane): 503 "wrong version number" on infer and control calls', async (transport) => {
  const gw: RunningGateway = await gatewayFor(['--backend', backend.address, '--transport', transport, '--unhealthy-threshold', '100',
    '--upstream-tls-ca', pki.ca.cert]);
  try {
    const error = { error: `upstream unavailable: TLS handshake with ${backend.address} failed: wrong version number (is Triton's gRPC serving TLS? tritonserver --grpc-use-ssl)` };
    const infer = await fetch(`${gw.url}/v2/models/simple/infer`, { method: 'POST', body: '{"inputs":[]}' });
    expect([infer.status, infer.headers.get('x-tensorgate-error'), await infer.json()]).toEqual([503, 'GW_ERR_UPSTREAM_UNAVAILABLE', error]);
    const meta = await fetch(`${gw.url}/v2/models/simple`);
    expect([meta.status, meta.headers.get('x-tensorgate-error'), await meta.json()]).toEqual([503, 'GW_ERR_UPSTREAM_UNAVAILABLE', error]);
    expect((await fetch(`${gw.url}/readyz`)).status).toBe(503);
    // The gRPC pass-through's calls use the same TLS sessions (upstream/connections/h2-sessions.ts).
    const h2c = createServer();
    h2c.on('stream', (stream, headers) => gw.grpc(stream, headers));
    await new Promise<void>((resolve) => h2c.listen(0, '127.0.0.1', resolve));
    const client = new Client(`127.0.0.1:${(h2c.address() as AddressInfo).port}`, credentials.createInsecure());
    try {
      const m = inferenceService.ServerMetadata;
      const status = await new Promise<StatusObject>((resolve) => {
        client.makeUnaryRequest(m.path, m.requestSerialize, m.responseDeserialize, {}, () => undefined).on('status', resolve);
      });
      expect([status.code, status.details, status.metadata.get('x-tensorgate-error')]).toEqual([14, error.error, ['GW_ERR_UPSTREAM_UNAVAILABLE']]);
    } finally {
      client.close();
      await new Promise<void>((resolve) => h2c.close(() => resolve()));
    }
  } finally {
    await gw.close();
  }
}, 30_000);
