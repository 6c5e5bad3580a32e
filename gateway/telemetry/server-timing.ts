// The Server-Timing header (W3C Server Timing): one entry per hop that has ended, with its
// duration in milliseconds, then the total so far. Hop names are the ledger's. A hop still running
// when the head is sent (receiving a streamed answer) is not in the header; it can follow in a
// Server-Timing trailer, which the spec allows (https://w3c.github.io/server-timing/#the-server-timing-header-field).
import { type Hop, HOPS, type Ledger } from '../infer/ledger';

/** The hops that have ended, but those in `sent` (named already in the head); then the total. */
export function serverTiming(ledger: Ledger, startNs: bigint, nowNs: bigint, sent?: ReadonlySet<Hop>): string {
  const parts: string[] = [];
  for (const hop of HOPS) {
    const h = ledger.hops[hop];
    if (h.startNs === 0n || h.endNs === 0n || sent?.has(hop) === true) continue;
    parts.push(`${hop};dur=${(Number(h.endNs - h.startNs) / 1e6).toFixed(3)}`);
  }
  parts.push(`total;dur=${(Number(nowNs - startNs) / 1e6).toFixed(3)}`);
  return parts.join(', ');
}
