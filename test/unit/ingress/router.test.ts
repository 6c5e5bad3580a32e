import type { GatewayError } from '../../../gateway/errors';
import { matchRoute, type Route } from '../../../gateway/ingress/router';

const noop = async (): Promise<void> => {};
const routes: Route[] = [
  { name: 'ready', pattern: /^\/v2\/health\/ready$/, methods: { GET: noop } },
  { name: 'model', pattern: /^\/v2\/models\/([^/]+)(?:\/versions\/([0-9]+))?$/, methods: { GET: noop } },
];

function codeOf(fn: () => unknown): string {
  try {
    fn();
  } catch (err) {
    return (err as GatewayError).code;
  }
  return 'none';
}

describe('matchRoute', () => {
  test('captures become params, the query string is ignored', () => {
    const m = matchRoute(routes, 'GET', '/v2/models/simple/versions/3?x=1');
    expect(m.route.name).toBe('model');
    expect(m.params).toEqual(['simple', '3']);
    expect(matchRoute(routes, 'GET', '/v2/models/simple').params).toEqual(['simple', '']);
  });

  test('unknown path → 404, known path with another method → 405', () => {
    expect(codeOf(() => matchRoute(routes, 'GET', '/v2/health/readyz'))).toBe('GW_ERR_ROUTE_NOT_FOUND');
    expect(codeOf(() => matchRoute(routes, 'GET', '/base/v2/health/ready'))).toBe('GW_ERR_ROUTE_NOT_FOUND');
    expect(codeOf(() => matchRoute(routes, 'GET', '/v2/models/simple/versions/x'))).toBe('GW_ERR_ROUTE_NOT_FOUND');
    expect(codeOf(() => matchRoute(routes, 'POST', '/v2/health/ready'))).toBe('GW_ERR_ROUTE_METHOD_NOT_ALLOWED');
  });
});
