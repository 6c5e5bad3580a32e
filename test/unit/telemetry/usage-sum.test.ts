// A cluster primary's GET /usage/<id> (telemetry/usage-page.ts sumUsage): the workers' documents as
// one — the quotas of the first (all read from one store), `process` summed by model and unit.
import { sumUsage } from '../../../gateway/telemetry/usage-page';

describe('sumUsage', () => {
  test('process summed by model and unit over the workers; the quotas as the first tells them; none: undefined', () => {
    const quotas = [{ unit: 'requests', used: 7 }];
    expect(sumUsage([
      { id: 'key:a', quotas, process: { m1: { requests: 2, tokens: 10 }, m2: { requests: 1, tokens: 0 } } },
      { id: 'key:a', quotas, process: { m1: { requests: 3, tokens: 5 } } },
      { id: 'key:a', quotas, process: {} },
    ])).toEqual({ id: 'key:a', quotas, process: { m1: { requests: 5, tokens: 15 }, m2: { requests: 1, tokens: 0 } }, workers: 3 });
    expect(sumUsage([])).toBeUndefined();
  });
});
