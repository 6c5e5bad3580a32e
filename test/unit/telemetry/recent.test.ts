// The ring of recent requests behind /dashboard (telemetry/recent.ts): sampling by time, slots
// overwritten in place, lookups by body id and x-request-id, and the access log's numbers; and
// the classification of failed TLS handshakes (telemetry/handshake.ts).
import { runInNewContext } from 'node:vm';
import { HOPS, Ledger } from '../../../gateway/infer/ledger';
import { DASHBOARD_JS } from '../../../gateway/telemetry/dashboard-page';
import { handshakeFailure } from '../../../gateway/telemetry/handshake';
import { RECENT_ID_CHARS, RecentRequests } from '../../../gateway/telemetry/recent';
import type { RequestRecord } from '../../../gateway/telemetry/record';

function record(startNs: number, over: Partial<RequestRecord> = {}): RequestRecord {
  return { route: 'infer', method: 'POST', status: 200, startNs, endNs: startNs + 2_500_000, declaredBytes: 100, ...over };
}

describe('RecentRequests', () => {
  test('takes one request per 1/perSecond s, by the requests\' start times', () => {
    const ring = new RecentRequests(8, 10); // one per 100 ms
    const taken = [0, 50_000_000, 99_999_999, 100_000_000, 150_000_000, 250_000_000].map((t) => ring.take(t + 1_000_000_000));
    expect(taken).toEqual([true, false, false, true, false, true]);
  });

  test('a size of 0 takes nothing', () => {
    const ring = new RecentRequests(0, 10);
    expect(ring.take(1)).toBe(false);
    expect(ring.list()).toEqual([]);
  });

  test('overwrites the oldest slot in place; newest first; since and limit', () => {
    const ring = new RecentRequests(3, 1000);
    for (let i = 1; i <= 5; i++) ring.put(record(i * 1_000_000, { status: 200 + i }), undefined);
    expect(ring.list().map((r) => [r.seq, r.status])).toEqual([[5, 205], [4, 204], [3, 203]]);
    expect(ring.list({ since: 3 }).map((r) => r.seq)).toEqual([5, 4]);
    expect(ring.list({ limit: 1 }).map((r) => r.seq)).toEqual([5]);
    expect(ring.list({ since: 9 })).toEqual([]);
  });

  test('a slot keeps nothing of the request it held before (strings and hops)', () => {
    const ring = new RecentRequests(1, 1000);
    const ledger = new Ledger();
    ledger.startedAt('triton', 2);
    ledger.endedAt('triton', 5);
    ring.put(record(1, { model: 'm', encoding: 'binary', errorCode: 'GW_ERR_X', requestId: 'a', ledger }), 'h');
    ring.put(record(1), undefined);
    const [r] = ring.list();
    expect(r).toEqual(expect.objectContaining({ seq: 2, route: 'infer', model: undefined, encoding_in: undefined, error_code: undefined, id: undefined,
      x_request_id: undefined, hops: [], bytes_copied: undefined, copies: undefined }));
  });

  test('finds a request by its body id or its x-request-id; ids are cut to RECENT_ID_CHARS', () => {
    const ring = new RecentRequests(4, 1000);
    ring.put(record(1, { requestId: 'body-1' }), undefined);
    ring.put(record(2), 'header-2');
    ring.put(record(3, { requestId: 'x'.repeat(RECENT_ID_CHARS + 10) }), undefined);
    expect(ring.list({ id: 'body-1' }).map((r) => r.seq)).toEqual([1]);
    expect(ring.list({ id: 'header-2' }).map((r) => r.seq)).toEqual([2]);
    expect(ring.list({ id: 'x'.repeat(RECENT_ID_CHARS) }).map((r) => r.seq)).toEqual([3]);
    expect(ring.list({ id: 'nothing' })).toEqual([]);
  });

  test('hops, bytes and copies as the access log computes them', () => {
    const ring = new RecentRequests(2, 1000);
    const ledger = new Ledger();
    const start = 1_000_000_000;
    HOPS.forEach((hop, i) => {
      ledger.startedAt(hop, start + i * 1_000_123);
      ledger.endedAt(hop, start + i * 1_000_123 + 777_777);
      ledger.bytes(hop, 10 * (i + 1), 20 * (i + 1));
    });
    ledger.copied('decode', 64);
    ledger.copied('decode', 32);
    ledger.allocated('encode', 2);
    // bytes_out: what the answer handed to its connection (ingress/counted-response.ts), not a hop's.
    ring.put(record(start, { ledger, endNs: start + 9_000_000, bytesOut: 150 }), undefined);
    const [r] = ring.list();
    expect(r!.duration_ms).toBe(9);
    expect(r!.hops.map((h) => [h.hop, h.at_ms, h.ms])).toEqual(HOPS.map((hop, i) => [hop, Number(i * 1_000_123) / 1e6, 0.777777]));
    expect(r!.hops.find((h) => h.hop === 'decode')).toEqual(expect.objectContaining({ bytes_copied: 96, copies: 2 }));
    expect(r!.hops.find((h) => h.hop === 'encode')!.allocations).toBe(2);
    expect([r!.bytes_in, r!.bytes_out, r!.bytes_copied, r!.copies]).toEqual([10, 150, 96, 2]);
  });

  test('a hop that did not run is left out; a gRPC call keeps its own byte counts', () => {
    const ring = new RecentRequests(1, 1000);
    ring.put(record(1, { rpc: 'grpc', bytesIn: 5, bytesOut: 7, grpcStatus: 0, backend: '10.0.0.1:8001' }), undefined);
    const [r] = ring.list();
    expect([r!.hops, r!.bytes_in, r!.bytes_out, r!.grpc_status, r!.backend, r!.rpc]).toEqual([[], 5, 7, 0, '10.0.0.1:8001', 'grpc']);
  });
});

describe('the page script', () => {
  test('parses, and writes no markup from data (no innerHTML, no insertAdjacentHTML, no document.write)', () => {
    expect(() => runInNewContext(`(function () { return function () {${DASHBOARD_JS}}; })`)).not.toThrow();
    expect(DASHBOARD_JS).not.toMatch(/innerHTML|outerHTML|insertAdjacentHTML|document\.write|eval\(|new Function/);
  });
});

describe('handshakeFailure', () => {
  test.each([
    ['ERR_TLS_HANDSHAKE_TIMEOUT', 'timeout'],
    ['ECONNRESET', 'reset'],
    ['ERR_SSL_TLSV1_ALERT_UNKNOWN_CA', 'certificate'],
    ['ERR_SSL_SSLV3_ALERT_CERTIFICATE_EXPIRED', 'certificate'],
    ['ERR_SSL_SSLV3_ALERT_BAD_CERTIFICATE', 'certificate'],
    ['ERR_SSL_PEER_DID_NOT_RETURN_A_CERTIFICATE', 'certificate'],
    ['ERR_SSL_HTTP_REQUEST', 'protocol'],
    ['ERR_SSL_WRONG_VERSION_NUMBER', 'protocol'],
    ['ERR_SSL_NO_SHARED_CIPHER', 'protocol'],
    ['ERR_SOMETHING', 'other'],
    [undefined, 'other'],
  ])('%s → %s', (code, failure) => {
    expect(handshakeFailure(code)).toBe(failure);
  });
});
