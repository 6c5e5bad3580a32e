import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { METRICS, prometheusName, renderMetricsDoc } from '../../../gateway/telemetry/metrics';

test('docs/metrics.md is generated from the metric list (run `npm run docs` after changing it)', () => {
  expect(readFileSync(join(__dirname, '../../../docs/metrics.md'), 'utf8')).toBe(renderMetricsDoc());
});

test('Prometheus names follow the exporter\'s rules', () => {
  expect(prometheusName({ name: 'tensorgate.hop.copied', kind: 'counter' })).toBe('tensorgate_hop_copied_total');
  expect(new Set(METRICS.map((m) => m.name)).size).toBe(METRICS.length);
});
