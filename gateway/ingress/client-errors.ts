// Client errors: what Node's HTTP/1.1 server reports on its 'clientError' event — a request its
// parser refused, and our headersTimeout / requestTimeout — answered with our {"error"} and its
// code. Through the request's answer when its headers had arrived and nothing was written yet (a
// slow or malformed body), else straight on the socket, where no request exists to answer through.
// Node closes the connection either way.
import { type ServerResponse, STATUS_CODES } from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import type { Config } from '../config/schema';
import { writeError } from '../egress/write';
import { GatewayError } from '../errors';
import type { RequestRecord } from '../telemetry/record';

type Head = Pick<Config['server'], 'maxHeaderBytes' | 'maxHeaderCount'>;
type Timeouts = Pick<Config['server'], 'headersTimeoutMs' | 'requestTimeoutMs'>;

/** The answer under way on a connection: a request whose headers have arrived. */
export interface Answering {
  readonly res: ServerResponse;
  readonly record: RequestRecord;
}

/**
 * What a request Node's parser refused (clientError) is answered with. llhttp refuses, before
 * any handler runs: a head past maxHeaderSize (HPE_HEADER_OVERFLOW), chunk extensions past 16 KiB,
 * and every malformed or ambiguous framing — Content-Length with Transfer-Encoding in either
 * order, two Content-Length fields (even equal ones), a Transfer-Encoding whose last coding is not
 * chunked, bare CR or LF, obs-fold, control characters in a field — the request-smuggling
 * vectors of RFC 9112 §6.3 and §11.2. Its reason is a fixed text of llhttp's, never client data.
 */
function parseError(err: NodeJS.ErrnoException & { reason?: string }, head: Head): GatewayError {
  switch (err.code) {
    case 'HPE_HEADER_OVERFLOW': // the byte bound, or (Node ≥ 22.23.2, 24.18.1) the field count: llhttp says which not
      return new GatewayError('GW_ERR_REQUEST_HEADERS_TOO_LARGE',
        `the request line and headers exceed ${head.maxHeaderBytes} bytes (server.maxHeaderBytes) or ${head.maxHeaderCount} fields (server.maxHeaderCount)`);
    case 'HPE_CHUNK_EXTENSIONS_OVERFLOW':
      return new GatewayError('GW_ERR_REQUEST_TOO_LARGE', 'the chunk extensions of the body exceed 16 KiB');
    default:
      return new GatewayError('GW_ERR_REQUEST_MALFORMED', `the request is not valid HTTP/1.1: ${err.reason ?? err.code ?? 'parse error'}`);
  }
}

/** An error answer written straight to the socket: no request exists yet to answer through. */
function rawErrorAnswer(e: GatewayError): string {
  const body = JSON.stringify({ error: e.message });
  return `HTTP/1.1 ${e.status} ${STATUS_CODES[e.status] ?? ''}\r\nContent-Type: application/json\r\n`
    + `Content-Length: ${Buffer.byteLength(body)}\r\nx-tensorgate-error: ${e.code}\r\nConnection: close\r\n\r\n${body}`;
}

/** What a request whose body was not complete within server.requestTimeoutMs (`ms`) is answered: 408. */
export function requestTimeout(ms: number): GatewayError {
  return new GatewayError('GW_ERR_REQUEST_TIMEOUT', `the request was not complete within ${ms} ms (server.requestTimeoutMs)`);
}

export class ClientErrors {
  /** A failed parser fails again on every later chunk of the connection, and Node calls again: answered once. */
  private readonly answered = new WeakSet<Duplex>();

  /**
   * `current` is the answer under way on each connection; `refused` is told the code of each
   * answer written straight to the socket (no request exists for the observer).
   */
  constructor(
    private readonly head: Head, private readonly timeouts: Timeouts,
    private readonly current: (socket: Socket) => Answering | undefined, private readonly refused?: (code: string) => void,
  ) {}

  /** The 'clientError' listener's work. */
  answer(err: NodeJS.ErrnoException, stream: Duplex): void {
    if (this.answered.has(stream)) return;
    this.answered.add(stream);
    const timeout = err.code === 'ERR_HTTP_REQUEST_TIMEOUT';
    // Answered: what the parser refused, and our timeouts. Anything else is the transport failing
    // — a reset, the client's end of the stream mid-request (HPE_INVALID_EOF_STATE), and on TLS a
    // failed or timed-out handshake (node:https passes tlsClientError on here; an HTTP answer
    // written into a socket without a session would wait for a handshake that never comes). Nobody
    // to answer: a handler reading the body learns it from the request's close (GW_ERR_REQUEST_ABORTED).
    if (!timeout && (err.code?.startsWith('HPE_') !== true || err.code === 'HPE_INVALID_EOF_STATE')) {
      stream.destroy();
      return;
    }
    const socket = stream as Socket;
    const under = this.current(socket);
    if (under !== undefined && !under.res.headersSent && !(timeout && under.res.req.complete)) {
      this.answerRequest(under, timeout ? this.bodyTimeout() : parseError(err, this.head));
      return; // node:http closes the connection once the answer is out (Connection: close)
    }
    if (socket.writable && (under === undefined || !under.res.headersSent)) {
      const e = timeout
        ? new GatewayError('GW_ERR_REQUEST_TIMEOUT', `the request headers were not complete within ${this.timeouts.headersTimeoutMs} ms (server.headersTimeoutMs)`)
        : parseError(err, this.head);
      this.refused?.(e.code);
      socket.end(rawErrorAnswer(e));
      socket.destroySoon();
      return;
    }
    // An answer is under way (its headers are out): too late for a status. A parse error cuts the
    // connection at once, the only honest signal left; a timeout lets what is written go out first.
    if (timeout) socket.destroySoon();
    else socket.destroy();
  }

  private bodyTimeout(): GatewayError {
    return requestTimeout(this.timeouts.requestTimeoutMs);
  }

  /** The error answered through the request whose headers had arrived. */
  private answerRequest(under: Answering, e: GatewayError): void {
    under.record.errorCode = e.code;
    under.res.shouldKeepAlive = false;
    writeError(under.res, e);
    // The parser has stopped: the body never ends, and node:http tells the request nothing when
    // the connection closes after an answer. Once the answer is out, the request is destroyed,
    // so a handler still reading its body settles (GW_ERR_REQUEST_ABORTED) and gives back its
    // in-flight place and buffers.
    const req = under.res.req;
    under.res.once('close', () => {
      if (!req.complete) req.destroy();
    });
  }
}
