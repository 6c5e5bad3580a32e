// The Server-Timing header (W3C Server Timing): one entry per hop that has ended, with its
// duration in milliseconds, then the total so far. Hop names are the ledger's. A hop still running
// when the head is sent (receiving a streamed answer, every hop after a server-sent event stream's
// head) is not in the header; it follows in a Server-Timing trailer, which the spec allows
// (https://w3c.github.io/server-timing/#the-server-timing-header-field), wherever the transport
// carries one to the client (`trailerReaches`).
import type { IncomingMessage, OutgoingHttpHeaders, ServerResponse } from 'node:http';
import { type Hop, HOPS, type Ledger } from '../infer/ledger';
import { nowNs } from '../infer/clock';

/** The hops that have ended, but those in `sent` (named already in the head); then the total. */
export function serverTiming(ledger: Ledger, startNs: number, nowNs: number, sent?: ReadonlySet<Hop>): string {
  const parts: string[] = [];
  for (const hop of HOPS) {
    const startNs = ledger.startNs(hop);
    const endNs = ledger.endNs(hop);
    if (startNs === 0 || endNs === 0 || sent?.has(hop) === true) continue;
    parts.push(`${hop};dur=${((endNs - startNs) / 1e6).toFixed(3)}`);
  }
  parts.push(`total;dur=${((nowNs - startNs) / 1e6).toFixed(3)}`);
  return parts.join(', ');
}

const TE_TRAILERS = /(?:^|,)\s*trailers\s*(?:;|,|$)/i;

/**
 * Whether a trailer reaches the client: HTTP/2 carries one on any answer (a trailing HEADERS
 * frame); HTTP/1.1 only in the chunked encoding, which an answer takes for it when the client
 * said it accepts trailers (`TE: trailers`, RFC 9110 §10.1.4) — others keep their Content-Length,
 * and the access line alone has the later hops.
 */
export function trailerReaches(req: IncomingMessage): boolean {
  return req.httpVersionMajor === 2 || (req.httpVersion === '1.1' && TE_TRAILERS.test(String(req.headers.te ?? '')));
}

/**
 * Server-Timing of an answer whose hops go on after its head (a streamed binary answer, server-sent
 * events): the head names the hops that ended before it, the trailer the rest and the final total.
 */
export class SplitServerTiming {
  /** The hops the head named; undefined until it was sent, or when no trailer follows. */
  #inHead: Set<Hop> | undefined;

  constructor(private readonly ledger: Ledger, private readonly startNs: number) {}

  /**
   * The head's fields: Server-Timing, and `Trailer` announcing the rest (RFC 9110 §6.6.2) when
   * `withTrailer` (trailerReaches). An HTTP/1.1 answer with a trailer must not carry Content-Length.
   */
  head(withTrailer: boolean): OutgoingHttpHeaders {
    const fields: OutgoingHttpHeaders = { 'Server-Timing': serverTiming(this.ledger, this.startNs, nowNs()) };
    if (!withTrailer) return fields;
    this.#inHead = new Set(HOPS.filter((h) => this.ledger.endNs(h) !== 0));
    fields.Trailer = 'Server-Timing';
    return fields;
  }

  /** Before the answer's end: the trailer with the hops that ended after the head, when the head announced one. */
  trail(res: ServerResponse): void {
    if (this.#inHead !== undefined) res.addTrailers({ 'Server-Timing': serverTiming(this.ledger, this.startNs, nowNs(), this.#inHead) });
  }
}
