// The Node the gateway runs on, checked before anything else loads. Older Nodes fail later and
// worse: Node 20 has no ArrayBuffer#transfer, so its gateway started and then crashed on the first
// large request it answered (buffers/reads.ts gives read memory back with it). package.json's
// "engines" names the same floor; bin/tensorgate runs the project's own Node when it is installed.
const MIN = [22, 15, 0] as const;

const have = process.versions.node.split('.').map(Number);
const old = have[0]! !== MIN[0] ? have[0]! < MIN[0] : have[1]! !== MIN[1] ? have[1]! < MIN[1] : have[2]! < MIN[2];
if (old) {
  process.stderr.write(`tensorgate: node: ${process.versions.node} is older than ${MIN.join('.')}; run it with Node ${MIN.join('.')} or later `
    + '(bin/tensorgate uses node_modules/.bin/node after npm ci)\n');
  process.exit(2);
}
