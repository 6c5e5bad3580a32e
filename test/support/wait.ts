// Waiting in tests: on an event where one exists, else a bounded poll. Both fail with a message
// that names what never happened, instead of an assertion on a state that was not reached yet.
import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import type { ChildProcessWithoutNullStreams } from 'node:child_process';
import type { IncomingMessage } from 'node:http';

/**
 * The next `event` of `emitter` (its arguments) for which `match` holds (any, without one). Call it
 * before the action that causes the event: the listener is attached at once. With `match`, an event
 * left over from an earlier test (a model that notices its cancellation late) cannot stand in for this one.
 */
export async function nextEvent(emitter: NodeJS.EventEmitter, event: string, ms = 5000, match?: (...args: unknown[]) => boolean): Promise<unknown[]> {
  return new Promise((resolve, reject) => {
    const listener = (...args: unknown[]): void => {
      if (match !== undefined && !match(...args)) return;
      clearTimeout(timer);
      emitter.off(event, listener);
      resolve(args);
    };
    const timer = setTimeout(() => {
      emitter.off(event, listener);
      reject(new Error(`no '${event}' event within ${ms} ms`));
    }, ms);
    emitter.on(event, listener);
  });
}

/** Polls `cond` every 5 ms until it holds; for states no event announces. Throws naming `what` after `ms`. */
export async function waitUntil(cond: () => boolean, what: string, ms = 5000): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() >= end) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

/**
 * Resolves once `value()` has stayed the same for `quietMs`: progress has stalled (back-pressure).
 * Throws naming `what` if it is still changing after `ms`.
 */
export async function waitForStall(value: () => number, what: string, quietMs = 300, ms = 10_000): Promise<void> {
  const end = Date.now() + ms;
  let last = value();
  let since = Date.now();
  while (Date.now() - since < quietMs) {
    if (Date.now() >= end) throw new Error(`${what} was still moving after ${ms} ms (at ${value()})`);
    await new Promise((r) => setTimeout(r, 20));
    const v = value();
    if (v !== last) {
      last = v;
      since = Date.now();
    }
  }
}

/**
 * Resolves when an HTTP server in this process has begun handling a request whose URL ends with
 * `path` (Node's `http.server.request.start` channel): the request is in flight from then on.
 */
export function requestStarted(path: string, ms = 5000): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const onStart = (m: unknown): void => {
      if (!((m as { request: IncomingMessage }).request.url ?? '').endsWith(path)) return;
      done();
      resolve();
    };
    const timer = setTimeout(() => {
      done();
      reject(new Error(`no request for ${path} began within ${ms} ms`));
    }, ms);
    const done = (): void => {
      clearTimeout(timer);
      unsubscribe('http.server.request.start', onStart);
    };
    subscribe('http.server.request.start', onStart);
  });
}

/** The first line of a child's stdout (a listening line); rejects if the process exits first. */
export function firstLine(child: ChildProcessWithoutNullStreams): Promise<string> {
  return new Promise<string>((resolve, reject) => {
    let out = '';
    child.stdout.setEncoding('utf8').on('data', (s: string) => {
      out += s;
      if (out.includes('\n')) resolve(out.split('\n')[0]!);
    });
    child.once('exit', (code) => reject(new Error(`exited ${code} before listening`)));
  });
}
