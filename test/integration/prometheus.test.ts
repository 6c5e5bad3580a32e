// The Grafana dashboard (deploy/grafana/tensorgate.json) and the alert rules
// (deploy/overlays/ingress/prometheus-rule.yaml) against a real Prometheus (Debian's `prometheus`,
// started here on a free port with a temporary data directory) scraping a built gateway over TLS
// under mixed load: every panel's query and every template variable's query returns data, every
// rule evaluates without error in Prometheus' own rule manager, and promtool checks the rules and
// runs their unit tests (prometheus/alerts.test.yaml: each alert fires on a synthetic series).
import { type ChildProcessWithoutNullStreams, spawn, spawnSync } from 'node:child_process';
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { parse } from 'yaml';
import { METRICS, prometheusName } from '../../gateway/telemetry/metrics';
import { makePki, pemText, type Pki } from '../support/certs';
import { freePort, type MixedLoad, type ObservedGateway, startMixedLoad, startObservedGateway, stopChild } from '../support/observed';
import { CURL, needs, OPENSSL, PROMETHEUS, PROMTOOL } from '../support/tools';
import { curl } from '../support/curl';

const ROOT = path.join(__dirname, '../..');
const RULES = path.join(ROOT, 'deploy/overlays/ingress/prometheus-rule.yaml');
const DASHBOARD = path.join(ROOT, 'deploy/grafana/tensorgate.json');
/** Prometheus scrapes every second here; Grafana's $__rate_interval is then at least 4 scrapes. */
const SCRAPE_S = 1;
const RATE_INTERVAL = '10s';

/**
 * The store's series (auth.limits.store), absent from a gateway without one (this test's): their
 * panels' queries are held to name series the gateway can export, not to return data.
 */
const STORE_SERIES = (METRICS as readonly { name: string; kind: 'counter' | 'gauge' | 'histogram'; seeds?: false }[])
  .filter((m) => m.seeds === false && m.name.startsWith('tensorgate.auth.limits_store.')).map((m) => prometheusName(m));
const onStoreOnly = (expr: string): boolean => STORE_SERIES.some((n) => new RegExp(`\\b${n}(_bucket)?\\{`).test(expr));

interface Panel { type: string; title: string; targets?: { expr: string; legendFormat?: string }[] }
interface Variable { name: string; type: string; query?: string | { query: string } }
interface Rule { record?: string; alert?: string; expr: string }

const dashboard = JSON.parse(readFileSync(DASHBOARD, 'utf8')) as { panels: Panel[]; templating: { list: Variable[] } };
const ruleGroups = (parse(readFileSync(RULES, 'utf8')) as { spec: { groups: { name: string; rules: Rule[] }[] } }).spec.groups;

/** A query as Grafana sends it with every variable at "All". */
function expand(expr: string): string {
  return expr.replace(/\$__rate_interval/g, RATE_INTERVAL).replace(/\$(pool|instance|model)\b/g, '.*');
}

interface ApiAnswer { status: string; error?: string; data: unknown }

async function api(base: string, pathAndQuery: string): Promise<ApiAnswer> {
  const res = await fetch(`${base}${pathAndQuery}`, { signal: AbortSignal.timeout(10_000) });
  return await res.json() as ApiAnswer;
}

async function instant(base: string, expr: string): Promise<{ result: unknown[]; error?: string }> {
  const a = await api(base, `/api/v1/query?query=${encodeURIComponent(expr)}`);
  return { result: a.status === 'success' ? (a.data as { result: unknown[] }).result : [], error: a.error };
}

async function waitFor<T>(what: string, ms: number, f: () => Promise<T | undefined>): Promise<T> {
  const until = Date.now() + ms;
  let last: Error | undefined;
  while (Date.now() < until) {
    try {
      const v = await f();
      if (v !== undefined) return v;
    } catch (err) {
      last = err as Error;
    }
    await new Promise((r) => setTimeout(r, 250));
  }
  throw new Error(`${what} within ${ms} ms${last === undefined ? '' : `: ${last.message}`}`);
}

