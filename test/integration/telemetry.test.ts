// Per-hop metrics, Server-Timing, CORS and traces, through the gateway and the reference backend.
import { createServer, type Server } from 'node:http';
import { connect } from 'node:http2';
import type { AddressInfo } from 'node:net';
import type { RunningGateway } from '../../gateway/gateway';
import { HOPS } from '../../gateway/infer/ledger';
import { METRICS, prometheusName, seededAttributes } from '../../gateway/telemetry/metrics';
import { gatewayFor } from '../support/gateway';
import { RecordTap } from '../support/records';
import { binaryBody, send } from '../support/http';
import { prometheusSamples } from '../support/prometheus';
import { int32 } from '../support/int32';
import { inference } from '../../proto/services';

const simpleBinary = () => binaryBody({
  inputs: [
    { name: 'INPUT0', datatype: 'INT32', shape: [1, 16], parameters: { binary_data_size: 64 } },
    { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], parameters: { binary_data_size: 64 } },
  ],
}, int32(16), int32(16));
const simpleJson = JSON.stringify({
  inputs: [
    { name: 'INPUT0', datatype: 'INT32', shape: [1, 16], data: Array(16).fill(1) },
    { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], data: Array(16).fill(2) },
  ],
});

/** The Prometheus text, and its samples as "name{labels}" → value. */
async function scrape(url: string): Promise<{ text: string; samples: Map<string, number> }> {
  const text = await (await fetch(url)).text();
  return { text, samples: prometheusSamples(text) };
}

describe('metrics', () => {
  let gw: RunningGateway;
  const tap = new RecordTap();
  const records = tap.records;
  beforeAll(async () => {
    // Buffered, so that the binary requests copy their payload (cut through they copy nothing).
    gw = await gatewayFor(['--demo', '--cut-through=false']);
    tap.start();
  });
  afterAll(async () => {
    tap.stop();
    await gw.close();
  });

  test('counts, bytes and copies per hop and encoding match the ledger', async () => {
    const n = tap.mark();
    for (let i = 0; i < 2; i++) {
      const { body, headers } = simpleBinary();
      expect((await send(`${gw.url}/v2/models/simple/infer`, { body, headers })).status).toBe(200);
    }
    expect((await send(`${gw.url}/v2/models/simple/infer`, { body: simpleJson })).status).toBe(200);
    expect((await send(`${gw.url}/v2/models/no_such_model/infer`, { body: '{}' })).status).toBe(404);
    await tap.until(n + 4);

    const { text, samples: m } = await scrape(gw.metricsUrl!);
    // Every metric of a gateway process (the cluster primary's own appear with workers > 1 only).
    for (const spec of METRICS) if (!('primary' in spec)) expect(text).toContain(`# HELP ${prometheusName(spec)} `);
    expect(text).not.toContain('tensorgate_cluster_');

    const infer = records.filter((r) => r.route === 'infer' && r.model === 'simple' && r.encoding === 'binary');
    const copied = infer.reduce((a, r) => a + r.ledger!.hops.decode.bytesCopied, 0);
    expect(copied).toBe(256);
    expect(m.get('tensorgate_hop_copied_total{hop="decode",model="simple",encoding="binary"}')).toBe(copied);
    expect(m.get('http_server_request_duration_count{http_route="infer",http_request_method="POST",http_response_status_code="200",network_protocol_version="1.1",model="simple",encoding="binary"}')).toBe(2);
    expect(m.get('http_server_request_duration_count{http_route="infer",http_request_method="POST",http_response_status_code="200",network_protocol_version="1.1",model="simple",encoding="json"}')).toBe(1);
    expect(m.get('tensorgate_hop_bytes_total{hop="ingress_read",model="simple",encoding="binary",direction="in"}'))
      .toBe(infer.reduce((a, r) => a + r.ledger!.hops.ingress_read.bytesIn, 0));
    for (const hop of HOPS) {
      expect(m.get(`tensorgate_hop_duration_count{hop="${hop}",model="simple",encoding="binary"}`)).toBe(2);
    }
    // An unknown model name never becomes a label value of its own.
    expect(text).not.toContain('no_such_model');
    expect(m.get('http_server_request_duration_count{http_route="infer",http_request_method="POST",http_response_status_code="404",network_protocol_version="1.1",model="_unknown",encoding=""}')).toBe(1);
    expect(m.get('tensorgate_errors_total{error_code="GW_ERR_UPSTREAM_STATUS",http_route="infer"}')).toBe(1);
    expect(m.get('tensorgate_upstream_duration_count{rpc_method="ModelInfer",rpc_grpc_status_code="0",model="simple"}')).toBe(3);
    expect(m.get('tensorgate_requests_in_flight{http_route="infer"}')).toBe(0);
  });

  test('Server-Timing: every hop that ran, within the total', async () => {
    const r = await send(`${gw.url}/v2/models/simple/infer`, { body: simpleJson });
    const header = String(r.headers['server-timing']);
    const entries = header.split(', ').map((e) => {
      const m = /^([a-z_]+);dur=(\d+\.\d{3})$/.exec(e);
      expect(m).not.toBeNull();
      return [m![1]!, Number(m![2])] as const;
    });
    const names = entries.map(([n]) => n);
    expect(names).toEqual([...HOPS.filter((h) => h !== 'egress_write'), 'total']);
    const total = entries.find(([n]) => n === 'total')![1];
    const sum = entries.filter(([n]) => n !== 'total').reduce((a, [, d]) => a + d, 0);
    // JSON bodies are read, then decoded: the hops do not overlap.
    expect(sum).toBeLessThanOrEqual(total + 0.01);
  });
});

