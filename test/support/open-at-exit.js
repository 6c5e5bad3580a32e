// What a jest process still holds when it ends: loaded with `--require` into each jest run by
// scripts/test.js. A process that ends by itself (no process.exit) then closes every libuv handle
// still open — unref'd ones too, which never kept it alive and which
// process.getActiveResourcesInfo() leaves out — and waits for every request still pending
// (node::Environment::CleanupHandles, after the 'exit' event).
// Anything listed here is something a test opened and did not close: its type, and for a handle
// where it was created, so the test can be found. Promises are not tracked (trackPromises false
// keeps the cost low).
// A jest run once spun there, at full CPU, for ever: the fault proxy had reset a socket while its
// shutdown was in flight, which Node marks closing without closing (test/support/fault-proxy.ts,
// resetSocket, and its test in test/faults/fault-proxy.test.ts).
'use strict';
const { createHook } = require('node:async_hooks');
const { writeSync } = require('node:fs');

/**
 * What Node's teardown closes or waits for: libuv handles (sockets, servers, pipes, child processes,
 * signal and fs watchers, message ports, worker threads) and requests (fs, dns, connect, write,
 * shutdown, threadpool work). Other async resources (TLS, an HTTP/2 session or stream, a parser) end
 * with their handle; their destroy is only reported when they are garbage-collected, so listing
 * them would name things already closed. The JS timers are left out too (not closed one by one).
 */
const TRACKED = /^(TCP|TCPSERVER|PIPE|PIPESERVER|TTY|UDP|PROCESS|SIGNAL|FSEVENT)WRAP$|^STATWATCHER$|^MESSAGEPORT$|^WORKER$|REQ|^WRITEWRAP$|^SHUTDOWNWRAP$|CONNECTWRAP$|QUERYWRAP$|^SENDWRAP$|^ZLIB$|JOB$/;
/** Short-lived requests (a write, an fs call): their type is enough, no stack taken for each. */
const REQUEST = /REQ|^WRITEWRAP$|^SHUTDOWNWRAP$|CONNECTWRAP$|JOB$|^ZLIB$|QUERYWRAP$/;

const live = new Map();
/** The handle object of each live stream handle (TCP, pipe, TTY), to tell open from closed at the report. */
const handles = new Map();
/**
 * Whether a stream handle is still open: its fd (-1 once closed). A closed handle's destroy is
 * only reported once its object is garbage-collected, so a handle closed by a test can still be
 * listed; its state tells the two apart.
 */
function stateOf(id) {
  const h = handles.get(id)?.deref();
  if (h === undefined) return '';
  try {
    return typeof h.fd === 'number' ? (h.fd < 0 ? ' (closed, not yet collected)' : ` (open, fd ${h.fd})`) : '';
  } catch {
    return '';
  }
}
/** Writes what is still open; `when` says at which moment. */
function report(when) {
  const counts = new Map();
  for (const [id, l] of live) {
    const key = `${l}${stateOf(id)}`;
    counts.set(key, (counts.get(key) ?? 0) + 1);
  }
  const lines = [...counts].map(([l, n]) => `  ${n} × ${l}`);
  writeSync(2, `open-at-exit: pid ${process.pid}, ${when}: ${lines.length === 0 ? 'nothing left open' : `still open:\n${lines.join('\n')}`}\n`);
}
// scripts/test.js signals a run that outlives its report before it kills it: a run kept alive by a
// handle (JavaScript still runs) says what holds it. (Registered before the hook: not listed.)
process.on('SIGUSR2', () => report('on SIGUSR2, the run has not ended'));
const hook = createHook({
  trackPromises: false,
  init(id, type, _trigger, resource) {
    if (!TRACKED.test(type)) return;
    if (/^(TCP|PIPE|TTY)WRAP$/.test(type)) handles.set(id, new WeakRef(resource));
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
    handles.delete(id);
  },
});
hook.enable();

process.on('exit', (code) => {
  // A test that emits 'exit' itself (a CLI's exit path under test) is not the end.
  if (/\.[jt]s:\d+:\d+\)?$/m.test(new Error().stack.split('\n').filter((l) => !l.includes('open-at-exit') && !/\(node:|at node:/.test(l)).join('\n'))) return;
  hook.disable();
  report(`exit code ${code}`);
  // Node's handle teardown follows (node::Environment::CleanupHandles): it closes what is listed
  // and waits for each close. A handle whose close never comes keeps it waiting for ever, at full
  // CPU: that is what a faults run once did, with two of the fault proxy's sockets listed here (a
  // reset refused during a shutdown; test/support/fault-proxy.ts, resetSocket). scripts/test.js
  // then kills the run after its grace and fails it; this list names the suspects.
});
