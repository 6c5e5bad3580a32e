// The Server-Timing header (W3C Server Timing): one entry per hop that has run, with its
// duration in milliseconds, then the total so far. Hop names are the ledger's.
import { HOPS, type Ledger } from '../infer/ledger';

export function serverTiming(ledger: Ledger, startNs: bigint, nowNs: bigint): string {
  const parts: string[] = [];
  for (const hop of HOPS) {
    const h = ledger.hops[hop];
    if (h.startNs === 0n || h.endNs === 0n) continue;
    parts.push(`${hop};dur=${(Number(h.endNs - h.startNs) / 1e6).toFixed(3)}`);
  }
  parts.push(`total;dur=${(Number(nowNs - startNs) / 1e6).toFixed(3)}`);
  return parts.join(', ');
}
