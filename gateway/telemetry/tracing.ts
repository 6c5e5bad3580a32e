// Traces (off by default, and then nothing here runs): one SERVER span per request, continuing
// the caller's W3C trace context or starting one, with a child span per hop taken from the
// ledger's timestamps; its context goes to Triton as traceparent/tracestate gRPC metadata so
// Triton (>= 24.01) continues the same trace.
import { context, type Span, SpanKind, SpanStatusCode, trace, type Tracer } from '@opentelemetry/api';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { resourceFromAttributes } from '@opentelemetry/resources';
import {
  BasicTracerProvider, BatchSpanProcessor, ConsoleSpanExporter, SimpleSpanProcessor, type SpanExporter,
} from '@opentelemetry/sdk-trace-base';
import { HOPS, hopRecord } from '../infer/ledger';
import type { RequestHead, RequestRecord } from './record';
import { nowNs } from '../infer/clock';

export interface Tracing {
  start(req: RequestHead, startNs: number): { span: Span; headers: Record<string, string> };
  end(span: Span, record: RequestRecord): void;
  close(): Promise<void>;
}

const propagator = new W3CTraceContextPropagator();
const headerGetter = {
  keys: (c: RequestHead['headers']) => Object.keys(c),
  get: (c: RequestHead['headers'], k: string) => c[k],
};

/** The timings' clock (infer/clock.ts, ns since the process started) → epoch milliseconds, for span timestamps. */
function epochClock(): (ns: number) => number {
  const originNs = nowNs();
  const originMs = Date.now();
  return (ns) => originMs + (ns - originNs) / 1e6;
}

export function createTracing(options: { exporter: 'otlp' | 'console'; otlpEndpoint: string; serviceName: string }): Tracing {
  const exporter: SpanExporter = options.exporter === 'console' ? new ConsoleSpanExporter() : new OTLPTraceExporter({ url: options.otlpEndpoint });
  const provider = new BasicTracerProvider({
    resource: resourceFromAttributes({ 'service.name': options.serviceName }),
    spanProcessors: [options.exporter === 'console' ? new SimpleSpanProcessor(exporter) : new BatchSpanProcessor(exporter)],
  });
  const tracer: Tracer = provider.getTracer('tensorgate');
  const toMs = epochClock();

  return {
    start(req, startNs) {
      const parent = propagator.extract(context.active(), req.headers, headerGetter);
      const span = tracer.startSpan(`${req.method ?? 'GET'} request`, { kind: SpanKind.SERVER, startTime: toMs(startNs) }, parent);
      const headers: Record<string, string> = {};
      propagator.inject(trace.setSpan(parent, span), headers, { set: (c: Record<string, string>, k, v) => { c[k] = v; } });
      return { span, headers };
    },
    end(span, r) {
      span.updateName(`${r.method} ${r.route}`);
      span.setAttributes({
        'http.route': r.route, 'http.request.method': r.method, 'http.response.status_code': r.status,
        ...(r.protocol !== undefined ? { 'network.protocol.version': r.protocol } : {}),
        ...(r.model !== undefined ? { 'tensorgate.model': r.model } : {}),
        ...(r.encoding !== undefined ? { 'tensorgate.encoding': r.encoding } : {}),
        ...(r.pool !== undefined ? { 'tensorgate.pool': r.pool, 'tensorgate.route_decision': r.routeDecision ?? '' } : {}),
        ...(r.mirror !== undefined ? { 'tensorgate.mirror': r.mirror } : {}),
        ...(r.errorCode !== undefined ? { 'error.type': r.errorCode } : {}),
        ...(r.limited !== undefined ? { 'tensorgate.limited': r.limited.reason, 'tensorgate.limit': r.limited.limit } : {}),
      });
      if (r.status >= 500) span.setStatus({ code: SpanStatusCode.ERROR, message: r.errorCode ?? String(r.status) });
      if (r.ledger !== undefined) {
        const ctx = trace.setSpan(context.active(), span);
        const h = hopRecord();
        for (const hop of HOPS) {
          r.ledger.read(hop, h);
          if (h.startNs === 0 || h.endNs === 0) continue;
          tracer.startSpan(hop, {
            startTime: toMs(h.startNs),
            attributes: { 'tensorgate.bytes_in': h.bytesIn, 'tensorgate.bytes_out': h.bytesOut, 'tensorgate.bytes_copied': h.bytesCopied, 'tensorgate.copies': h.copies },
          }, ctx).end(toMs(h.endNs));
        }
      }
      span.end(toMs(r.endNs));
    },
    async close() {
      await provider.shutdown();
    },
  };
}
