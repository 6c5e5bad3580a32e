// A gRPC pass-through call's record (passthrough/grpc-ingress.ts) in the metrics: the same series
// as REST with protocol="grpc" (REST series have no protocol label; every series has
// network.protocol.version, "2" for gRPC), its method as rpc.method, its bytes both ways.
import { PrometheusSerializer } from '@opentelemetry/exporter-prometheus';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { createMetrics } from '../../../gateway/telemetry/metrics';
import type { RequestRecord } from '../../../gateway/telemetry/record';
import { prometheusSamples } from '../../support/prometheus';

test('a gRPC call is counted with protocol="grpc", its method, status, model and bytes', async () => {
  const m = createMetrics({ host: '127.0.0.1', port: undefined, serviceName: 'tensorgate' });
  try {
    const call: RequestRecord = {
      route: 'grpc ModelInfer', method: 'POST', status: 200, startNs: 0, endNs: 2_000_000, declaredBytes: 0, protocol: '2', rpc: 'grpc',
      grpcStatus: 0, model: 'simple', bytesIn: 1000, bytesOut: 500, upstreamStatus: 0, upstreamDurationNs: 1_000_000,
    };
    const rest: RequestRecord = { route: 'health_ready', method: 'GET', status: 200, startNs: 0, endNs: 1_000_000, declaredBytes: 0 };
    for (const r of [call, rest]) {
      m.requestStarted(r.route, 0);
      m.record(r, (name) => name === 'simple');
    }
    const serializer = new PrometheusSerializer(undefined, false, undefined, false, true);
    const s = prometheusSamples(serializer.serialize({ resource: resourceFromAttributes({}), scopeMetrics: [...await m.snapshot()] }));
    expect(s.get('http_server_request_duration_count{http_route="grpc ModelInfer",http_request_method="POST",http_response_status_code="200",'
      + 'network_protocol_version="2",model="simple",rpc_grpc_status_code="0",protocol="grpc"}')).toBe(1);
    expect(s.get('http_server_request_duration_count{http_route="health_ready",http_request_method="GET",http_response_status_code="200",'
      + 'network_protocol_version="1.1"}')).toBe(1);
    expect(s.get('tensorgate_upstream_duration_count{rpc_method="ModelInfer",rpc_grpc_status_code="0",model="simple",protocol="grpc"}')).toBe(1);
    expect(s.get('tensorgate_grpc_bytes_total{rpc_method="ModelInfer",direction="in"}')).toBe(1000);
    expect(s.get('tensorgate_grpc_bytes_total{rpc_method="ModelInfer",direction="out"}')).toBe(500);
  } finally {
    await m.close();
  }
});
