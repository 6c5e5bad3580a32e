// /dashboard on the metrics port: a static page (telemetry/dashboard-page.ts) and the two JSON
// documents it polls, built when asked, never on the request path: /dashboard/recent.json (the
// ring of telemetry/recent.ts, or the request(s) with one id) and /dashboard/summary.json (each
// model's cumulative request count, errors and latency buckets from the metrics' own aggregates,
// from which the page draws rates and quantiles as Prometheus would; the backend set).
//
// The metrics port asks for no credentials (docs/production.md "Authentication"), and neither
// does this page: it shows what /metrics and the access log already tell (routes, models, ids,
// sizes, timings), never a header, a credential or a tensor. The page is one origin with a strict
// Content-Security-Policy (script and style only from itself, no inline code, no framing), and it
// writes every value from a request (model name, id, error code) as text, never as markup.
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { DataPoint, Histogram as HistogramValue } from '@opentelemetry/sdk-metrics';
import { DASHBOARD_CSS, DASHBOARD_HTML, DASHBOARD_JS } from './dashboard-page';
import type { MetricsSnapshot } from './metrics';
import { RECENT_ID_CHARS, type RecentQuery, type RecentRequest } from './recent';
import { HOPS } from '../infer/ledger';

/** One backend as the page lists it (upstream/backends/backend-set.ts Backend). */
export interface BackendView {
  readonly address: string;
  readonly target: string;
  /** Its pool (upstream.pools; "default" for upstream.backends). */
  readonly pool?: string;
  readonly state: string;
  readonly ejections: number;
  /** Calls this process has running on it. */
  readonly inFlight?: number;
}

/** What one gateway process answers about its recent requests (telemetry/telemetry.ts), also over cluster IPC. */
export interface RecentAnswer {
  /** The ring's slots and sampling rate (summed over the workers in a cluster). */
  readonly size: number;
  readonly perSecond: number;
  readonly requests: readonly RecentRequest[];
  readonly backends: readonly BackendView[];
}

export interface DashboardSources {
  /** The recent requests matching `q`, newest first, at most `q.limit` (one process's ring, or every worker's). */
  readonly recent: (q: RecentQuery) => Promise<RecentAnswer>;
  /** The cumulative metrics (Metrics.snapshot, or the cluster's sum) and the backend set. */
  readonly summary: () => Promise<{ readonly scopes: MetricsSnapshot; readonly backends: readonly BackendView[] }>;
}

const SECURITY_HEADERS = {
  'content-security-policy': "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; "
    + "base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'cache-control': 'no-store',
} as const;

/** Requests in one /dashboard/recent.json answer: by default, and at most (~1.5 KB of JSON each). */
const DEFAULT_LIMIT = 100;
const MAX_LIMIT = 1000;

const ASSETS: Readonly<Record<string, readonly [string, string]>> = {
  '/dashboard': ['text/html; charset=utf-8', DASHBOARD_HTML],
  '/dashboard/': ['text/html; charset=utf-8', DASHBOARD_HTML],
  '/dashboard/app.js': ['text/javascript; charset=utf-8', DASHBOARD_JS],
  '/dashboard/app.css': ['text/css; charset=utf-8', DASHBOARD_CSS],
};

/** The handler of the metrics server's other paths: true when it answered (a /dashboard path). */
export function dashboardPages(s: DashboardSources): (req: IncomingMessage, res: ServerResponse) => boolean {
  return (req, res) => {
    const url = req.url ?? '';
    if (url !== '/dashboard' && !url.startsWith('/dashboard/') && !url.startsWith('/dashboard?')) return false;
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      send(res, 405, 'application/json', JSON.stringify({ error: `${req.method} is not allowed on ${url.split('?')[0]}: GET or HEAD` }), { allow: 'GET, HEAD' });
      return true;
    }
    const q = url.indexOf('?');
    const path = q === -1 ? url : url.slice(0, q);
    const query = new URLSearchParams(q === -1 ? '' : url.slice(q + 1));
    const asset = ASSETS[path];
    if (asset !== undefined) send(res, 200, asset[0], asset[1]);
    else if (path === '/dashboard/recent.json') answerRecent(s, query, res);
    else if (path === '/dashboard/summary.json') answerSummary(s, res);
    else send(res, 404, 'application/json', JSON.stringify({ error: 'no such dashboard path: /dashboard, /dashboard/recent.json, /dashboard/summary.json' }));
    return true;
  };
}

