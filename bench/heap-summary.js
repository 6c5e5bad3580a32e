// Summarises a profile written by bench/heap-sample.js: the share of the sampled bytes by the
// gateway file nearest the allocation on its stack (node's internals under a call of ours count
// for that call; none: "(no gateway frame)", node:http's own parsing and objects), and the top
// allocating frames with that file.
//   node bench/heap-summary.js FILE [--top 30]
'use strict';
const fs = require('node:fs');

const argv = process.argv.slice(2);
const file = argv[0];
const topAt = argv.indexOf('--top');
const topN = topAt < 0 ? 30 : Number(argv[topAt + 1]);
const profile = JSON.parse(fs.readFileSync(file, 'utf8'));
if (profile.error !== undefined) throw new Error(`${file}: ${profile.error}`);

const frame = (cf) => `${cf.functionName || '(anonymous)'} ${cf.url.replace(/^.*\/dist\/gateway\//, '').replace(/^.*\/node_modules\//, '')}:${cf.lineNumber + 1}`;
const byFile = new Map();
const byFrame = new Map();
let total = 0;
const add = (m, k, v) => m.set(k, (m.get(k) ?? 0) + v);

// Iterative walk: the tree can be deep.
/** @type {{ node: any, own: string | undefined }[]} */
const stack = [{ node: profile.head, own: undefined }];
for (let next = stack.pop(); next !== undefined; next = stack.pop()) {
  const { node, own: above } = next;
  const cf = node.callFrame;
  if (cf.url.includes('heap-sample.js') || cf.url === 'node:inspector') continue;
  const own = cf.url.includes('/dist/gateway/') ? cf.url.replace(/^.*\/dist\/gateway\//, '') : above;
  if (node.selfSize > 0) {
    total += node.selfSize;
    add(byFile, own ?? '(no gateway frame)', node.selfSize);
    add(byFrame, `${frame(cf)}  (in ${own ?? 'node'})`, node.selfSize);
  }
  for (const child of node.children) stack.push({ node: child, own });
}

const table = (m) => [...m].sort((a, b) => b[1] - a[1]).slice(0, topN)
  .map(([k, v]) => `| ${(v / total * 100).toFixed(1)} % | ${k} |`).join('\n');
process.stdout.write(`${(total / 1048576).toFixed(1)} MiB sampled\n\n| share | gateway file |\n|---|---|\n${table(byFile)}\n\n`
  + `| share | allocating frame (gateway file) |\n|---|---|\n${table(byFrame)}\n`);
