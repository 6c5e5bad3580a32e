// /dashboard on the metrics port in a real browser: headless Chromium (Debian's `chromium`, its own
// temporary profile, bounded in time) opens the page of a built gateway under load, asking for a
// request this test sent by its id, and the page shows that request's hops with the same names and
// durations as its access log line. The id carries markup, which the page must show as text. The
// screenshot of that run is docs/dashboard.png (written there when TENSORGATE_SCREENSHOT=docs, else
// to a temporary directory). Also: the JSON behind the page, its headers, and bad queries.
import { spawn } from 'node:child_process';
import { copyFileSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { Agent } from 'node:http';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { HOPS } from '../../gateway/infer/ledger';
import { simpleBody } from '../support/load';
import { accessLines, type MixedLoad, type ObservedGateway, post, startMixedLoad, startObservedGateway, stopChild } from '../support/observed';
import { CHROMIUM, needs } from '../support/tools';

const ROOT = path.join(__dirname, '../..');
/** An id an attacker would send: markup and a script, which the page must show as text. */
const ID = `dash-${process.pid}-<img src=x onerror="document.title='owned'">`;

/**
 * Chromium, headless, on `url`: the DOM once the page's script has run its first polls (virtual
 * time: the clock runs ahead while nothing is loading; `virtualTime` false: the DOM as soon as
 * the page has loaded), and a screenshot to `png` when given. Killed after 60 s whatever happens.
 */
function chromium(url: string, profile: string, png?: string, virtualTime = true): Promise<string> {
  const args = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--no-first-run', '--hide-scrollbars',
    `--user-data-dir=${profile}`, ...(virtualTime ? ['--virtual-time-budget=5000'] : []), '--window-size=1400,1100',
    ...(png === undefined ? ['--dump-dom'] : [`--screenshot=${png}`]), url];
  return new Promise((resolve, reject) => {
    const child = spawn(CHROMIUM().path!, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.setEncoding('utf8').on('data', (s: string) => { out += s; });
    child.stderr.setEncoding('utf8').on('data', (s: string) => { err = (err + s).slice(-4000); });
    const timer = setTimeout(() => void stopChild(child, 2000), 60_000);
    child.once('exit', (code) => {
      clearTimeout(timer);
      if (code === 0) resolve(out);
      else reject(new Error(`chromium exited ${code}: ${err}`));
    });
  });
}

/** The rows of the page's hop table: data-hop and data-ms of each <tr>. */
function detailRows(dom: string): [string, number][] {
  const table = /<table id="detail">([\s\S]*?)<\/table>/.exec(dom)?.[1] ?? '';
  return [...table.matchAll(/<tr data-hop="([a-z_]+)" data-ms="([^"]+)"/g)].map((m) => [m[1]!, Number(m[2])]);
}

describe('/dashboard in headless Chromium', () => {
  let gw: ObservedGateway;
  let load: MixedLoad | undefined;
  let dir: string;
  let metrics: string;

  beforeAll(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'tg-dashboard-'));
    // Every request enters the ring here (the default keeps 50 a second).
    gw = await startObservedGateway(['--recent-requests-per-second', '1000000', '--recent-requests', '2000']);
    metrics = `http://127.0.0.1:${gw.metricsPort}`;
    load = startMixedLoad(gw, 2, undefined, 10);
  }, 30_000);

  afterAll(async () => {
    await load?.stop();
    await gw?.stop();
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
  }, 30_000);

  needs(CHROMIUM()).test('the page shows the request found by its id with the hops and durations of its access log line; the id stays text', async () => {
    const body = JSON.stringify({ id: ID, ...JSON.parse(simpleBody()) as object });
    const agent = new Agent();
    expect((await post(`${gw.url}/v2/models/simple/infer`, body, {}, agent)).status).toBe(200);
    agent.destroy();
    let line: Record<string, unknown> | undefined;
    for (let i = 0; i < 100 && line === undefined; i++) {
      line = accessLines(gw).find((l) => l.request_id === ID);
      if (line === undefined) await new Promise((r) => setTimeout(r, 50));
    }
    expect(line).toBeDefined();
    const logged = Object.entries(line!.hops_ms as Record<string, number>);
    expect(logged.map(([hop]) => hop)).toEqual([...HOPS]);

    const url = `${metrics}/dashboard?id=${encodeURIComponent(ID)}`;
    const dom = await chromium(url, path.join(dir, 'profile'));
    // The same hops in the same order with the same durations (the page keeps the log's numbers exactly).
    expect(detailRows(dom)).toEqual(logged);
    expect(dom).toContain(`<span id="found-id">${ID.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;')}: POST infer simple, 200, `);
    // Its waterfall: one bar segment per hop, in the ledger's order.
    const found = /<div id="found-bar"><div class="bar">([\s\S]*?)<\/div><\/div>/.exec(dom)?.[1] ?? '';
    expect([...found.matchAll(/<span class="h-([a-z_]+)"/g)].map((m) => m[1])).toEqual([...HOPS]);
    // The markup in the id was never parsed: no <img> anywhere, and the title is the page's own.
    expect(dom).not.toMatch(/<img/i);
    expect(dom).toContain('<title>tensorgate dashboard</title>');
    // The live parts: the model's rate from two polls, the backend set, the waterfall of the load.
    expect(dom).toMatch(/<tr data-model="simple"><td>simple<\/td><td class="n">\d+\.\d<\/td>/);
    expect(dom).toMatch(/<td class="state-ready">ready<\/td>/);
    expect((dom.match(/<div class="bar">/g) ?? []).length).toBeGreaterThan(10);
    expect(dom).toContain('<span id="status">updated ');

    // The screenshot of this page under load, for the README.
    await chromium(url, path.join(dir, 'profile-shot'), path.join(dir, 'shot.png'));
    const shot = readFileSync(path.join(dir, 'shot.png'));
    expect(shot.subarray(0, 8)).toEqual(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]));
    expect(shot.length).toBeGreaterThan(20_000);
    if (process.env.TENSORGATE_SCREENSHOT === 'docs') copyFileSync(path.join(dir, 'shot.png'), path.join(ROOT, 'docs/dashboard.png'));
  }, 150_000);

  test('the page is served with its first data, drawn as it loads: no poll awaited, no "connecting…"; markup in a value stays data', async () => {
    const agent = new Agent();
    expect((await post(`${gw.url}/v2/models/simple/infer`, JSON.stringify({ id: ID, ...JSON.parse(simpleBody()) as object }), {}, agent)).status).toBe(200);
    agent.destroy();
    const html = await (await fetch(`${metrics}/dashboard?id=${encodeURIComponent(ID)}`)).text();
    const block = /<script type="application\/json" id="first">([^<]*)<\/script>/.exec(html);
    expect(block).not.toBeNull();
    type First = { summary: { models: { model: string }[] }; recent: { requests: unknown[] }; wanted: { requests: { id: string }[] } };
    const first = JSON.parse(block![1]!) as First;
    expect(first.summary.models.map((m) => m.model)).toContain('simple');
    expect(first.recent.requests.length).toBeGreaterThan(10);
    expect(first.wanted.requests.map((r) => r.id)).toEqual([ID]);
    // The id's markup is in the block as \u003c…: nothing in the served page but the page's own tags.
    expect(html).not.toMatch(/<img/i);
    const dom = await chromium(`${metrics}/dashboard`, path.join(dir, 'profile-first'), undefined, false);
    expect(dom).toMatch(/<tr data-model="simple"><td>simple<\/td>/);
    expect((dom.match(/<div class="bar">/g) ?? []).length).toBeGreaterThan(10);
    expect(dom).toMatch(/<span id="status">updated \d\d:\d\d:\d\d<\/span>/);
    // Numbers' headers sit over their numbers.
    expect(dom).toContain('<th class="n">req/s</th>');
  }, 90_000);

  test('recent.json finds a request by its x-request-id; since and limit page through the ring', async () => {
    const agent = new Agent();
    const xid = `x-${process.pid}-${Date.now()}`;
    expect((await post(`${gw.url}/v2/models/simple/infer`, simpleBody(), { 'x-request-id': xid }, agent)).status).toBe(200);
    agent.destroy();
    const found = await (await fetch(`${metrics}/dashboard/recent.json?id=${encodeURIComponent(xid)}`)).json() as { requests: { x_request_id: string; status: number; model: string; seq: number }[] };
    expect(found.requests.map((r) => [r.x_request_id, r.status, r.model])).toEqual([[xid, 200, 'simple']]);
    const page = await (await fetch(`${metrics}/dashboard/recent.json?limit=3`)).json() as { requests: { seq: number }[] };
    expect(page.requests).toHaveLength(3);
    const seqs = page.requests.map((r) => r.seq);
    expect(seqs).toEqual([seqs[0], seqs[0]! - 1, seqs[0]! - 2]);
    const newer = await (await fetch(`${metrics}/dashboard/recent.json?since=${seqs[0]! - 1}&limit=1000`)).json() as { requests: { seq: number }[] };
    expect(newer.requests.every((r) => r.seq >= seqs[0]!)).toBe(true);
  });

  test('headers: a strict CSP and nosniff on every answer; POST is 405, a bad query 400, an unknown path 404, all {"error"}', async () => {
    for (const p of ['/dashboard', '/dashboard/app.js', '/dashboard/app.css', '/dashboard/recent.json', '/dashboard/summary.json']) {
      const res = await fetch(`${metrics}${p}`);
      expect([p, res.status, res.headers.get('x-content-type-options')]).toEqual([p, 200, 'nosniff']);
      expect(res.headers.get('content-security-policy')).toContain("script-src 'self'");
      expect(res.headers.get('content-security-policy')).not.toContain('unsafe-inline');
      await res.arrayBuffer();
    }
    const post405 = await fetch(`${metrics}/dashboard/recent.json`, { method: 'POST', body: '{}' });
    expect([post405.status, post405.headers.get('allow'), await post405.json()])
      .toEqual([405, 'GET, HEAD', { error: 'POST is not allowed on /dashboard/recent.json: GET or HEAD' }]);
    const bad = await fetch(`${metrics}/dashboard/recent.json?since=-1`);
    expect([bad.status, await bad.json()]).toEqual([400, { error: 'since and limit must be non-negative integers' }]);
    const big = await fetch(`${metrics}/dashboard/recent.json?limit=1001`);
    expect([big.status, await big.json()]).toEqual([400, { error: 'limit 1001 is above 1000: page with since' }]);
    const unknown = await fetch(`${metrics}/dashboard/nothing`);
    expect(unknown.status).toBe(404);
    expect(await unknown.json()).toEqual({ error: expect.stringContaining('no such dashboard path') });
    // /metrics is unchanged beside it.
    expect((await fetch(`${metrics}/metrics`)).status).toBe(200);
    expect((await fetch(`${metrics}/other`)).status).toBe(404);
  });
});

