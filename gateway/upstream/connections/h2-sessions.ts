// One lazily connected HTTP/2 session per backend of the live set, replaced when it closes or
// fails, closed once its backend leaves the set (its streams finish first). The data plane's
// ModelInfer calls (upstream/infer/h2-plane.ts) and the gRPC pass-through (upstream/call/relay.ts)
// share them: a client's calls and the gateway's own go over the same connection to a Triton.
//
// With upstream.tls the sessions are TLS (upstream/connections/tls.ts): each new session takes the current
// material, so a reloaded client certificate is used from the next connection on.
import { type ClientHttp2Session, type ClientHttp2Stream, connect } from 'node:http2';
import { Readable } from 'node:stream';
import { connect as netConnect } from 'node:net';
import { letGo } from '../../buffers/reclaim';
import { authorityOf, hostAndPort, socketPath } from '../../config/address';
import type { Backend } from '../backends/backend';
import type { BackendSet } from '../backends/backend-set';
import { H2Connection } from '../h2/connection';
import { closedAfterHandshake, tlsFailure, type UpstreamTls } from './tls';

/** upstream.http2Client: node:http2's client, or our own HTTP/2 connection (upstream/h2/). */
export type Http2Client = 'node' | 'own';
/** The default of upstream.http2Client (gateway/config/schema.ts), for the planes a caller builds itself. */
export const DEFAULT_HTTP2_CLIENT: Http2Client = 'own';

/**
 * How many own connections one backend may have at once: a new one opens when every one is at
 * the server's SETTINGS_MAX_CONCURRENT_STREAMS (gRPC core sends none by default); past this, a call
 * is refused as never sent.
 */
const MAX_OWN_CONNECTIONS = 16;

/**
 * The window of each upstream connection: what Triton may send on all its streams before the
 * gateway has taken it. Node takes a stream's DATA out of the connection's window as it arrives,
 * paused stream or not (node_http2.cc OnDataChunkReceived), so a call whose client stopped
 * reading never blocks the calls of other clients on the same connection.
 */
const CONNECTION_WINDOW_BYTES = 32 * 1024 * 1024;

/**
 * The window of each upstream stream (SETTINGS_INITIAL_WINDOW_SIZE): what Triton may send of one
 * answer ahead of the gateway's reading. Node gives a stream's window back only as it is read, so
 * a call paused for a client that stopped reading (pipeline/binary-streamer.ts, the gRPC pass-through)
 * holds at most this much of its answer, and Triton's flow control keeps the rest. At 32 MiB, a
 * paused call held its whole 4 MiB answer: 3 connections × 30 streams that opened no window
 * pinned 180 MB (test/integration/slow-readers.test.ts). 1 MiB is a frame and still lets a
 * reading call go at full speed here: gateway CPU per 4 MiB binary answer 8.5–11.0 ms against
 * 10.5–11.0 ms at 32 MiB, per 32 MiB answer 29–36 ms against 53–64 ms (h2load, reference backend).
 */
const STREAM_WINDOW_BYTES = 1024 * 1024;

/**
 * The largest DATA frame Triton may send us (SETTINGS_MAX_FRAME_SIZE, RFC 9113 §6.5.2; 16 KiB unless
 * we say more). Triton's gRPC core fills frames up to it, and every frame is at least one 'data'
 * event and one Buffer here: a 4 MiB answer came as 321 events at 16 KiB and 69 at 1 MiB, and the
 * gateway's CPU per 4 MiB echo through real Triton fell from 10.4–11.3 ms to 8.7–9.2 ms (64 KiB and
 * 256 KiB: 10.1–10.2 ms; 16 MiB: as 1 MiB). bench/RESULTS.md "Upstream frames".
 */
const MAX_FRAME_BYTES = 1024 * 1024;

/**
 * Node's own AbortError class, which node:http2 does not export; it is the one error a stream is
 * destroyed with that resets it with CANCEL. Taken from a stream made with an aborted signal.
 */
const NodeAbortError = ((): new () => Error => {
  const r = new Readable({ read: () => undefined, signal: AbortSignal.abort() });
  r.on('error', () => undefined);
  return (r.errored as Error).constructor as new () => Error;
})();

