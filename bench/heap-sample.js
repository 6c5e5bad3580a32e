// Preloaded into a gateway (`node --require bench/heap-sample.js …`, or bench/cpu-per-request.js
// --heap-sample FILE): V8's sampling heap profiler over every allocation, those collected by a
// scavenge or a mark-compact included, so that short-lived garbage (what a request allocates and
// drops) is seen and not only what survives. Samples from HEAP_SAMPLE_FROM_MS (default 2000) after
// start for HEAP_SAMPLE_FOR_MS (default 5000), one sample per HEAP_SAMPLE_INTERVAL bytes on average
// (default 128); with HEAP_SAMPLE_PROMOTED=1, only what no scavenge collected (what was promoted);
// then writes the profile (Chrome's .heapprofile format) to HEAP_SAMPLE_OUT once.
// Summarised by bench/heap-summary.js.
'use strict';
const inspector = require('node:inspector');
const fs = require('node:fs');

const out = process.env.HEAP_SAMPLE_OUT;
if (out !== undefined && out !== '') {
  const session = new inspector.Session();
  session.connect();
  session.post('HeapProfiler.enable');
  setTimeout(() => {
    session.post('HeapProfiler.startSampling', {
      samplingInterval: Number(process.env.HEAP_SAMPLE_INTERVAL ?? 128),
      includeObjectsCollectedByMajorGC: true,
      // HEAP_SAMPLE_PROMOTED=1: only what outlived the scavenges (promoted, or still live).
      includeObjectsCollectedByMinorGC: process.env.HEAP_SAMPLE_PROMOTED !== '1',
    });
    setTimeout(() => session.post('HeapProfiler.stopSampling', (err, r) => {
      fs.writeFileSync(out, err ? JSON.stringify({ error: err.message }) : JSON.stringify(r.profile));
    }), Number(process.env.HEAP_SAMPLE_FOR_MS ?? 5000)).unref();
  }, Number(process.env.HEAP_SAMPLE_FROM_MS ?? 2000)).unref();
}
