// Triton's queue per model read from its metrics page (upstream/backends/queue-metrics.ts): the
// lines Triton serves (test/triton/FACTS.md), summed over versions per model; other families,
// comments and malformed lines skipped; a page served over HTTP, and one that cannot be read.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { modelKey } from '../../../../gateway/upstream/backends/backend';
import { MAX_METRICS_BYTES, pendingByModel, readPending, withPort } from '../../../../gateway/upstream/backends/queue-metrics';

const PAGE = [
  '# HELP nv_inference_pending_request_count Instantaneous number of pending requests awaiting execution per-model.',
  '# TYPE nv_inference_pending_request_count gauge',
  'nv_inference_pending_request_count{model="slow",version="1"} 2',
  'nv_inference_pending_request_count{model="slow",version="2"} 1',
  'nv_inference_pending_request_count{model="simple",version="1"} 0',
  'nv_inference_queue_duration_us{model="slow",version="1"} 9024338',
  'nv_inference_pending_request_count_total{model="decoy",version="1"} 9',
  'nv_inference_pending_request_count{version="1"} 5',
  'nv_inference_pending_request_count{model="odd \\"name\\"",version="1"} nope',
  '',
].join('\n');

test('pending requests by model and by model and version; other lines skipped', () => {
  expect(Object.fromEntries(pendingByModel(PAGE))).toEqual({
    [modelKey('slow')]: 3, [modelKey('slow', '1')]: 2, [modelKey('slow', '2')]: 1,
    [modelKey('simple')]: 0, [modelKey('simple', '1')]: 0,
  });
  expect(pendingByModel('').size).toBe(0);
});

test('the metrics address is the backend\'s host with the metrics port', () => {
  expect(withPort('10.0.0.7:8001', 8002)).toBe('10.0.0.7:8002');
  expect(withPort('[fd00::1]:8001', 8002)).toBe('[fd00::1]:8002');
});

describe('over HTTP', () => {
  let server: Server;
  let body = PAGE;
  let status = 200;
  beforeAll(async () => {
    server = createServer((req, res) => {
      res.writeHead(req.url === '/metrics' ? status : 404);
      res.end(body);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  });
  afterAll(async () => {
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });

  test('a page is read; a failed, non-200 or oversized page is undefined', async () => {
    const port = (server.address() as AddressInfo).port;
    expect((await readPending('127.0.0.1:8001', port, 1000))?.get(modelKey('slow'))).toBe(3);
    status = 500;
    expect(await readPending('127.0.0.1:8001', port, 1000)).toBeUndefined();
    status = 200;
    body = 'x'.repeat(MAX_METRICS_BYTES + 1);
    expect(await readPending('127.0.0.1:8001', port, 1000)).toBeUndefined();
    body = PAGE;
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const gone = (closed.address() as AddressInfo).port;
    await new Promise<void>((resolve) => closed.close(() => resolve()));
    expect(await readPending('127.0.0.1:8001', gone, 1000)).toBeUndefined();
  });
});
