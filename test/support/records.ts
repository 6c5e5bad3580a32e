// The per-request records the gateway publishes on the `tensorgate:request` diagnostics channel
// (route, model, encodings, the hop ledger), collected for assertions. A record is published
// when the server finishes the response, which can be a moment after the client has read it:
// note `mark()` before a request and `await after(mark)` for its record.
import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import type { RequestRecord } from '../../gateway/telemetry/record';

export class RecordTap {
  readonly records: RequestRecord[] = [];
  readonly #onRecord = (r: unknown): void => {
    this.records.push(r as RequestRecord);
  };

  start(): void {
    subscribe('tensorgate:request', this.#onRecord);
  }

  stop(): void {
    unsubscribe('tensorgate:request', this.#onRecord);
  }

  mark(): number {
    return this.records.length;
  }

  /** The newest record once one has arrived after `mark` (waits up to a second). */
  async after(mark: number): Promise<RequestRecord> {
    for (let i = 0; i < 200 && this.records.length <= mark; i++) await new Promise((r) => setTimeout(r, 5));
    const last = this.records[this.records.length - 1];
    if (last === undefined || this.records.length <= mark) throw new Error('no request record arrived');
    return last;
  }
}
