// GET /usage/<id> on the metrics port (docs/production.md "Quotas and usage"): an identity's
// quotas in their current windows (used and remaining, from the store when there is one: every
// replica's) and what it used in this process by model. <id> is `key:<id>`, `jwt:<sub>` or
// `group:<name>`, URL-encoded; one that no configuration names is 404. With workers > 1 the
// primary serves it: the workers' documents summed (cluster.ts, sumUsage below).
import type { IncomingMessage, ServerResponse } from 'node:http';

/** An identity's usage document, or undefined when nothing configures it. */
export type UsageSource = (id: string) => Promise<object | undefined>;

/** The document of one process (auth/authenticator.ts usage). */
export interface UsageDoc {
  readonly id: string;
  /** The quotas in their current windows, read from where they are counted (the same for every worker). */
  readonly quotas: readonly unknown[];
  /** What the identity used here, by model and unit. */
  readonly process: Readonly<Record<string, Readonly<Record<string, number>>>>;
}

/** The workers' documents as one: the first's quotas (all read from one store), `process` summed; undefined: none. */
export function sumUsage(docs: readonly UsageDoc[]): (UsageDoc & { readonly workers: number }) | undefined {
  if (docs.length === 0) return undefined;
  const process: Record<string, Record<string, number>> = {};
  for (const d of docs) {
    for (const [model, units] of Object.entries(d.process)) {
      const sum = (process[model] ??= {});
      for (const [unit, n] of Object.entries(units)) sum[unit] = (sum[unit] ?? 0) + n;
    }
  }
  return { id: docs[0]!.id, quotas: docs[0]!.quotas, process, workers: docs.length };
}

const PREFIX = '/usage/';

export function usagePage(source: UsageSource): (req: IncomingMessage, res: ServerResponse) => boolean {
  return (req, res) => {
    const url = req.url ?? '';
    if (!url.startsWith(PREFIX)) return false;
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      send(res, 405, { error: `${req.method} is not allowed on /usage/<id>: GET or HEAD` }, { allow: 'GET, HEAD' });
      return true;
    }
    let id: string;
    try {
      id = decodeURIComponent(url.slice(PREFIX.length).split('?')[0]!);
    } catch {
      send(res, 400, { error: 'the identity in /usage/<id> is not valid percent-encoding' });
      return true;
    }
    source(id).then((doc) => {
      if (doc !== undefined) send(res, 200, doc);
      else send(res, 404, { error: `no limits configure '${id}': give key:<id>, jwt:<sub> or group:<name>` });
    }, (err: unknown) => send(res, 500, { error: `usage of '${id}' could not be read: ${(err as Error).message}` }));
    return true;
  };
}

function send(res: ServerResponse, status: number, doc: object, extra: Record<string, string> = {}): void {
  const body = JSON.stringify(doc);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), 'cache-control': 'no-store', ...extra });
  res.end(res.req.method === 'HEAD' ? undefined : body);
}
