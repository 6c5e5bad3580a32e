// A backend's address, as upstream.backends and the pools give it (docs/production.md,
// "Backends, DNS, health, retries"):
// - `host:port`, an IPv6 host in brackets: one backend, its connections resolve the name;
// - `dns:///name:port`: every address the name has (upstream/backends/resolution.ts);
// - `unix:/absolute/path`: Triton's gRPC on a Unix domain socket of this host (a sidecar's Triton).
//   Triton listens on `<its --grpc-address>:<its --grpc-port>` (triton-inference-server/server
//   src/grpc/grpc_server.cc joins the two), so `--grpc-address unix:/run/triton/grpc.sock
//   --grpc-port 8001` is the path `/run/triton/grpc.sock:8001`. gRPC's own clients read
//   `unix:/path` the same way.

const UNIX = 'unix:';
/** sun_path's 108 bytes with the terminating NUL (unix(7)). */
export const MAX_SOCKET_PATH_BYTES = 107;

const HOST_PORT = /^(?:dns:\/\/\/)?(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9_.-]+):(\d{1,5})$/;

/** The socket's path of a `unix:` address, else undefined. */
export function socketPath(address: string): string | undefined {
  return address.startsWith(UNIX) ? address.slice(UNIX.length) : undefined;
}

/** Why `address` (as the configuration gave it) is no backend address, or undefined when it is one. */
export function addressProblem(address: unknown): string | undefined {
  if (typeof address !== 'string') return `${JSON.stringify(address)} is not host:port, dns:///name:port or unix:/path`;
  const path = socketPath(address);
  if (path !== undefined) {
    if (!path.startsWith('/')) return `${JSON.stringify(address)}: a socket's path is absolute (unix:/path/to/triton.sock)`;
    if (Buffer.byteLength(path) > MAX_SOCKET_PATH_BYTES) return `${JSON.stringify(address)}: a socket's path is at most ${MAX_SOCKET_PATH_BYTES} bytes (unix(7))`;
    if (path.includes('\0')) return `${JSON.stringify(address)}: a socket's path has no NUL`;
    return undefined;
  }
  const m = HOST_PORT.exec(address);
  return m !== null && Number(m[2]) > 0 && Number(m[2]) <= 65535 ? undefined : `${JSON.stringify(address)} is not host:port, dns:///name:port or unix:/path`;
}

/** host and port of a `host:port` address (brackets of an IPv6 host removed). */
export function hostAndPort(address: string): { readonly host: string; readonly port: number } {
  const at = address.lastIndexOf(':');
  return { host: address.slice(0, at).replace(/^\[|\]$/g, ''), port: Number(address.slice(at + 1)) };
}

/**
 * The `:authority` of a call to `address`: the address itself, or `localhost` for a socket, as
 * gRPC's clients send for `unix:` targets (Triton reads none of it).
 */
export function authorityOf(address: string): string {
  return socketPath(address) === undefined ? address : 'localhost';
}
