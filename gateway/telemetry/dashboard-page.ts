// The /dashboard page (telemetry/dashboard.ts): HTML, a stylesheet and one script, served from
// the gateway itself (no CDN: the metrics port is often on a network with no way out). The script
// polls /dashboard/summary.json and /dashboard/recent.json every 2 s and draws three things: each
// model's rate, 5xx rate and p50/p99 over the last polls (quantiles from the duration buckets,
// interpolated within a bucket as Prometheus' histogram_quantile does); the backend set; and a
// waterfall of recent requests, each a bar of its hops placed at their start (cut-through overlaps
// them), with bytes and copies. `?id=<id>` (or the search box) shows the request with that body
// `id` or `x-request-id`, its hops listed with their exact durations.
//
// The page comes with its first documents in a JSON data block (`<script type="application/json">`,
// which is data, not script: the Content-Security-Policy has nothing to allow), drawn by the
// script as soon as it runs, before the first paint; the polls take over from there. Drawn by
// the one script rather than rendered as markup on the server: the waterfall's bars are placed
// with style properties, which the policy forbids in markup.
//
// Every value that comes from a request is written with textContent or a data attribute, never
// as markup; the page's Content-Security-Policy allows no inline script or style either.
// (Plain strings, no template literals in the script: it is embedded here verbatim.)

/** The recent requests the page shows (the newest, from every worker's ring). */
export const SHOWN = 60;

/** The documents the page is served with: /dashboard/summary.json, recent.json?limit=SHOWN and ?id= (null: none). */
export interface FirstDocuments {
  readonly summary: object | null;
  readonly recent: object | null;
  readonly wanted: object | null;
}

/**
 * The page with its first documents. `<` is escaped in the JSON, so that nothing in a value (a
 * request id of `</script>…`) can end the data block (HTML, "Restrictions for contents of script
 * elements").
 */
export function dashboardHtml(first: FirstDocuments): string {
  return DASHBOARD_HTML.replace('<script type="application/json" id="first">null</script>',
    () => `<script type="application/json" id="first">${JSON.stringify(first).replace(/</g, '\\u003c')}</script>`);
}

const DASHBOARD_HTML = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>tensorgate dashboard</title>
<link rel="stylesheet" href="/dashboard/app.css">
<script type="application/json" id="first">null</script>
<script src="/dashboard/app.js" defer></script>
</head>
<body>
<header>
  <h1>tensorgate</h1>
  <span id="status">connecting…</span>
  <span id="inflight"></span>
  <form id="find"><label>request id <input id="id" name="id" maxlength="256" autocomplete="off"></label> <button>find</button> <a href="/dashboard">all</a></form>