test('every declared metric is in the first scrape, seeded at 0; a counter that stays at 0 reads 0', async () => {
  const gw = await gatewayFor(['--demo']); // cut-through: binary requests copy nothing in decode
  const tap = new RecordTap();
  tap.start();
  try {
    const { text, samples: m } = await scrape(gw.metricsUrl!);
    for (const spec of METRICS) {
      const name = prometheusName(spec);
      if ('primary' in spec) {
        expect(text).not.toContain(name);
        continue;
      }
      expect(text).toContain(`# HELP ${name} `);
      for (const attributes of seededAttributes(spec)) {
        const labels = Object.entries(attributes).map(([k, v]) => `${k.replace(/\./g, '_')}="${String(v)}"`).join(',');
        const series = spec.kind === 'histogram' ? `${name}_count` : name;
        // The backend set's gauge is a live state from the start: the demo backend is ready; the
        // in-flight limits are the configuration's (limits.maxInFlightRequests, limits.maxInFlightBodyBytes).
        const limits: Record<string, number> = { tensorgate_requests_in_flight_limit: 2048, tensorgate_request_bytes_in_flight_limit: 1024 ** 3 };
        const zero = limits[name] ?? (name === 'tensorgate_upstream_backends' && attributes.state === 'ready' ? 1 : 0);
        expect([series, labels, m.get(labels === '' ? series : `${series}{${labels}}`)]).toEqual([series, labels, zero]);
      }
    }
    expect(m.get('tensorgate_hop_duration_bucket{hop="triton",le="+Inf"}')).toBe(0);
    expect(m.get('tensorgate_errors_total{error_code="GW_ERR_UPSTREAM_STATUS"}')).toBe(0);

    const { body, headers } = simpleBinary();
    const mark = tap.mark();
    expect((await send(`${gw.url}/v2/models/simple/infer`, { body, headers })).status).toBe(200);
    expect((await tap.after(mark)).ledger!.hops.decode.bytesCopied).toBe(0); // recorded in the metrics before it is published
    const after = (await scrape(gw.metricsUrl!)).samples;
    for (const hop of HOPS) expect([hop, after.get(`tensorgate_hop_copied_total{hop="${hop}",model="simple",encoding="binary"}`)]).toEqual([hop, 0]);
    expect(after.get('tensorgate_hop_allocations_total{hop="triton",model="simple",encoding="binary"}')).toBe(0);
    expect(after.get('tensorgate_hop_bytes_total{hop="ingress_read",model="simple",encoding="binary",direction="in"}')).toBe(body.length);
    expect(after.get('tensorgate_hop_copied_total{hop="decode"}')).toBe(0); // the seed stays, at 0
  } finally {
    tap.stop();
    await gw.close();
  }
});

test('Server-Timing can be switched off; CORS exposes it when on', async () => {
  const off = await gatewayFor(['--demo', '--server-timing=false']);
  try {
    const r = await send(`${off.url}/v2/models/simple/infer`, { body: simpleJson });
    expect(r.headers['server-timing']).toBeUndefined();
    expect(r.headers['access-control-allow-origin']).toBeUndefined();
  } finally {
    await off.close();
  }
  const cors = await gatewayFor(['--demo', '--cors-origin', 'https://app.example']);
  try {
    const r = await send(`${cors.url}/v2/models/simple/infer`, { body: simpleJson });
    expect(r.headers['access-control-allow-origin']).toBe('https://app.example');
    expect(r.headers['access-control-expose-headers']).toBe('Server-Timing, Inference-Header-Content-Length');
    const pre = await send(`${cors.url}/v2/models/simple/infer`, { method: 'OPTIONS', headers: { 'Access-Control-Request-Headers': 'inference-header-content-length' } });
    expect([pre.status, pre.headers['access-control-allow-methods'], pre.headers['access-control-allow-headers']])
      .toEqual([204, 'GET, POST', 'inference-header-content-length']);
  } finally {
    await cors.close();
  }
});

