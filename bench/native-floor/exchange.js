// One HTTP/1.1 exchange on a fresh connection, for the probes of this folder and bench/loadgen.js's
// connection-per-request cells.
'use strict';
const net = require('node:net');

/** The bytes of a request {path, headers, body}, as exchange() sends it. */
function requestBytes(req) {
  const head = `POST ${req.path} HTTP/1.1\r\nHost: 127.0.0.1\r\n${Object.entries(req.headers ?? {}).map(([k, v]) => `${k}: ${v}\r\n`).join('')}content-length: ${req.body.length}\r\n\r\n`;
  return Buffer.concat([Buffer.from(head, 'latin1'), req.body]);
}

/**
 * One request (raw bytes, or {path, headers, body}) on a fresh connection: the whole answer's
 * bytes, head and body; the connection closed after it. Rejected if the connection closes first,
 * or after `timeoutMs`.
 */
function exchange(port, req, timeoutMs = 120_000) {
  return new Promise((resolve, reject) => {
    const s = net.connect(port, '127.0.0.1');
    s.setNoDelay(true);
    let buf = Buffer.alloc(0);
    /** @param {Error} err */
    const fail = (err) => {
      clearTimeout(timer);
      s.destroy();
      reject(err);
    };
    const timer = setTimeout(() => fail(new Error(`no answer within ${timeoutMs} ms`)), timeoutMs);
    s.on('error', fail);
    s.on('close', () => fail(new Error('closed before the answer was whole')));
    s.on('data', (d) => {
      buf = buf.length === 0 ? d : Buffer.concat([buf, d]);
      const end = buf.indexOf('\r\n\r\n');
      if (end === -1) return;
      const length = Number(/\r\ncontent-length: *(\d+)/i.exec(buf.subarray(0, end).toString('latin1'))?.[1] ?? 0);
      if (buf.length < end + 4 + length) return;
      clearTimeout(timer);
      s.removeAllListeners('close');
      s.destroy();
      resolve(buf.subarray(0, end + 4 + length));
    });
    s.write(Buffer.isBuffer(req) ? req : requestBytes(req));
  });
}

module.exports = { exchange, requestBytes };