/**
 * Ends a call for good: an open stream is reset with RST_STREAM CANCEL and nothing ahead of it,
 * and what the stream has buffered is let go. Always by destroying it with Node's AbortError,
 * the one error that resets with CANCEL: stream.close(code) first ends the writable side, which
 * puts an empty END_STREAM DATA frame on the wire before the reset (Triton may then take a
 * half-sent request as whole and answer it with an error instead of seeing the cancel); and a
 * stream that has closed (or is closed by the reset) while paused keeps its unread DATA and its
 * native handle until someone reads it to its end, which nobody will: Node waits for the readable
 * side's 'end' before it destroys the stream. A paused answer (a client that stopped reading)
 * stayed resident that way after its call had ended, the whole answer per call. What it let go
 * is told to the reclaim (buffers/reclaim.ts), which would not see it otherwise.
 */
export function cancel(stream: ClientHttp2Stream): void {
  if (stream.destroyed) return;
  const unread = stream.readableLength;
  stream.destroy(new NodeAbortError());
  if (unread > 0) letGo(unread);
}

/** One lazily connected HTTP/2 session per backend, replaced when it closes or fails. */
export class Connection {
  #session: ClientHttp2Session | undefined;
  /** On upstream.http2Client own: the connections (more than one only past a stream limit). */
  #own: H2Connection[] = [];
  readonly own: boolean;
  readonly scheme: 'http' | 'https';
  /** A `unix:` backend's socket path (config/address.ts). */
  readonly #path: string | undefined;
  /** TLS sessions whose handshake completed but whose peer has sent no SETTINGS yet. */
  readonly #handshakeOnly = new WeakSet<ClientHttp2Session>();
  /** The request's :authority when upstream.tls.serverName overrides the host (as grpc's default_authority). */
  readonly authority: Readonly<Record<string, string>>;
  /**
   * On our own connections, the HPACK fields of each shared (frozen) header set and the path they
   * were encoded with: the same bytes for every call but its grpc-timeout (upstream/call/grpc-call.ts).
   */
  readonly headerFields = new WeakMap<object, { readonly path: string; readonly block: Buffer }>();

  constructor(readonly address: string, private readonly tls?: UpstreamTls, client: Http2Client = DEFAULT_HTTP2_CLIENT) {
    const name = tls?.files.serverName ?? '';
    this.#path = socketPath(address);
    this.authority = name !== '' ? { ':authority': name } : this.#path !== undefined ? { ':authority': authorityOf(address) } : {};
    this.own = client === 'own';
    this.scheme = tls === undefined ? 'http' : 'https';
  }

