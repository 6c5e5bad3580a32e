// What a jest process still holds when it ends: loaded with `--require` into each jest run by
// scripts/test.js. A process that ends by itself (no process.exit) then closes every libuv handle
// still open — unref'd ones too, which never kept it alive and which
// process.getActiveResourcesInfo() leaves out — and waits for every request still pending
// (node::Environment::CleanupHandles, after the 'exit' event). A jest run once spun there forever.
// Anything listed here is something a test opened and did not close: its type, and for a handle
// where it was created, so the test can be found. Timers are left out (JS timers are not closed
// one by one at teardown); so are promises (not tracked: trackPromises false keeps the cost low).
'use strict';
const { createHook } = require('node:async_hooks');
const { writeSync } = require('node:fs');

/** Resources no test opens by hand: timers, ticks, the parsers' and dns's own objects. */
const IGNORED = new Set(['Timeout', 'Immediate', 'TickObject', 'Microtask', 'HTTPINCOMINGMESSAGE', 'HTTPCLIENTREQUEST', 'DNSCHANNEL']);
/** Short-lived requests (a write, an fs call): their type is enough, no stack taken for each. */
const REQUEST = /REQ|^WRITEWRAP$|^SHUTDOWNWRAP$/;

const live = new Map();
const hook = createHook({
  trackPromises: false,
  init(id, type) {
    if (IGNORED.has(type)) return;
    let where = '';
    if (!REQUEST.test(type)) {
      const limit = Error.stackTraceLimit;
      Error.stackTraceLimit = 30;
      const stack = new Error().stack;
      Error.stackTraceLimit = limit;
      if (/createWritableStdioStream|getStdin/.test(stack)) return; // the process's own stdio
      where = stack.split('\n').slice(2).map((l) => l.trim())
        .filter((l) => !/\(node:|^at node:/.test(l) && !l.includes('/node_modules/jest-') && !l.includes('open-at-exit')).slice(0, 4).join(' < ');
    }
    live.set(id, `${type} ${where}`.trim());
  },
  destroy(id) {
    live.delete(id);
  },
});
hook.enable();

process.on('exit', (code) => {
  // A test that emits 'exit' itself (a CLI's exit path under test) is not the end.
  if (/\.[jt]s:\d+:\d+\)?$/m.test(new Error().stack.split('\n').filter((l) => !l.includes('open-at-exit') && !/\(node:|at node:/.test(l)).join('\n'))) return;
  hook.disable();
  const counts = new Map();
  for (const l of live.values()) counts.set(l, (counts.get(l) ?? 0) + 1);
  const lines = [...counts].map(([l, n]) => `  ${n} × ${l}`);
  writeSync(2, `open-at-exit: pid ${process.pid}, exit code ${code}: ${lines.length === 0 ? 'nothing left open' : `still open:\n${lines.join('\n')}`}\n`);
});
