#!/usr/bin/env node
// The native base64 decoder's kernels on their own (gateway/native/base64.c), against Node's decoder:
// microseconds to decode N KiB of base64 text already in memory, the same text and target each time
// (hot caches: the kernels' own speed, not the memory's).
//   node bench/base64-kernels.js [--dist DIR] [--kib 800] [--calls 2000]
'use strict';
const path = require('node:path');

const argv = process.argv.slice(2);
const opt = (name, dflt) => { const i = argv.indexOf(name); return i === -1 ? dflt : argv[i + 1]; };
const dist = path.resolve(opt('--dist', path.join(__dirname, '..', 'dist')));
const n = Number(opt('--kib', 800)) * 1024 & ~63;
const calls = Number(opt('--calls', 2000));

let native;
try {
  native = require(path.join(dist, 'gateway', 'native', 'base64.node'));
} catch (err) {
  process.stdout.write(`no native decoder in ${dist} (${err.code ?? err.message}): npm run build where there is a C compiler\n`);
  process.exit(0);
}
const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';
const text = Buffer.allocUnsafe(n);
for (let i = 0; i < n; i++) text[i] = alphabet.charCodeAt((i * 7 + (i >> 5)) % 64);
const expected = Buffer.from(text.toString('latin1'), 'base64');
const target = Buffer.alloc(n);

function time(label, decode) {
  for (let i = 0; i < 200; i++) decode();
  const t = process.hrtime.bigint();
  for (let i = 0; i < calls; i++) decode();
  const ns = Number(process.hrtime.bigint() - t) / calls;
  const same = target.subarray(0, expected.length).equals(expected);
  process.stdout.write(`${label}: ${(ns / 1000).toFixed(1)} µs per ${n / 1024} KiB (${(n / ns).toFixed(1)} GB/s of text)${same ? '' : ' WRONG BYTES'}\n`);
  target.fill(0);
}

process.stdout.write(`native kernel: ${native.kernel}\n`);
time(native.kernel, () => native.decodeRuns(text, 0, n, target, 0));
if (native.decodeRunsAvx2 !== undefined && native.kernel !== 'avx2') time('avx2', () => native.decodeRunsAvx2(text, 0, n, target, 0));
const string = text.toString('latin1');
time('Node (buf.write from a string)', () => target.write(string, 0, 'base64'));
