// Starts the gateway in-process on 127.0.0.1:0 with a frozen config built from flags; or, for a
// describe block, one gateway for all its tests (started before them, closed after).
import { loadConfig } from '../../gateway/config/load';
import { type RunningGateway, startGateway } from '../../gateway/gateway';
import { DEFAULT_HTTP2_CLIENT, type Http2Client } from '../../gateway/upstream/connections/h2-sessions';
import type { RecordTap } from './records';

/**
 * upstream.http2Client of the gateways and planes a test run starts: TENSORGATE_UPSTREAM_HTTP2_CLIENT
 * of the run (`node` runs the upstream suites on node:http2's client), else the default.
 */
const asked = process.env.TENSORGATE_UPSTREAM_HTTP2_CLIENT;
export const HTTP2_CLIENT: Http2Client = asked === 'node' || asked === 'own' ? asked : DEFAULT_HTTP2_CLIENT;

/**
 * server.compiledLane of the gateways a test run starts: TENSORGATE_SERVER_COMPILED_LANE of the run
 * (`false` runs the fast path's suites with the compiled lane off), else the default (on).
 */
const lane = process.env.TENSORGATE_SERVER_COMPILED_LANE;
const COMPILED_LANE: Record<string, string> = lane === undefined ? {} : { TENSORGATE_SERVER_COMPILED_LANE: lane };

export async function gatewayFor(args: string[]): Promise<RunningGateway> {
  // Free ports for both listeners; no access log in test output unless a test asks for it. Of the
  // run's environment, only the HTTP/2 client and the compiled lane reach the gateway (a flag in `args` still wins).
  const r = loadConfig({
    argv: ['--host', '127.0.0.1', '--port', '0', '--metrics-port', '0', '--log-level', 'silent', ...args],
    env: { TENSORGATE_UPSTREAM_HTTP2_CLIENT: HTTP2_CLIENT, ...COMPILED_LANE },
  });
  if (r.help) throw new Error('unexpected --help');
  return startGateway(r.config);
}

/**
 * gatewayFor(`args`) for the tests of the describe block this is called in: started in its
 * beforeAll, closed in its afterAll, with `tap` collecting records meanwhile. Returns the gateway
 * as the tests see it (its fields are the running one's; read before beforeAll, it throws).
 */
export function gatewayForSuite(args: string[], tap?: RecordTap): RunningGateway {
  let running: RunningGateway | undefined;
  beforeAll(async () => {
    running = await gatewayFor(args);
    tap?.start();
  });
  afterAll(async () => {
    tap?.stop();
    await running?.close();
  });
  return new Proxy({} as RunningGateway, {
    get: (_, key) => {
      if (running === undefined) throw new Error('the suite\'s gateway starts in beforeAll');
      const v: unknown = Reflect.get(running, key);
      return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(running) : v;
    },
  });
}

/**
 * The two ways a cleartext HTTP/1.1 request is read (server.fastPath, ingress/http1/fast.ts): the
 * flags of each, for the suites whose cases run against both (describe.each).
 */
export const HTTP1_WAYS: [string, string[]][] = [['fast path', []], ['node:http', ['--fast-path=false']]];
