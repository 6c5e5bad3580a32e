// GET /usage/<id> on the metrics port (docs/production.md "Quotas and usage"): an identity's
// quotas in their current windows (used and remaining, from the store when there is one: every
// replica's) and what it used in this process by model. <id> is `key:<id>`, `jwt:<sub>` or
// `group:<name>`, URL-encoded; one that no configuration names is 404.
import type { IncomingMessage, ServerResponse } from 'node:http';

/** An identity's usage document, or undefined when nothing configures it. */
export type UsageSource = (id: string) => Promise<object | undefined>;

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
