// Preloaded into the soak's gateway (NODE_OPTIONS=--require, set by bench/soak.js only): once a
// second, process.memoryUsage() — V8 heap, external and ArrayBuffer memory besides RSS — goes to the
// file named by BENCH_SOAK_MEM_FILE, so RSS growth can be told apart (heap vs buffers). The
// gateway's own code knows nothing of it; the timer is unref'd so it never holds the process.
'use strict';
const fs = require('node:fs');

const file = process.env.BENCH_SOAK_MEM_FILE;
if (file) {
  setInterval(() => {
    try { fs.writeFileSync(file, JSON.stringify(process.memoryUsage())); } catch { /* best effort */ }
  }, 1000).unref();
}
