// Server-sent events (the generate_stream answer, as Triton's HTTP frontend writes it): the status
// and `text/event-stream` once, then one `data: <json>\n\n` event per response, with back-pressure.
import type { OutgoingHttpHeaders, ServerResponse } from 'node:http';

const SSE_HEADERS = { 'Content-Type': 'text/event-stream; charset=utf-8' };

export class EventStream {
  #started = false;

  constructor(private readonly res: ServerResponse) {}

  get started(): boolean {
    return this.#started;
  }

  /** Sends the status line and headers (once), with `extra` ones (Server-Timing). */
  start(status: number, extra?: OutgoingHttpHeaders): void {
    if (this.#started) return;
    this.#started = true;
    this.res.writeHead(status, extra === undefined ? SSE_HEADERS : { ...SSE_HEADERS, ...extra });
  }

  /** Writes one event; resolves when the client can take more (undefined: at once). */
  write(event: Buffer): Promise<void> | undefined {
    const ok = this.res.write(Buffer.concat([DATA, event, END]));
    return ok ? undefined : new Promise<void>((resolve) => this.res.once('drain', resolve));
  }

  /** Ends the stream, after a last event when given (a connection already gone is left alone). */
  end(event?: Buffer): void {
    this.start(200);
    if (this.res.destroyed) return;
    if (event === undefined) this.res.end();
    else this.res.end(Buffer.concat([DATA, event, END]));
  }
}

const DATA = Buffer.from('data: ');
const END = Buffer.from('\n\n');