</header>
<main>
<section><h2>Models <small>last 10 s</small></h2>
<table id="models"><thead><tr><th>model</th><th class="n">req/s</th><th class="n">5xx/s</th><th class="n">p50 ms</th><th class="n">p99 ms</th><th class="n">requests</th></tr></thead><tbody></tbody></table>
</section>
<section><h2>Backends</h2>
<table id="backends"><thead><tr><th>address</th><th>target</th><th>state</th><th class="n">ejections</th></tr></thead><tbody></tbody></table>
</section>
<section id="found" hidden><h2>Request <span id="found-id"></span></h2>
<div id="found-bar"></div>
<table id="detail"><thead><tr><th>hop</th><th class="n">starts at ms</th><th class="n">ms</th><th class="n">bytes in</th><th class="n">bytes out</th><th class="n">bytes copied</th><th class="n">copies</th><th class="n">allocations</th></tr></thead><tbody></tbody></table>
</section>
<section><h2>Recent requests <small id="recent-note"></small></h2>
<div id="legend"></div>
<table id="recent"><thead><tr><th>time</th><th>id</th><th>route</th><th>model</th><th>form</th><th>status</th><th class="n">ms</th><th class="n">bytes in</th><th class="n">bytes out</th><th class="n">copied</th><th class="wf">hops</th></tr></thead><tbody></tbody></table>
</section>
</main>
</body>
</html>
`;

export const DASHBOARD_CSS = `
body { font: 13px/1.4 system-ui, sans-serif; margin: 0; color: #1d2330; background: #f6f7f9; }
header { display: flex; gap: 1.5em; align-items: baseline; padding: .6em 1em; background: #1d2330; color: #fff; }
header h1 { font-size: 16px; margin: 0; }
header form { margin-left: auto; }
header a { color: #9cf; }
main { padding: 0 1em 1em; }
h2 { font-size: 14px; margin: 1.2em 0 .4em; }
h2 small { font-weight: normal; color: #667; }
table { border-collapse: collapse; background: #fff; width: 100%; }
th, td { text-align: left; padding: 2px 6px; border-bottom: 1px solid #e3e6ea; white-space: nowrap; }
th.n, td.n { text-align: right; font-variant-numeric: tabular-nums; }
th.wf { width: 25%; }
/* Long ids, routes and error codes are cut (the whole value in the cell's title), so that the
   table fits a 1400 px window. */
td .t { display: inline-block; max-width: 14em; overflow: hidden; text-overflow: ellipsis; vertical-align: bottom; }
td .t.wide { max-width: 22em; }
tr.err td { color: #a21; }
tr.sel td { background: #fff6d8; }
.bar { position: relative; height: 12px; background: #eef0f3; min-width: 120px; }
.bar span { position: absolute; top: 0; height: 12px; min-width: 1px; opacity: .85; }
#found-bar .bar { height: 18px; margin-bottom: .4em; } #found-bar .bar span { height: 18px; }
#legend span { display: inline-block; margin-right: 1em; }
#legend i { display: inline-block; width: 10px; height: 10px; margin-right: 4px; vertical-align: middle; }
.h-ingress_read { background: #4e79a7; } .h-decode { background: #f28e2b; } .h-upstream_send { background: #76b7b2; }
.h-triton { background: #59a14f; } .h-upstream_receive { background: #edc948; } .h-encode { background: #b07aa1; }
.h-egress_write { background: #ff9da7; }
.state-ready { color: #2a7a2a; } .state-ejected, .state-unhealthy { color: #a21; } .state-connecting { color: #a60; }
`;

export const DASHBOARD_JS = String.raw`'use strict';
(function () {
  var POLL_MS = 2000;
  var WINDOW_MS = 10000;
  var SHOWN = ${SHOWN};
  var history = [];
  var recent = [];
  var hops = [];
  var wanted = new URLSearchParams(location.search).get('id') || '';

  function el(tag, text, cls) {
    var e = document.createElement(tag);
    if (text !== undefined && text !== null) e.textContent = String(text);
    if (cls) e.className = cls;
    return e;
  }
  function num(v, digits) {
    if (v === undefined || v === null || Number.isNaN(v)) return '';
    return digits === undefined ? String(v) : v.toFixed(digits);
  }
  function cell(tr, v, isNumber) {
    var td = el('td', v, isNumber ? 'n' : '');
    tr.appendChild(td);
    return td;
  }
  // A text that may be long: cut to the column's width, whole in the title.
  function cutCell(tr, v, wide) {
    var td = el('td');
    td.appendChild(el('span', v, wide ? 't wide' : 't')).title = String(v);
    tr.appendChild(td);
    return td;
  }
  function getJSON(path) {
    return fetch(path, { cache: 'no-store' }).then(function (r) {
      if (!r.ok) throw new Error(path + ': ' + r.status);
      return r.json();
    });
  }

  // histogram_quantile over bucket deltas: linear within the bucket, the +Inf bucket's lower bound.
  function quantile(q, bounds, counts) {
    var total = counts.reduce(function (a, b) { return a + b; }, 0);
    if (total === 0) return NaN;
    var rank = q * total;
    var seen = 0;
    for (var i = 0; i < counts.length; i++) {
      if (seen + counts[i] >= rank && counts[i] > 0) {
        if (i >= bounds.length) return bounds[bounds.length - 1];
        var lo = i === 0 ? 0 : bounds[i - 1];
        return lo + (bounds[i] - lo) * (rank - seen) / counts[i];
      }
      seen += counts[i];
    }
    return bounds[bounds.length - 1];
  }

  function drawModels(now) {
    history.push(now);
    while (history.length > 2 && now.now_ms - history[1].now_ms >= WINDOW_MS) history.shift();
    var then = history[0];
    var dt = (now.now_ms - then.now_ms) / 1000;
    var before = {};
    // One document so far (the page's first): quantiles since the start, no rate yet.
    if (then !== now) then.models.forEach(function (m) { before[m.model] = m; });
    var body = document.querySelector('#models tbody');
    body.replaceChildren();
    now.models.forEach(function (m) {
      var b = before[m.model] || { count: 0, errors: 0, buckets: m.buckets.map(function () { return 0; }) };
      var delta = m.buckets.map(function (c, i) { return c - (b.buckets[i] || 0); });
      var tr = el('tr');
      tr.dataset.model = m.model;
      cell(tr, m.model);
      cell(tr, dt > 0 ? num((m.count - b.count) / dt, 1) : '', true);
      cell(tr, dt > 0 ? num((m.errors - b.errors) / dt, 1) : '', true);
      cell(tr, num(quantile(0.5, now.boundaries, delta) * 1000, 2), true);
      cell(tr, num(quantile(0.99, now.boundaries, delta) * 1000, 2), true);
      cell(tr, m.count, true);
      body.appendChild(tr);
    });
    var flight = 'in flight: ' + now.in_flight + (now.max_in_flight ? ' / ' + now.max_in_flight : '');
    document.getElementById('inflight').textContent = flight;
    var bb = document.querySelector('#backends tbody');
    bb.replaceChildren();
    now.backends.forEach(function (x) {
      var tr = el('tr');
      cell(tr, x.address);
      cell(tr, x.target);
      cell(tr, x.state).className = 'state-' + String(x.state).replace(/[^a-z]/g, '');
      cell(tr, x.ejections, true);
      bb.appendChild(tr);
    });
  }

  function bar(r) {
    var div = el('div', undefined, 'bar');
    var total = r.duration_ms > 0 ? r.duration_ms : 1;
    r.hops.forEach(function (h) {
      var s = el('span', undefined, 'h-' + h.hop);
      s.style.left = Math.min(100, 100 * h.at_ms / total) + '%';
      s.style.width = Math.max(0, Math.min(100, 100 * h.ms / total)) + '%';
      s.title = h.hop + ' ' + h.ms.toFixed(3) + ' ms';
      div.appendChild(s);
    });
    return div;
  }

  function drawRecent() {
    var body = document.querySelector('#recent tbody');
    body.replaceChildren();
    recent.forEach(function (r) {
      var tr = el('tr', undefined, r.status >= 500 ? 'err' : '');
      tr.dataset.seq = r.seq;
      if (wanted && (r.id === wanted || r.x_request_id === wanted)) tr.className += ' sel';
      cell(tr, new Date(r.start_ms).toISOString().slice(11, 23));
      cutCell(tr, r.id || r.x_request_id || '');
      cutCell(tr, r.route);
      cutCell(tr, r.model || '');
      cutCell(tr, (r.encoding_in || '') + (r.encoding_out ? ' \u2192 ' + r.encoding_out : ''));
      cutCell(tr, r.status + (r.error_code ? ' ' + r.error_code : ''), true);
      cell(tr, num(r.duration_ms, 3), true);
      cell(tr, num(r.bytes_in), true);
      cell(tr, num(r.bytes_out), true);
      cell(tr, r.copies === undefined ? '' : r.bytes_copied + ' (' + r.copies + ')', true);
      tr.appendChild(el('td')).appendChild(bar(r));
      tr.addEventListener('click', function () { showDetail(r); });
      body.appendChild(tr);
    });
  }

  function showDetail(r) {
    document.getElementById('found').hidden = false;
    var label = (r.id || r.x_request_id || '#' + r.seq) + ': ' + r.method + ' ' + r.route + (r.model ? ' ' + r.model : '')
      + ', ' + r.status + ', ' + num(r.duration_ms, 3) + ' ms' + (r.worker ? ' (worker ' + r.worker + ')' : '');
    document.getElementById('found-id').textContent = label;
    document.getElementById('found-bar').replaceChildren(bar(r));
    var body = document.querySelector('#detail tbody');
    body.replaceChildren();
    r.hops.forEach(function (h) {
      var tr = el('tr');
      tr.dataset.hop = h.hop;
      tr.dataset.ms = String(h.ms);
      tr.dataset.atMs = String(h.at_ms);
      cell(tr, h.hop).appendChild(el('i', undefined, 'h-' + h.hop));
      cell(tr, num(h.at_ms, 3), true);
      cell(tr, num(h.ms, 3), true);
      cell(tr, h.bytes_in, true);
      cell(tr, h.bytes_out, true);
      cell(tr, h.bytes_copied, true);
      cell(tr, h.copies, true);
      cell(tr, h.allocations, true);
      body.appendChild(tr);
    });
  }

  function legend() {
    var l = document.getElementById('legend');
    if (l.childElementCount > 0) return;
    hops.forEach(function (h) {
      var s = el('span', h);
      s.insertBefore(el('i', undefined, 'h-' + h), s.firstChild);
      l.appendChild(s);
    });
  }

  function showRecent(doc) {
    hops = doc.hops;
    legend();
    document.getElementById('recent-note').textContent = 'ring of ' + doc.size + ', at most ' + doc.per_second + '/s';
    recent = doc.requests;
    drawRecent();
  }

  // The request asked for (?id=): the newest one with that body id or x-request-id.
  function showWanted(doc) {
    if (doc.requests.length > 0) showDetail(doc.requests[0]);
    else {
      document.getElementById('found').hidden = false;
      document.querySelector('#detail tbody').replaceChildren();
      document.getElementById('found-bar').replaceChildren();
      document.getElementById('found-id').textContent = wanted + ': not in the ring (sampled: at most ' + doc.per_second + '/s)';
    }
  }

  function updated(ms) {
    document.getElementById('status').textContent = 'updated ' + new Date(ms).toISOString().slice(11, 19);
  }

  function poll() {
    // The newest SHOWN each time (with workers > 1 they come from every worker's ring, merged).
    Promise.all([
      getJSON('/dashboard/summary.json').then(drawModels),
      getJSON('/dashboard/recent.json?limit=' + SHOWN).then(showRecent),
      wanted ? getJSON('/dashboard/recent.json?limit=1&id=' + encodeURIComponent(wanted)).then(showWanted) : null,
    ]).then(function () {
      updated(Date.now());
    }, function (err) {
      document.getElementById('status').textContent = 'error: ' + err.message;
    });
  }

  // The documents the page came with (telemetry/dashboard.ts), drawn before the first paint.
  function drawFirst() {
    var first = JSON.parse(document.getElementById('first').textContent);
    if (!first || !first.summary || !first.recent || (wanted && !first.wanted)) return false;
    drawModels(first.summary);
    showRecent(first.recent);
    if (wanted) showWanted(first.wanted);
    updated(first.summary.now_ms);
    return true;
  }

  document.getElementById('id').value = wanted;
  if (!drawFirst()) poll();
  setInterval(poll, POLL_MS);
})();
`;
