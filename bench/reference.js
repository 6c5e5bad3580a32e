// The reference backend (dist/gateway/reference-backend, near-zero model cost) in a process of its
// own on a free loopback port: prints `REF_READY <host:port>` once it listens and closes on SIGTERM.
// Started by bench/procs.js (startReference), bench/pool-e2e.js and bench/workers.js; a file rather
// than a `node -e` string so that `npm run typecheck` (bench/tsconfig.json) checks the import.
'use strict';
const { startReferenceBackend } = require('#dist/gateway/reference-backend/server.js');

void startReferenceBackend({ host: '127.0.0.1', port: 0 }).then((b) => {
  process.stdout.write(`REF_READY ${b.address}\n`);
  process.on('SIGTERM', () => { void b.close().then(() => process.exit(0)); });
});
