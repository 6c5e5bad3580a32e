#!/usr/bin/env node
// Builds the optional native modules into dist/gateway/native/, with the system's C compiler against
// the Node-API headers of the Node that runs this script (their ABI is stable across Node versions):
//   - base64.node, the base64 decoder (gateway/native/base64.c): without it (no compiler — `cc`, or
//     $CC —, off x86-64, a failed compile) the gateway decodes base64 in WebAssembly
//     (decode/base64/base64-simd.ts);
//   - lane.node, the compiled lane (gateway/native/lane.c; it needs libuv's header beside Node-API's):
//     without it the fast path serves every request (ingress/http1/lane.ts).
// Each says in one line when it is not built. `npm run build` runs it.
'use strict';
const { execFileSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');

const root = path.resolve(__dirname, '..');
const cc = process.env.CC || 'cc';

/** The directory holding node_api.h: beside the running Node's bin/ (the official layout; the `node` package's). */
function nodeApiHeaders() {
  const exe = fs.realpathSync(process.execPath);
  for (const dir of [path.resolve(path.dirname(exe), '..', 'include', 'node'), '/usr/include/node', '/usr/local/include/node']) {
    if (fs.existsSync(path.join(dir, 'node_api.h'))) return dir;
  }
  return undefined;
}

/**
 * Builds gateway/native/NAME.c into dist/gateway/native/NAME.node, or says why not (and removes an
 * old build): `why` is checked first.
 */
function build(name, what, without, why) {
  const out = path.join(root, 'dist', 'gateway', 'native', `${name}.node`);
  const skip = (reason) => {
    fs.rmSync(out, { force: true });
    process.stdout.write(`native ${what} not built (${reason}): ${without}\n`);
  };
  const headers = nodeApiHeaders();
  const reason = headers === undefined ? 'no node_api.h beside this Node' : why(headers);
  if (reason !== undefined) return skip(reason);
  fs.mkdirSync(path.dirname(out), { recursive: true });
  try {
    execFileSync(cc, ['-O2', '-fPIC', '-shared', '-Wall', '-Wextra', '-Werror', `-I${headers}`, '-o', out, path.join(root, 'gateway', 'native', `${name}.c`)],
      { stdio: ['ignore', 'ignore', 'pipe'] });
  } catch (err) {
    return skip(err.code === 'ENOENT' ? `no C compiler: ${cc}` : `${cc} failed: ${String(err.stderr ?? err.message).trim().split('\n')[0]}`);
  }
  return undefined;
}

build('base64', 'base64 decoder', 'base64 is decoded in WebAssembly',
  () => (process.arch === 'x64' ? undefined : `${process.arch}: the decoder is for x86-64 with AVX2`));
build('lane', 'compiled lane', 'the fast path serves every request',
  (headers) => (process.platform !== 'linux' ? `${process.platform}: the lane is for Linux`
    : fs.existsSync(path.join(headers, 'uv.h')) ? undefined : `no uv.h in ${headers}`));
