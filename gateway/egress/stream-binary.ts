// A binary answer written as it arrives from Triton (docs/cut-through.md, pipeline/binary-streamer.ts):
// the status line, headers and JSON header leave in one write with the first payload bytes, then
// every payload view is written by reference, the upstream call paused while the client does not
// take them (back-pressure both ways). An answer that goes wrong after the header was sent can
// only end in a closed connection (docs/differences.md).
import type { OutgoingHttpHeaders, ServerResponse } from 'node:http';

/** Where the bytes come from: paused while the client does not read (the upstream call's flow). */
export interface Source {
  pause(): void;
  resume(): void;
}

const uncork = (res: ServerResponse): void => res.uncork();

/** Writes the head: corked until the next tick, so that the payload already here leaves with it. */
export function startStreamedAnswer(res: ServerResponse, headers: OutgoingHttpHeaders, header: Buffer): void {
  res.cork();
  process.nextTick(uncork, res);
  res.writeHead(200, headers);
  res.write(header);
}

/** Writes a view of the answer; a refused write pauses `source` until the response drains. */
export function writeStreamed(res: ServerResponse, view: Buffer, source: Source): void {
  if (!res.write(view)) {
    source.pause();
    res.once('drain', () => source.resume());
  }
}
