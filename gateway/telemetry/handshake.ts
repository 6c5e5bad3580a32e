// Why a TLS handshake on the gateway's port failed, as the few kinds an operator acts on
// (`tensorgate_tls_handshake_failures_total{failure}`), from the code of node:tls's 'tlsClientError'.
// Node names OpenSSL's reasons `ERR_SSL_<REASON>` (lib/internal/errors.js, from the OpenSSL error
// string): a TLS alert the client sent is `..._ALERT_<ALERT>` (RFC 8446 §6.2), e.g.
// `ERR_SSL_TLSV1_ALERT_UNKNOWN_CA` when the client does not trust our certificate, or
// `ERR_SSL_SSLV3_ALERT_CERTIFICATE_EXPIRED` when it is expired.

export const TLS_HANDSHAKE_FAILURES = ['certificate', 'protocol', 'timeout', 'reset', 'other'] as const;
export type TlsHandshakeFailure = (typeof TLS_HANDSHAKE_FAILURES)[number];

/**
 * `certificate`: a certificate was refused, either way (a client rejected ours, or its own failed
 * `server.tls.clientCa`, or it sent none); `protocol`: no common version or cipher, or not TLS at all
 * (plain HTTP to the TLS port); `timeout`: the handshake did not finish in time; `reset`: the client
 * went away mid-handshake.
 */
export function handshakeFailure(code: string | undefined): TlsHandshakeFailure {
  if (code === undefined) return 'other';
  if (code === 'ERR_TLS_HANDSHAKE_TIMEOUT') return 'timeout';
  if (code === 'ECONNRESET' || code === 'EPIPE') return 'reset';
  if (!code.startsWith('ERR_SSL_')) return 'other';
  return /CERTIFICATE|_CA$|_CERT$|BAD_CERT|UNKNOWN_CA/.test(code) ? 'certificate' : 'protocol';
}
