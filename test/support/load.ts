// Closed-loop load for the fault suite: N clients, each with its own keep-alive connection,
// sending one request after another and recording every outcome — an answer (status, body,
// x-tensorgate-error) or the socket error that replaced it. Nothing is dropped from the record,
// so a test can tell "answered with an error" from "lost".
import { Agent, request } from 'node:http';

export interface Outcome {
  /** performance.now() when the request was sent / settled. */
  readonly start: number;
  readonly end: number;
  readonly status?: number;
  readonly body?: string;
  /** x-tensorgate-error of a gateway error answer. */
  readonly code?: string;
  readonly connection?: string;
  /** The socket error (ECONNRESET, …) when no whole answer came. */
  readonly error?: string;
  readonly client: number;
}

export function post(url: string, body: string, agent?: Agent, client = 0): Promise<Outcome> {
  const start = performance.now();
  return new Promise((resolve) => {
    const req = request(url, { method: 'POST', agent, headers: { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body) } }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({
        start, end: performance.now(), client, status: res.statusCode,
        body: Buffer.concat(chunks).toString(),
        ...(res.headers['x-tensorgate-error'] === undefined ? {} : { code: String(res.headers['x-tensorgate-error']) }),
        ...(res.headers.connection === undefined ? {} : { connection: res.headers.connection }),
      }));
      res.on('error', (err: NodeJS.ErrnoException) => resolve({ start, end: performance.now(), client, error: err.code ?? err.message }));
    });
    req.on('error', (err: NodeJS.ErrnoException) => resolve({ start, end: performance.now(), client, error: err.code ?? err.message }));
    req.end(body);
  });
}

export interface Load {
  readonly outcomes: Outcome[];
  /** Stops sending; resolves when every client's last request has settled. */
  stop(): Promise<void>;
}

/**
 * `clients` loops of `post(url(), body())` on keep-alive connections. After a failed answer a
 * client waits `pauseAfterFailureMs` (a polite client's backoff; it also keeps a 2-core box from
 * spinning on fast 503s while Triton restarts).
 */
export function startLoad(clients: number, url: () => string, body: () => string, pauseAfterFailureMs = 20): Load {
  const outcomes: Outcome[] = [];
  let stopping = false;
  const agents: Agent[] = [];
  const loops = Array.from({ length: clients }, async (_, i) => {
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    agents.push(agent);
    while (!stopping) {
      const o = await post(url(), body(), agent, i);
      outcomes.push(o);
      if (o.status !== 200 && !stopping) await new Promise((r) => setTimeout(r, pauseAfterFailureMs));
    }
  });
  return {
    outcomes,
    stop: async () => {
      stopping = true;
      await Promise.all(loops);
      for (const a of agents) a.destroy();
    },
  };
}

/** The V2 JSON body of the zoo's `slow` model (sleeps `delayMs` per request). */
export function slowBody(delayMs: number): string {
  return JSON.stringify({ parameters: { delay_ms: delayMs }, inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1], data: [1] }] });
}

/** The V2 JSON body of the zoo's `simple` model (INT32 [1,16] + [1,16]). */
export function simpleBody(): string {
  const data = Array.from({ length: 16 }, (_, i) => i);
  return JSON.stringify({ inputs: [
    { name: 'INPUT0', datatype: 'INT32', shape: [1, 16], data },
    { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], data },
  ] });
}

/** A gateway error answer as a client sees it: the status, `{"error": "<message>"}` and the code header. */
export function isErrorAnswer(o: Outcome, statuses: readonly number[]): boolean {
  if (o.status === undefined || !statuses.includes(o.status) || o.body === undefined) return false;
  try {
    const b = JSON.parse(o.body) as unknown;
    return typeof b === 'object' && b !== null && typeof (b as { error?: unknown }).error === 'string' && o.code !== undefined;
  } catch {
    return false;
  }
}