/** One unary gRPC call over h2c to `url`: its grpc-status. */
async function grpcCall(url: string, method: string, message: Uint8Array): Promise<string> {
  const session = connect(url);
  try {
    const framed = Buffer.alloc(5 + message.length);
    framed.writeUInt32BE(message.length, 1);
    framed.set(message, 5);
    const stream = session.request({ ':method': 'POST', ':path': `/inference.GRPCInferenceService/${method}`, 'content-type': 'application/grpc', te: 'trailers' });
    stream.end(framed);
    stream.resume();
    return await new Promise<string>((resolve, reject) => {
      let status = '';
      stream.on('response', (h) => { status = String(h['grpc-status'] ?? status); });
      stream.on('trailers', (t) => { status = String(t['grpc-status']); });
      stream.on('error', reject);
      stream.on('close', () => resolve(status));
    });
  } finally {
    session.close();
  }
}

test('a model known only from gRPC calls Triton answered with OK becomes a label value; a name Triton refused or only asked about does not', async () => {
  const gw = await gatewayFor(['--demo']);
  const tap = new RecordTap();
  tap.start();
  try {
    const n = tap.mark();
    const simple = inference.ModelInferRequest.encode({
      model_name: 'simple', inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [1, 16] }, { name: 'INPUT1', datatype: 'INT32', shape: [1, 16] }],
      raw_input_contents: [int32(16), int32(16)],
    }).finish();
    expect(await grpcCall(gw.url, 'ModelInfer', simple)).toBe('0');
    expect(await grpcCall(gw.url, 'ModelInfer', inference.ModelInferRequest.encode({ model_name: 'no_such_model' }).finish())).not.toBe('0');
    // ModelReady is OK (ready: false) for any name: it confirms nothing.
    expect(await grpcCall(gw.url, 'ModelReady', inference.ModelReadyRequest.encode({ name: 'made_up_model' }).finish())).toBe('0');
    await tap.until(n + 3);
    const { text, samples: m } = await scrape(gw.metricsUrl!);
    expect(m.get('http_server_request_duration_count{http_route="grpc ModelInfer",http_request_method="POST",http_response_status_code="200",'
      + 'network_protocol_version="2",model="simple",rpc_grpc_status_code="0",protocol="grpc"}')).toBe(1);
    expect(m.get('tensorgate_upstream_duration_count{rpc_method="ModelInfer",rpc_grpc_status_code="0",model="simple",protocol="grpc"}')).toBe(1);
    expect(text).not.toContain('no_such_model');
    expect(text).not.toContain('made_up_model');
    expect(text).toMatch(/http_route="grpc ModelInfer".*model="_unknown"/);
  } finally {
    tap.stop();
    await gw.close();
  }
});

describe('traces', () => {
  let collector: Server;
  const exported: string[] = [];
  beforeAll(async () => {
    collector = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        exported.push(Buffer.concat(chunks).toString('utf8'));
        res.writeHead(200, { 'Content-Type': 'application/json' });
        res.end('{}');
      });
    });
    await new Promise<void>((r) => collector.listen(0, '127.0.0.1', r));
  });
  afterAll(async () => {
    const closed = new Promise<void>((r) => collector.close(() => r()));
    collector.closeAllConnections(); // the exporter's keep-alive connection
    await closed;
  });

  test('the caller\'s trace continues to the backend and spans are exported', async () => {
    const port = (collector.address() as AddressInfo).port;
    const gw = await gatewayFor(['--demo', '--tracing', '--otlp-endpoint', `http://127.0.0.1:${port}/v1/traces`]);
    const traceId = '4bf92f3577b34da6a3ce929d0e0e4736';
    try {
      const r = await send(`${gw.url}/v2/models/simple/infer`, {
        body: simpleJson, headers: { traceparent: `00-${traceId}-00f067aa0ba902b7-01` },
      });
      expect(r.status).toBe(200);
      const forwarded = gw.demoBackend!.stats.lastTraceparent!;
      expect(forwarded).toMatch(new RegExp(`^00-${traceId}-[0-9a-f]{16}-01$`));
      expect(forwarded).not.toContain('00f067aa0ba902b7'); // the gateway's own span is the parent now
    } finally {
      await gw.close(); // flushes the batch of spans
    }
    const all = exported.join('\n');
    expect(all).toContain(traceId);
    for (const hop of ['decode', 'triton', 'encode']) expect(all).toContain(`"${hop}"`);
  });

  test('tracing off: an incoming traceparent is passed through unchanged', async () => {
    const gw = await gatewayFor(['--demo']);
    try {
      const tp = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';
      await send(`${gw.url}/v2/models/simple/infer`, { body: simpleJson, headers: { traceparent: tp } });
      expect(gw.demoBackend!.stats.lastTraceparent).toBe(tp);
    } finally {
      await gw.close();
    }
  });
});