  /**
   * An own connection with room for a stream: the first that has it, else a new one (with the same
   * windows and frame size as the node:http2 sessions'). A connection whose SETTINGS have not come
   * yet is held to the stream limit the others were told (the same server). Throws past
   * MAX_OWN_CONNECTIONS.
   */
  ownConnection(): H2Connection {
    const own = this.#own;
    let limit = Infinity;
    let gone = false;
    for (let i = 0; i < own.length; i++) {
      if (own[i]!.unusable !== undefined) gone = true;
      else limit = Math.min(limit, own[i]!.maxStreams);
    }
    if (gone) this.#own = own.filter((c) => c.unusable === undefined);
    for (let i = 0; i < this.#own.length; i++) if (this.#own[i]!.hasRoom(limit)) return this.#own[i]!;
    if (this.#own.length >= MAX_OWN_CONNECTIONS) throw new Error(`${MAX_OWN_CONNECTIONS} connections to ${this.address} at the server's concurrent stream limit`);
    const path = socketPath(this.address);
    const c = new H2Connection({
      ...(path === undefined ? hostAndPort(this.address) : { host: 'localhost', port: 0, path }), tls: this.tls?.connectOptions(),
      streamWindow: STREAM_WINDOW_BYTES, connectionWindow: CONNECTION_WINDOW_BYTES, maxFrameSize: MAX_FRAME_BYTES,
    });
    c.socket.unref();
    this.#own.push(c);
    return c;
  }

  /** ownTlsFailure as tlsFailure, for a call on an own connection. */
  ownTlsFailure(c: H2Connection, err: Error | undefined): string | undefined {
    if (this.tls === undefined) return undefined;
    const cause = (err as { cause?: unknown } | undefined)?.cause;
    const reason = cause instanceof Error ? tlsFailure(cause.message, this.address) : err === undefined ? undefined : tlsFailure(err.message, this.address);
    if (reason !== undefined) return reason;
    return c.unusable !== undefined && c.handshakeOnly ? closedAfterHandshake(this.address, this.tls.mutual) : undefined;
  }

  session(): ClientHttp2Session {
    const s = this.#session;
    if (s !== undefined && !s.closed && !s.destroyed) return s;
    const tls = this.tls;
    const path = this.#path;
    const session = connect(path === undefined ? `${tls === undefined ? 'http' : 'https'}://${this.address}` : 'http://localhost', {
      ...tls?.connectOptions(),
      ...(path === undefined ? {} : { createConnection: () => netConnect(path) }),
      maxSessionMemory: 256, // MB: several 16 MiB messages in flight must not trip nghttp2's cap
      settings: { initialWindowSize: STREAM_WINDOW_BYTES, maxFrameSize: MAX_FRAME_BYTES, enablePush: false },
      // Triton's grpc-message can end in a blank ("... got [6]. "); strict RFC 9113 checking
      // would drop the header and with it Triton's message.
      strictFieldWhitespaceValidation: false,
    });
    session.on('connect', () => {
      // Node emits 'connect' a tick after the socket connected: a session destroyed in between
      // (the plane closed, the peer reset it) has no handle left to set a window on, and throws.
      if (session.destroyed) return;
      session.setLocalWindowSize(CONNECTION_WINDOW_BYTES);
      if (tls !== undefined) this.#handshakeOnly.add(session);
    });
    session.once('remoteSettings', () => this.#handshakeOnly.delete(session));
    session.on('error', () => { /* reported on the streams; the next call reconnects */ });
    session.on('close', () => {
      if (this.#session === session) this.#session = undefined;
    });
    session.unref();
    this.#session = session;
    return session;
  }

  /**
   * The TLS reason a call on `session` failed, when it is one: `err` is the call's stream error
   * (a stream cancelled by its session's failure carries that as its cause).
   */
  tlsFailure(session: ClientHttp2Session, err: Error | undefined): string | undefined {
    if (this.tls === undefined) return undefined;
    const cause = (err as { cause?: unknown } | undefined)?.cause;
    const reason = cause instanceof Error ? tlsFailure(cause.message, this.address) : err === undefined ? undefined : tlsFailure(err.message, this.address);
    if (reason !== undefined) return reason;
    return session.destroyed && this.#handshakeOnly.has(session) ? closedAfterHandshake(this.address, this.tls.mutual) : undefined;
  }

  close(): void {
    this.#session?.close();
    this.#session = undefined;
    for (const c of this.#own) c.close();
    this.#own = [];
  }
}

/** The sessions to the backends of a set, one per backend. */
export class H2Connections {
  readonly #connections = new Map<Backend, Connection>();
  /** A backend that left the set is drained: its session closes once its streams are done. */
  readonly #removed = (b: Backend): void => {
    this.#connections.get(b)?.close();
    this.#connections.delete(b);
  };

  constructor(private readonly set: BackendSet, private readonly tls?: UpstreamTls, private readonly client: Http2Client = DEFAULT_HTTP2_CLIENT) {
    set.on('removed', this.#removed);
  }

  get(b: Backend): Connection {
    let c = this.#connections.get(b);
    if (c === undefined) {
      c = new Connection(b.address, this.tls, this.client);
      this.#connections.set(b, c);
    }
    return c;
  }

  /** Closes every session (their streams finish first) and forgets them. */
  close(): void {
    this.set.off('removed', this.#removed);
    for (const c of this.#connections.values()) c.close();
    this.#connections.clear();
  }
}
