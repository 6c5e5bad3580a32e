// The per-request records the gateway publishes on the `tensorgate:request` diagnostics channel
// (route, model, encodings, the hop ledger), collected for assertions. A record is published
// when the server finishes the response, which can be a moment after the client has read it:
// note `mark()` before a request and `await after(mark)` for its record.
import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import type { RequestRecord } from '../../gateway/telemetry/record';

export class RecordTap {
  readonly records: RequestRecord[] = [];
  /** Woken by each record; each decides whether it has what it waits for. */
  #waiters: (() => void)[] = [];
  readonly #onRecord = (r: unknown): void => {
    this.records.push(r as RequestRecord);
    const waiters = this.#waiters;
    this.#waiters = [];
    for (const w of waiters) w();
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

  /** Resolves once `count` records have arrived in all; rejects after `ms`. */
  until(count: number, ms = 5000): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`${this.records.length} request records arrived within ${ms} ms, expected ${count}`)), ms);
      const check = (): void => {
        if (this.records.length >= count) {
          clearTimeout(timer);
          resolve();
        } else {
          this.#waiters.push(check);
        }
      };
      check();
    });
  }

  /** The newest record once one has arrived after `mark`. */
  async after(mark: number): Promise<RequestRecord> {
    await this.until(mark + 1);
    return this.records[this.records.length - 1]!;
  }
}