test('the dashboard\'s layout: unique panel ids, every panel on the 24-column grid without overlap, every query on the data source variable', () => {
  const panels = dashboard.panels as (Panel & { id: number; gridPos: { x: number; y: number; w: number; h: number }; datasource?: { uid: string } })[];
  expect(new Set(panels.map((p) => p.id)).size).toBe(panels.length);
  const cells = new Set<string>();
  for (const p of panels) {
    const { x, y, w, h } = p.gridPos;
    expect([p.title, x >= 0 && w > 0 && x + w <= 24]).toEqual([p.title, true]);
    for (let i = x; i < x + w; i++) {
      for (let j = y; j < y + h; j++) {
        expect([p.title, cells.has(`${i},${j}`)]).toEqual([p.title, false]);
        cells.add(`${i},${j}`);
      }
    }
    if (p.type !== 'row') expect([p.title, p.datasource?.uid]).toEqual([p.title, '${datasource}']);
  }
});

needs(PROMETHEUS(), PROMTOOL(), CURL(), OPENSSL()).describe('Grafana dashboard and alert rules against a real Prometheus', () => {
  let dir: string;
  let pki: Pki;
  let gw: ObservedGateway | undefined;
  let load: MixedLoad | undefined;
  let prometheus: ChildProcessWithoutNullStreams | undefined;
  let base: string;

  beforeAll(async () => {
    const binary = PROMETHEUS().path!;
    dir = mkdtempSync(path.join(tmpdir(), 'tg-prometheus-'));
    pki = makePki();
    writeFileSync(path.join(dir, 'rules.yaml'), JSON.stringify({ groups: ruleGroups }));
    gw = await startObservedGateway(['--tls-cert', pki.server.cert, '--tls-key', pki.server.key, '--log-level', 'warn']);
    load = startMixedLoad(gw, 2, pemText(pki.ca.cert));
    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    writeFileSync(path.join(dir, 'prometheus.yml'), JSON.stringify({
      global: { scrape_interval: `${SCRAPE_S}s`, evaluation_interval: `${SCRAPE_S}s` },
      rule_files: [path.join(dir, 'rules.yaml')],
      scrape_configs: [{ job_name: 'tensorgate', static_configs: [{ targets: [`127.0.0.1:${gw.metricsPort}`] }] }],
    }));
    prometheus = spawn(binary, [`--config.file=${path.join(dir, 'prometheus.yml')}`, `--storage.tsdb.path=${path.join(dir, 'data')}`,
      `--web.listen-address=127.0.0.1:${port}`, '--log.level=warn'], { stdio: ['pipe', 'pipe', 'pipe'] });
    prometheus.stdout.resume();
    prometheus.stderr.resume();
    await waitFor('Prometheus ready', 20_000, async () => ((await fetch(`${base}/-/ready`)).ok ? true : undefined));
    // Rates need samples a few seconds apart: wait for 6 scrapes with inferences in them.
    await waitFor('6 scrapes of the gateway under load', 30_000, async () => {
      const r = await instant(base, 'count_over_time(http_server_request_duration_count{model="simple", encoding="json", http_response_status_code="200"}[1m]) >= 6');
      return r.result.length > 0 ? true : undefined;
    });
  }, 90_000);

  afterAll(async () => {
    await load?.stop();
    if (prometheus !== undefined) await stopChild(prometheus);
    await gw?.stop();
    pki?.remove();
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
  }, 30_000);

  test('the load was mixed, and the client saw every answer', () => {
    expect(load!.failures).toEqual([]);
    expect([...load!.statuses.keys()].sort()).toEqual([200, 400, 404]);
  });

  test('every panel of the dashboard returns data', async () => {
    const panels = dashboard.panels.filter((p) => p.type !== 'row');
    expect(panels.length).toBeGreaterThanOrEqual(15);
    const empty: string[] = [];
    for (const p of panels) {
      expect(p.targets?.length).toBeGreaterThan(0);
      for (const t of p.targets!) {
        const r = await instant(base, expand(t.expr));
        if (r.error !== undefined) throw new Error(`panel "${p.title}": ${r.error}\n${t.expr}`);
        // A panel "returns data" when one of its queries does (a counter of failures may be 0, not absent).
        if (r.result.length === 0 && !onStoreOnly(t.expr)) empty.push(`${p.title}: ${t.expr}`);
      }
    }
    expect(STORE_SERIES.length).toBe(4);
    const panelsWithoutData = panels.filter((p) => p.targets!.every((t) => empty.includes(`${p.title}: ${t.expr}`))).map((p) => p.title);
    expect(panelsWithoutData).toEqual([]);
    // Each query on its own too: a series the dashboard draws that no gateway exports is a typo.
    expect(empty).toEqual([]);
  }, 60_000);

  test('every template variable finds values (pool = job, instance, model)', async () => {
    const vars = dashboard.templating.list.filter((v) => v.type === 'query');
    expect(vars.map((v) => v.name)).toEqual(['pool', 'instance', 'model']);
    const found: Record<string, string[]> = {};
    for (const v of vars) {
      const q = typeof v.query === 'string' ? v.query : v.query!.query;
      const m = /^label_values\((.+),\s*(\w+)\)$/.exec(q)!;
      const a = await api(base, `/api/v1/label/${m[2]}/values?match[]=${encodeURIComponent(expand(m[1]!))}`);
      expect(a.status).toBe('success');
      found[v.name] = a.data as string[];
    }
    expect(found).toEqual({ pool: ['tensorgate'], instance: [expect.stringMatching(/^127\.0\.0\.1:\d+$/)], model: expect.arrayContaining(['simple']) });
  });

  test('every rule evaluates without error in Prometheus\' rule manager; the recording rules have values', async () => {
    const names = ruleGroups.flatMap((g) => g.rules.map((r) => r.alert ?? r.record!));
    const health = await waitFor('every rule evaluated', 20_000, async () => {
      const a = await api(base, '/api/v1/rules');
      const rules = (a.data as { groups: { rules: { name: string; health: string; lastError?: string }[] }[] }).groups.flatMap((g) => g.rules);
      return rules.length === names.length && rules.every((r) => r.health !== 'unknown') ? rules : undefined;
    });
    expect(health.map((r) => [r.name, r.health, r.lastError ?? '']).sort()).toEqual(names.map((n) => [n, 'ok', '']).sort());
    for (const g of ruleGroups) {
      for (const r of g.rules) {
        const q = await instant(base, r.expr);
        expect([r.alert ?? r.record, q.error]).toEqual([r.alert ?? r.record, undefined]);
        if (r.record !== undefined) expect(q.result.length).toBe(1);
      }
    }
    // A healthy gateway with TLS: its certificate (30 days) is far from expiry, a backend is ready.
    expect((await instant(base, 'ALERTS{alertname=~"TensorgateNoReadyBackend|TensorgateCertificateExpires.*"}')).result).toEqual([]);
    expect((await instant(base, 'tensorgate_tls_certificate_not_after{certificate="server"} - time() > 29 * 86400')).result).toHaveLength(1);
    expect((await instant(base, 'tensorgate_tls_handshake_failures_total{failure="protocol"} > 0')).result).toHaveLength(1);
  }, 40_000);

  test('failed handshakes are counted by kind: curl refusing our certificate (unknown CA), plain HTTP on the TLS port', async () => {
    const count = async (failure: string): Promise<number> => {
      const text = await (await fetch(`http://127.0.0.1:${gw!.metricsPort}/metrics`)).text();
      return Number(new RegExp(`^tensorgate_tls_handshake_failures_total\\{failure="${failure}"\\} (\\d+)`, 'm').exec(text)![1]);
    };
    const before = await count('certificate');
    const refused = await curl('--max-time', '10', '--cacert', pki.otherCa.cert, `https://localhost:${gw!.port}/v2/health/ready`);
    expect(refused.exit).toBe(60); // curl: peer certificate cannot be authenticated with given CA certificates
    expect(await count('certificate')).toBe(before + 1);
    expect(await count('protocol')).toBeGreaterThan(0); // the load's plain-HTTP requests
  });

  test('promtool: the rules check, and their unit tests (each alert firing on a synthetic series) pass', () => {
    const promtool = PROMTOOL().path!;
    const check = spawnSync(promtool, ['check', 'rules', path.join(dir, 'rules.yaml')], { encoding: 'utf8', timeout: 30_000 });
    expect(check.stdout + check.stderr).toContain('SUCCESS: 11 rules found');
    expect(check.status).toBe(0);
    copyFileSync(path.join(__dirname, 'prometheus/alerts.test.yaml'), path.join(dir, 'alerts.test.yaml'));
    const t = spawnSync(promtool, ['test', 'rules', path.join(dir, 'alerts.test.yaml')], { encoding: 'utf8', timeout: 30_000 });
    expect(t.stdout + t.stderr).toContain('SUCCESS');
    expect(t.status).toBe(0);
    // Every alert of the rule file is tested there.
    const tested = new Set([...readFileSync(path.join(dir, 'alerts.test.yaml'), 'utf8').matchAll(/alertname: (\w+)/g)].map((m) => m[1]));
    expect(ruleGroups.flatMap((g) => g.rules.filter((r) => r.alert !== undefined).map((r) => r.alert)).filter((a) => !tested.has(a))).toEqual([]);
  });
});