describe('/dashboard with workers > 1: the primary asks every worker', () => {
  let gw: ObservedGateway;

  beforeAll(async () => {
    gw = await startObservedGateway(['--workers', '2', '--recent-requests-per-second', '1000000']);
  }, 60_000);

  afterAll(async () => {
    await gw?.stop();
  }, 30_000);

  test('recent requests of both workers, merged newest first, each found by its id; the summary is the workers\' sum', async () => {
    const metrics = `http://127.0.0.1:${gw.metricsPort}`;
    const ids: string[] = [];
    // New connections: the kernel (SO_REUSEPORT) or the primary spreads them over the workers.
    for (let i = 0; i < 16; i++) {
      const agent = new Agent();
      const id = `w-${process.pid}-${i}`;
      ids.push(id);
      expect((await post(`${gw.url}/v2/models/simple/infer`, JSON.stringify({ id, ...JSON.parse(simpleBody()) as object }), {}, agent)).status).toBe(200);
      agent.destroy();
    }
    const doc = await (await fetch(`${metrics}/dashboard/recent.json?limit=1000`)).json() as
      { size: number; requests: { id?: string; worker?: number; start_ms: number }[] };
    const ours = doc.requests.filter((r) => r.id !== undefined && ids.includes(r.id));
    expect(ours.map((r) => r.id).sort()).toEqual([...ids].sort());
    expect(new Set(ours.map((r) => r.worker))).toEqual(new Set([1, 2]));
    const starts = doc.requests.map((r) => r.start_ms);
    expect(starts).toEqual([...starts].sort((a, b) => b - a));
    expect(doc.size).toBe(2 * 512);
    const one = await (await fetch(`${metrics}/dashboard/recent.json?id=${ids[5]!}`)).json() as { requests: { id: string; hops: unknown[] }[] };
    expect(one.requests.map((r) => [r.id, r.hops.length])).toEqual([[ids[5], HOPS.length]]);
    const summary = await (await fetch(`${metrics}/dashboard/summary.json`)).json() as
      { models: { model: string; count: number }[]; max_in_flight: number; backends: { state: string }[] };
    expect(summary.models.find((m) => m.model === 'simple')!.count).toBeGreaterThanOrEqual(16);
    expect(summary.max_in_flight).toBe(2 * 2048);
    expect(summary.backends.map((b) => b.state)).toEqual(['ready']);
    expect((await fetch(`${metrics}/metrics`)).status).toBe(200);
  }, 60_000);
});
