// Server-sent events (the generate_stream answer, as Triton's HTTP frontend writes it, and V2 infer
// asked for with `Accept: text/event-stream`): the status and `text/event-stream` once, then one
// `data: <json>\n\n` event per response (with an `event: <name>` line before it when the event is
// named, as OpenAI's Responses API sends them), with back-pressure (WHATWG HTML §9.2 "Server-sent events").
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

  /** Writes one event (named: `name`); resolves when the client can take more (undefined: at once). */
  write(event: Buffer, name?: string): Promise<void> | undefined {
    const ok = this.res.write(Buffer.concat([...named(name), DATA, event, END]));
    return ok ? undefined : new Promise<void>((resolve) => this.res.once('drain', resolve));
  }

  /** Ends the stream, after a last event when given (a connection already gone is left alone). */
  end(event?: Buffer, name?: string): void {
    this.start(200);
    if (this.res.destroyed) return;
    if (event === undefined) this.res.end();
    else this.res.end(Buffer.concat([...named(name), DATA, event, END]));
  }
}

/** The `event:` line of a named event (its name is ours: no line breaks). */
const named = (name: string | undefined): Buffer[] => (name === undefined ? [] : [Buffer.from(`event: ${name}\n`)]);

const DATA = Buffer.from('data: ');
const END = Buffer.from('\n\n');

/**
 * Whether an Accept header names `text/event-stream` with a non-zero q (RFC 9110 §12.5.1): only the
 * media type itself, not a wildcard range (`text/*` or the any-type one), which clients send without
 * asking for a stream.
 */
export function acceptsEventStream(accept: string | undefined): boolean {
  if (accept === undefined || !/event-stream/i.test(accept)) return false;
  for (const range of accept.split(',')) {
    const [type, ...params] = range.split(';');
    if (type!.trim().toLowerCase() !== 'text/event-stream') continue;
    const q = params.map((p) => p.trim().toLowerCase()).find((p) => p.startsWith('q='));
    if (q === undefined || Number(q.slice(2)) > 0) return true;
  }
  return false;
}