function send(res: ServerResponse, status: number, type: string, body: string, extra: Record<string, string> = {}): void {
  res.writeHead(status, { ...SECURITY_HEADERS, 'content-type': type, 'content-length': Buffer.byteLength(body), ...extra });
  res.end(res.req.method === 'HEAD' ? undefined : body);
}

/** ?id=<body id or x-request-id>, ?since=<seq>, ?limit=<n> (default 100, at most 1000), newest first. */
function answerRecent(s: DashboardSources, query: URLSearchParams, res: ServerResponse): void {
  const id = query.get('id') ?? undefined;
  const since = query.get('since');
  const limit = query.get('limit');
  const bad = (v: string | null): boolean => v !== null && !/^\d{1,15}$/.test(v);
  if (bad(since) || bad(limit)) {
    send(res, 400, 'application/json', JSON.stringify({ error: 'since and limit must be non-negative integers' }));
    return;
  }
  // One answer is built in one go on the event loop: bounded, whatever the ring's size.
  if (limit !== null && Number(limit) > MAX_LIMIT) {
    send(res, 400, 'application/json', JSON.stringify({ error: `limit ${limit} is above ${MAX_LIMIT}: page with since` }));
    return;
  }
  s.recent({
    id: id === undefined || id === '' ? undefined : id.slice(0, RECENT_ID_CHARS),
    since: since === null ? undefined : Number(since),
    limit: limit === null ? DEFAULT_LIMIT : Number(limit),
  }).then((a) => send(res, 200, 'application/json', JSON.stringify({
    now_ms: Date.now(), size: a.size, per_second: a.perSecond, hops: HOPS, requests: a.requests,
  })), (err: unknown) => send(res, 500, 'application/json', JSON.stringify({ error: `recent requests could not be read: ${String(err)}` })));
}

interface ModelSummary {
  model: string;
  count: number;
  errors: number;
  sum: number;
  buckets: number[];
}

/** Each model's requests, 5xx answers and duration buckets (cumulative), the in-flight count and the backends. */
function answerSummary(s: DashboardSources, res: ServerResponse): void {
  s.summary().then(({ scopes, backends }) => {
    const models = new Map<string, ModelSummary>();
    let boundaries: readonly number[] = [];
    let inFlight = 0;
    let maxInFlight: number | undefined;
    for (const scope of scopes) {
      for (const m of scope.metrics) {
        const name = m.descriptor.name;
        if (name === 'tensorgate.requests.in_flight') for (const p of m.dataPoints as DataPoint<number>[]) inFlight += p.value;
        if (name === 'tensorgate.requests.in_flight_limit') for (const p of m.dataPoints as DataPoint<number>[]) maxInFlight = (maxInFlight ?? 0) + p.value;
        if (name !== 'http.server.request.duration') continue;
        for (const p of m.dataPoints as DataPoint<HistogramValue>[]) {
          const model = p.attributes.model;
          if (typeof model !== 'string' || model === '') continue;
          boundaries = p.value.buckets.boundaries;
          let x = models.get(model);
          if (x === undefined) models.set(model, x = { model, count: 0, errors: 0, sum: 0, buckets: p.value.buckets.counts.map(() => 0) });
          x.count += p.value.count;
          x.sum += p.value.sum ?? 0;
          if (Number(p.attributes['http.response.status_code']) >= 500) x.errors += p.value.count;
          p.value.buckets.counts.forEach((c, i) => { x.buckets[i] = (x.buckets[i] ?? 0) + c; });
        }
      }
    }
    send(res, 200, 'application/json', JSON.stringify({
      now_ms: Date.now(), boundaries, in_flight: inFlight, max_in_flight: maxInFlight,
      models: [...models.values()].sort((a, b) => (a.model < b.model ? -1 : 1)), backends,
    }));
  }, (err: unknown) => send(res, 500, 'application/json', JSON.stringify({ error: `metrics could not be collected: ${String(err)}` })));
}
