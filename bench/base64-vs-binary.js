// Base64 JSON vs binary extension, one keep-alive connection, identity_uint8: node bench/base64-vs-binary.js PORT BYTES
// against a running gateway (e.g. `bin/tensorgate --demo --port PORT`).
const http = require('node:http');
const [port, sizeArg] = process.argv.slice(2);
const size = Number(sizeArg);
const payload = Buffer.alloc(size); for (let i = 0; i < size; i++) payload[i] = (i * 31) & 0xff;
const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
function post(body, headers) {
  return new Promise((res, rej) => {
    const t = process.hrtime.bigint();
    const r = http.request({ port, path: '/v2/models/identity_uint8/infer', method: 'POST', agent, headers: { 'Content-Length': body.length, ...headers } }, (resp) => {
      const cs = []; resp.on('data', (c) => cs.push(c)); resp.on('end', () => { if (resp.statusCode !== 200) rej(new Error(Buffer.concat(cs).toString())); res(Number(process.hrtime.bigint() - t) / 1e6); });
    });
    r.on('error', rej); r.end(body);
  });
}
const out = [{ name: 'OUTPUT0', parameters: { binary_data: true } }];
const bh = Buffer.from(JSON.stringify({ inputs: [{ name: 'INPUT0', datatype: 'UINT8', shape: [1, size], parameters: { binary_data_size: size } }], outputs: out }));
const bin = Buffer.concat([bh, payload]);
const b64 = Buffer.from(JSON.stringify({ inputs: [{ name: 'INPUT0', datatype: 'UINT8', shape: [1, size], data: payload.toString('base64') }], outputs: out }));
const b64nl = Buffer.from(JSON.stringify({ inputs: [{ name: 'INPUT0', datatype: 'UINT8', shape: [1, size], data: payload.toString('base64').replace(/.{76}/g, '$&\n') }], outputs: out }));
void (async () => {
  /** @type {[string, Buffer, Record<string, number>][]} */
  const forms = [['binary extension', bin, { 'Inference-Header-Content-Length': bh.length }], ['base64 JSON (clean)', b64, {}], ['base64 JSON (MIME line breaks, slow path)', b64nl, {}]];
  for (const [name, body, h] of forms) {
    for (let i = 0; i < 10; i++) await post(body, h);
    const ts = []; for (let i = 0; i < 60; i++) ts.push(await post(body, h));
    ts.sort((a, b) => a - b);
    console.log(`${size} B ${name}: body ${body.length} B, p50 ${ts[30].toFixed(2)} ms, p90 ${ts[54].toFixed(2)} ms`);
  }
  agent.destroy();
})();
