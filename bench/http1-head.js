// The fast path's request-head parser (gateway/ingress/http1/head.ts) against llhttp as node:http
// runs it (Node's HTTPParser binding, through the legacy `_http_common` module, no lenient flags),
// on the head tritonclient sends for a V2 binary infer (captured in test/fuzz/http1-head.test.ts),
// in one read and split in two reads. Each side reads what a handler needs: ours the method, the
// target string, Content-Length, keep-alive and one header value (Inference-Header-Content-Length);
// llhttp its callback with the method, url, every header name and value as strings and keep-alive
// (what node:http gets before it builds the IncomingMessage). Prints ns per head and, with
// --gc-bytes, the heap bytes allocated per head: heapUsed after a forced GC and after the run, with
// a young generation large enough that no GC runs in between (checked; the line says when one did).
//   node bench/http1-head.js [--heads 200000] [--rounds 3]                (needs `npm run build`)
//   node --expose-gc --min-semi-space-size=64 --max-semi-space-size=64 bench/http1-head.js --gc-bytes --heads 50000
'use strict';
const { createRequire } = require('node:module');
/** @type {any} the legacy module has no type declarations */
const { HTTPParser } = createRequire(__filename)('_http_common');
const { ACCEPTED, KNOWN_NAMES, HeadParser } = require('#dist/gateway/ingress/http1/head.js');

const argv = process.argv.slice(2);
const opt = (n, d) => { const i = argv.indexOf(n); return i >= 0 ? argv[i + 1] : d; };
const heads = Number(opt('--heads', 200_000));
const rounds = Number(opt('--rounds', 3));
const gcBytes = argv.includes('--gc-bytes');

const HEAD = Buffer.from('POST /v2/models/simple/infer HTTP/1.1\r\nUser-Agent: python/gevent-http-client-2.6.1\r\n'
  + 'Inference-Header-Content-Length: 140\r\nHost: 127.0.0.1:8000\r\nContent-Length: 156\r\n\r\n', 'latin1');
const SPLIT = 61; // inside the User-Agent value
const IHCL = KNOWN_NAMES.indexOf('inference-header-content-length');
const LIMITS = { maxHeaderBytes: 16 * 1024, maxHeaderCount: 100, maxUrlBytes: 8192 };

let sink = 0;

function ours(split) {
  const h = new HeadParser(LIMITS);
  const a = split ? HEAD.subarray(0, SPLIT) : HEAD;
  const b = HEAD.subarray(SPLIT);
  return () => {
    for (let i = 0; i < heads; i++) {
      let v = h.feed(a, 0, a.length);
      if (split) v = h.feed(b, 0, b.length);
      if (v !== ACCEPTED) throw new Error(`not accepted: ${h.handOffReason}`);
      sink += h.target().length + h.contentLength + (h.keepAlive ? 1 : 0) + (h.value(IHCL)?.length ?? 0);
    }
  };
}

function llhttp(split) {
  const p = new HTTPParser();
  p.initialize(HTTPParser.REQUEST, {}, LIMITS.maxHeaderBytes, HTTPParser.kLenientNone);
  p.maxHeaderPairs = (LIMITS.maxHeaderCount + 1) << 1;
  let pending = [];
  let url = '';
  p[HTTPParser.kOnHeaders] = (h, u) => { pending.push(...h); url += u; };
  p[HTTPParser.kOnHeadersComplete] = (_maj, _min, headers, method, u, _s, _m, _up, keepAlive) => {
    const h = headers ?? pending;
    sink += (u ?? url).length + h.length + method + (keepAlive ? 1 : 0);
    pending = [];
    url = '';
    return 1; // no body to read here: the next head follows at once
  };
  p[HTTPParser.kOnBody] = () => undefined;
  p[HTTPParser.kOnMessageComplete] = () => undefined;
  const a = split ? HEAD.subarray(0, SPLIT) : HEAD;
  const b = HEAD.subarray(SPLIT);
  return () => {
    for (let i = 0; i < heads; i++) {
      const r = p.execute(a);
      if (split) p.execute(b);
      if (typeof r !== 'number') throw r;
    }
  };
}

let gcs = 0;
if (gcBytes) new PerformanceObserver((list) => { gcs += list.getEntries().length; }).observe({ entryTypes: ['gc'] });

async function measure(name, run) {
  run(); // warm-up: the JIT, and the parser's first allocations
  if (gcBytes) {
    globalThis.gc?.();
    await new Promise((resolve) => setTimeout(resolve, 50)); // the observer hears of that GC first
  }
  const gcsBefore = gcs;
  const before = process.memoryUsage().heapUsed;
  const t0 = process.hrtime.bigint();
  run();
  const ns = Number(process.hrtime.bigint() - t0) / heads;
  const grown = process.memoryUsage().heapUsed - before;
  await new Promise((resolve) => setTimeout(resolve, 50));
  const bytes = gcBytes ? `  ${(grown / heads).toFixed(1)} B/head allocated${gcs > gcsBefore ? ` (NOT exact: ${gcs - gcsBefore} GCs ran)` : ''}` : '';
  console.log(`${name.padEnd(20)} ${ns.toFixed(0).padStart(6)} ns/head${bytes}`);
}

async function main() {
  if (gcBytes && globalThis.gc === undefined) throw new Error('--gc-bytes needs node --expose-gc (see the top of this file)');
  for (let r = 0; r < rounds; r++) {
    await measure('ours, one read', ours(false));
    await measure('llhttp, one read', llhttp(false));
    await measure('ours, two reads', ours(true));
    await measure('llhttp, two reads', llhttp(true));
  }
  if (sink === 0) console.log('');
}
void main();
