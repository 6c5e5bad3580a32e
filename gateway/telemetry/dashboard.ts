// /dashboard on the metrics port: a page (telemetry/dashboard-page.ts) and the two JSON documents
// it polls, built when asked, never on the request path: /dashboard/recent.json (the ring of
// telemetry/recent.ts, or the request(s) with one id) and /dashboard/summary.json (each model's
// cumulative request count, errors and latency buckets from the metrics' own aggregates, from
// which the page draws rates and quantiles as Prometheus would; the backend set). The page is
// served with the first of those documents in it, so that it shows data as soon as it is parsed
// (a screenshot, a slow browser, a proxy that holds the polls) rather than after its first polls.
//
// The metrics port asks for no credentials (docs/production.md "Authentication"), and neither
// does this page: it shows what /metrics and the access log already tell (routes, models, ids,
// sizes, timings), never a header, a credential or a tensor. The page is one origin with a strict
// Content-Security-Policy (script and style only from itself, no inline code, no framing), and it
// writes every value from a request (model name, id, error code) as text, never as markup.
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { DataPoint, Histogram as HistogramValue } from '@opentelemetry/sdk-metrics';
import { DASHBOARD_CSS, DASHBOARD_JS, dashboardHtml, SHOWN } from './dashboard-page';
import type { MetricsSnapshot } from './metrics';
import { RECENT_ID_CHARS, type RecentQuery, type RecentRequest } from './recent';
import { HOPS } from '../infer/ledger';

/** One backend as the page lists it (upstream/backends/backend.ts Backend). */
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
    else if (path === '/dashboard' || path === '/dashboard/') answerPage(s, query, res);
    else if (path === '/dashboard/recent.json') answer(res, recentDocument(s, query));
    else if (path === '/dashboard/summary.json') answer(res, summaryDocument(s));
    else send(res, 404, 'application/json', JSON.stringify({ error: 'no such dashboard path: /dashboard, /dashboard/recent.json, /dashboard/summary.json' }));
    return true;
  };
}

/** A JSON document, or its problem: 400 for a bad query, 500 when it could not be built. */
type Built = Promise<{ doc: object } | { status: 400 | 500; error: string }>;

function answer(res: ServerResponse, built: Built): void {
  void built.then((b) => ('doc' in b ? send(res, 200, 'application/json', JSON.stringify(b.doc))
    : send(res, b.status, 'application/json', JSON.stringify({ error: b.error }))));
}

/**
 * The page, with the documents its first polls would fetch (the summary, the newest requests, the
 * one asked for by ?id=) as a JSON data block, which its script draws before the page is shown;
 * a document that could not be built is left for the polls.
 */
function answerPage(s: DashboardSources, query: URLSearchParams, res: ServerResponse): void {
  const id = query.get('id') ?? '';
  const docs = [summaryDocument(s), recentDocument(s, new URLSearchParams({ limit: String(SHOWN) })),
    id === '' ? Promise.resolve(undefined) : recentDocument(s, new URLSearchParams({ id, limit: '1' }))];
  void Promise.all(docs).then(([summary, recent, wanted]) => {
    const doc = (b: Awaited<Built> | undefined): object | null => (b !== undefined && 'doc' in b ? b.doc : null);
    send(res, 200, 'text/html; charset=utf-8', dashboardHtml({ summary: doc(summary), recent: doc(recent), wanted: doc(wanted) }));
  });
}

function send(res: ServerResponse, status: number, type: string, body: string, extra: Record<string, string> = {}): void {
  res.writeHead(status, { ...SECURITY_HEADERS, 'content-type': type, 'content-length': Buffer.byteLength(body), ...extra });
  res.end(res.req.method === 'HEAD' ? undefined : body);
}

/** ?id=<body id or x-request-id>, ?since=<seq>, ?limit=<n> (default 100, at most 1000), newest first. */
async function recentDocument(s: DashboardSources, query: URLSearchParams): Built {
  const id = query.get('id') ?? undefined;
  const since = query.get('since');
  const limit = query.get('limit');
  const bad = (v: string | null): boolean => v !== null && !/^\d{1,15}$/.test(v);
  if (bad(since) || bad(limit)) return { status: 400, error: 'since and limit must be non-negative integers' };
  // One answer is built in one go on the event loop: bounded, whatever the ring's size.
  if (limit !== null && Number(limit) > MAX_LIMIT) return { status: 400, error: `limit ${limit} is above ${MAX_LIMIT}: page with since` };
  try {
    const a = await s.recent({
      id: id === undefined || id === '' ? undefined : id.slice(0, RECENT_ID_CHARS),
      since: since === null ? undefined : Number(since),
      limit: limit === null ? DEFAULT_LIMIT : Number(limit),
    });
    return { doc: { now_ms: Date.now(), size: a.size, per_second: a.perSecond, hops: HOPS, requests: a.requests } };
  } catch (err) {
    return { status: 500, error: `recent requests could not be read: ${String(err)}` };
  }
}

interface ModelSummary {
  model: string;
  count: number;
  errors: number;
  sum: number;
  buckets: number[];
}

/** Each model's requests, 5xx answers and duration buckets (cumulative), the in-flight count and the backends. */
async function summaryDocument(s: DashboardSources): Built {
  let scopes: MetricsSnapshot;
  let backends: readonly BackendView[];
  try {
    ({ scopes, backends } = await s.summary());
  } catch (err) {
    return { status: 500, error: `metrics could not be collected: ${String(err)}` };
  }
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
  return { doc: {
    now_ms: Date.now(), boundaries, in_flight: inFlight, max_in_flight: maxInFlight,
    models: [...models.values()].sort((a, b) => (a.model < b.model ? -1 : 1)), backends,
  } };
}
