// Letting go of what a closed HTTP/2 stream's listeners hold. The stream's JS object outlives its
// close until a full collection: Node's native handle keeps it, and V8's scavenges take that
// handle as a strong root. Through the listeners on the stream (and, on the server side, on the
// compatibility request and response it holds), each request's objects would survive every
// scavenge and be promoted to the old generation, and promotion is what a young collection spends
// its time on (bench/RESULTS.md, "The young generation's size and unhook's promotions"). Nothing
// else is emitted after 'close', so every listener can go.
import type { EventEmitter } from 'node:events';

/** Removes every listener of `e`, which has closed; a no-op 'error' listener stays, in case. */
export function unhook(e: EventEmitter): void {
  e.removeAllListeners();
  e.on('error', ignore);
}

function ignore(): void { /* a closed stream's late error has nobody to tell */ }
