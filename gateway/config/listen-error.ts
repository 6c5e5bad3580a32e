// A socket that cannot listen at start (the port taken, a privileged port, a host that is not
// this machine's) is a start-up failure like a bad key: one line naming the key and what to do,
// exit 2 (main.ts), instead of Node's 'error' event with a stack. Used for the main listener,
// the /metrics listener and the cluster primary's reservation (cluster.ts).
import { once } from 'node:events';
import type { Server } from 'node:net';
import { ConfigError } from './load';

/** The listener a failure is about: its port key and flag. */
export type Listener = 'server.port' | 'server.metricsPort' | 'server.grpc.port';

const FLAG: Record<Listener, string> = { 'server.port': '--port', 'server.metricsPort': '--metrics-port', 'server.grpc.port': '--grpc-port' };

/** Triton's default ports (tritonserver --http-port, --grpc-port, --metrics-port): the likely owner of a busy one. */
const TRITON_PORTS = new Map([[8000, 'HTTP'], [8001, 'gRPC'], [8002, 'metrics']]);

/** `err` (from listen or bind) as the one line that stops the start. */
export function listenError(err: unknown, key: Listener, host: string, port: number): ConfigError {
  const e = err as NodeJS.ErrnoException;
  const address = `${host.includes(':') ? `[${host}]` : host}:${port}`;
  const flag = FLAG[key];
  switch (e.code) {
    case 'EADDRINUSE': {
      const triton = TRITON_PORTS.get(port);
      const owner = triton === undefined ? 'stop what listens there' : `${port} is also Triton's default ${triton} port (a Triton on this host may hold it); stop what listens there`;
      return new ConfigError([`${key}: ${address} is already in use (EADDRINUSE); ${owner} or choose another port (${flag})`]);
    }
    case 'EACCES':
      return new ConfigError([`${key}: not allowed to listen on ${address} (EACCES); choose a port above 1023 (${flag}) or give the process CAP_NET_BIND_SERVICE`]);
    case 'EADDRNOTAVAIL':
      return new ConfigError([`server.host: ${host} is not an address of this machine (EADDRNOTAVAIL); give one of its addresses, or 0.0.0.0 for all (--host)`]);
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
      return new ConfigError([`server.host: ${host} does not resolve (${e.code}); give an IP address or a name this machine resolves (--host)`]);
    default:
      return new ConfigError([`${key}: cannot listen on ${address} (${e.code ?? 'error'}: ${String(e.message).split('\n')[0]}); check server.host and ${key} (--host, ${flag})`]);
  }
}

/**
 * Resolves once `server` listens; rejects with listenError on its 'error'. Call it right after
 * listen(): the rejection is handled at once (no unhandled 'error' event or rejection while the
 * caller does other things first) and still reaches the caller's await.
 */
export function listening(server: Server, key: Listener, host: string, port: number): Promise<void> {
  const p = once(server, 'listening').then(() => undefined, (err: unknown) => {
    throw listenError(err, key, host, port);
  });
  p.catch(() => undefined);
  return p;
}
