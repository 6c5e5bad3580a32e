#!/usr/bin/env node
// Builds the optional native base64 decoder (gateway/native/base64.c) into
// dist/gateway/native/base64.node, with the system's C compiler against the Node-API headers of the
// Node that runs this script (their ABI is stable across Node versions). Optional: without a
// compiler (`cc`, or $CC), off x86-64, or when the compile fails, it says so in one line and the
// gateway decodes base64 in WebAssembly (decode/base64/base64-simd.ts). `npm run build` runs it.
'use strict';
const { execFileSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');

const root = path.resolve(__dirname, '..');
const source = path.join(root, 'gateway', 'native', 'base64.c');
const out = path.join(root, 'dist', 'gateway', 'native', 'base64.node');
const cc = process.env.CC || 'cc';

/** The directory holding node_api.h: beside the running Node's bin/ (the official layout; the `node` package's). */
function nodeApiHeaders() {
  const exe = fs.realpathSync(process.execPath);
  for (const dir of [path.resolve(path.dirname(exe), '..', 'include', 'node'), '/usr/include/node', '/usr/local/include/node']) {
    if (fs.existsSync(path.join(dir, 'node_api.h'))) return dir;
  }
  return undefined;
}

function skip(why) {
  fs.rmSync(out, { force: true });
  process.stdout.write(`native base64 decoder not built (${why}): base64 is decoded in WebAssembly\n`);
}

function main() {
  if (process.arch !== 'x64') return skip(`${process.arch}: the decoder is for x86-64 with AVX2`);
  const headers = nodeApiHeaders();
  if (headers === undefined) return skip('no node_api.h beside this Node');
  fs.mkdirSync(path.dirname(out), { recursive: true });
  try {
    execFileSync(cc, ['-O2', '-fPIC', '-shared', '-Wall', '-Wextra', '-Werror', `-I${headers}`, '-o', out, source], { stdio: ['ignore', 'ignore', 'pipe'] });
  } catch (err) {
    const said = err.code === 'ENOENT' ? `no C compiler: ${cc}` : `${cc} failed: ${String(err.stderr ?? err.message).trim().split('\n')[0]}`;
    return skip(said);
  }
  return undefined;
}

main();
