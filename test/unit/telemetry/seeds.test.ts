// The series /metrics shows, seeded at 0 or recorded: each carries only its own metric's
// attributes, and an attribute whose values the metric declares (MetricSpec.values) takes only
// those values, as the code that records it spells them. A metric seeded from another metric's
// list (tensorgate_upstream_mirrored_total with the auth outcomes) or with none of its labels
// fails here.
import { resourceFromAttributes } from '@opentelemetry/resources';
import { MIRROR_OUTCOMES } from '../../../gateway/upstream/backends/mirror';
import { ROUTE_DECISIONS } from '../../../gateway/upstream/backends/pools';
import { createMetrics, METRICS, MIRROR_OUTCOME_NAMES, type MetricSpec, prometheusName, prometheusText, ROUTE_DECISION_NAMES, seededAttributes } from '../../../gateway/telemetry/metrics';
import { TLS_HANDSHAKE_FAILURES } from '../../../gateway/telemetry/handshake';
import type { AuthRecord } from '../../../gateway/telemetry/record';

const SPECS = METRICS as readonly MetricSpec[];
const label = (attribute: string): string => attribute.replace(/\./g, '_');

/** Each series of a scrape: its metric and labels (`le` of a histogram's buckets left out). */
function series(text: string): { spec: MetricSpec; labels: Record<string, string> }[] {
  const byName = new Map(SPECS.map((m) => [prometheusName(m), m]));
  // target_info: the resource's attributes (OpenTelemetry's exporter), no metric's.
  return text.split('\n').filter((l) => l !== '' && !l.startsWith('#') && !l.startsWith('target_info')).map((line) => {
    const m = /^([a-z_]+)(?:\{(.*)\})? \S+$/.exec(line)!;
    const spec = byName.get(m[1]!) ?? byName.get(m[1]!.replace(/_(bucket|count|sum)$/, ''));
    if (spec === undefined) throw new Error(`a series of no declared metric: ${line}`);
    const labels = Object.fromEntries([...(m[2] ?? '').matchAll(/([a-z_]+)="((?:[^"\\]|\\.)*)"/g)].map((x) => [x[1]!, x[2]!]).filter(([k]) => k !== 'le'));
    return { spec, labels };
  });
}

/** Where a series' labels leave its metric's declaration: a label it does not have, a value it does not declare. */
function strayLabels(s: { spec: MetricSpec; labels: Record<string, string> }): string[] {
  const attributes = new Map(s.spec.attributes.map((a) => [label(a), a]));
  return Object.entries(s.labels).flatMap(([k, v]) => {
    const a = attributes.get(k);
    if (a === undefined) return [`${s.spec.name}: ${k} is not one of its attributes`];
    const values = s.spec.values?.[a];
    return values === undefined || values.includes(v) ? [] : [`${s.spec.name}: ${k}="${v}" is not one of its values (${values.join(', ')})`];
  });
}

test('each metric declares values only for attributes it has', () => {
  for (const m of SPECS) expect([m.name, Object.keys(m.values ?? {}).filter((a) => !m.attributes.includes(a))]).toEqual([m.name, []]);
});

test('the values telemetry declares are the ones the backend set records', () => {
  expect([...ROUTE_DECISION_NAMES]).toEqual([...ROUTE_DECISIONS]);
  expect([...MIRROR_OUTCOME_NAMES]).toEqual([...MIRROR_OUTCOMES]);
});

test('a fresh process\'s seeded series carry every declared attribute, with the metric\'s own values', async () => {
  const m = createMetrics({ host: '127.0.0.1', port: undefined, serviceName: 'tensorgate',
    backends: () => ({ byState: { connecting: 0, ready: 1, unhealthy: 0, ejected: 0 }, ejections: 0, retries: 0 }) });
  try {
    const all = series(prometheusText(resourceFromAttributes({}), await m.snapshot(), SPECS));
    expect(all.flatMap(strayLabels)).toEqual([]);
    for (const spec of SPECS.filter((s) => s.primary !== true)) {
      const seeded = all.filter((s) => s.spec === spec);
      const declared = Object.keys(spec.values ?? {}).map(label).sort();
      // A seed without the labels its metric declares (an unlabelled tensorgate_upstream_routed_total) is wrong.
      expect([spec.name, [...new Set(seeded.map((s) => Object.keys(s.labels).sort().join(',')))]])
        .toEqual([spec.name, seededAttributes(spec).length === 0 ? [] : [declared.join(',')]]);
    }
    expect(all.filter((s) => s.spec.name === 'tensorgate.upstream.mirrored').map((s) => s.labels.outcome).sort()).toEqual([...MIRROR_OUTCOMES].sort());
    expect(all.filter((s) => s.spec.name === 'tensorgate.upstream.routed').map((s) => s.labels.decision).sort()).toEqual([...ROUTE_DECISIONS].sort());
  } finally {
    await m.close();
  }
});

test('recorded series keep to the declared values: the backend set\'s decisions and outcomes, auth, TLS', async () => {
  const m = createMetrics({ host: '127.0.0.1', port: undefined, serviceName: 'tensorgate',
    backends: () => ({
      byState: { connecting: 0, ready: 1, unhealthy: 0, ejected: 0 }, ejections: 0, retries: 0,
      routed: ROUTE_DECISIONS.map((decision) => ({ pool: 'a', decision, calls: 1 })),
      mirrored: MIRROR_OUTCOMES.map((outcome) => ({ pool: 'b', outcome, calls: 1 })),
    }) });
  try {
    const outcomes: AuthRecord['outcome'][] = ['allowed', 'missing', 'invalid', 'forbidden', 'unavailable'];
    for (const outcome of outcomes) {
      m.requestStarted('infer', 0);
      m.record({ route: 'infer', method: 'POST', status: 200, startNs: 0, endNs: 1, declaredBytes: 0, auth: { outcome, method: 'jwt' } }, () => true);
    }
    for (const ok of [true, false]) m.authReloaded('keys', ok);
    for (const outcome of ['success', 'failure'] as const) m.tlsReloaded(outcome);
    for (const failure of TLS_HANDSHAKE_FAILURES) m.tlsHandshakeFailed(failure);
    const all = series(prometheusText(resourceFromAttributes({}), await m.snapshot(), SPECS));
    expect(all.flatMap(strayLabels)).toEqual([]);
    expect(all.filter((s) => s.spec.name === 'tensorgate.upstream.routed' && s.labels.pool === 'a')).toHaveLength(ROUTE_DECISIONS.length);
    expect(all.filter((s) => s.spec.name === 'tensorgate.upstream.mirrored' && s.labels.pool === 'b')).toHaveLength(MIRROR_OUTCOMES.length);
  } finally {
    await m.close();
  }
});
