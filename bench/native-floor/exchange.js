// One HTTP/1.1 exchange on a fresh connection, for the probes of this folder.
'use strict';
const net = require('node:net');

/** One request (raw bytes, or {path, headers, body}) on a fresh connection: the whole answer's bytes, head and body. */
function exchange(port, req) {
  return new Promise((resolve, reject) => {
    const s = net.connect(port, '127.0.0.1');
    let buf = Buffer.alloc(0);
    s.on('error', reject);
    s.on('data', (d) => {
      buf = Buffer.concat([buf, d]);
      const end = buf.indexOf('\r\n\r\n');
      if (end === -1) return;
      const length = Number(/\r\ncontent-length: *(\d+)/i.exec(buf.subarray(0, end).toString('latin1'))?.[1] ?? 0);
      if (buf.length < end + 4 + length) return;
      s.destroy();
      resolve(buf.subarray(0, end + 4 + length));
    });
    if (Buffer.isBuffer(req)) { s.write(req); return; }
    const head = `POST ${req.path} HTTP/1.1\r\nHost: 127.0.0.1\r\n${Object.entries(req.headers ?? {}).map(([k, v]) => `${k}: ${v}\r\n`).join('')}content-length: ${req.body.length}\r\n\r\n`;
    s.write(Buffer.concat([Buffer.from(head, 'latin1'), req.body]));
  });
}

module.exports = { exchange };
