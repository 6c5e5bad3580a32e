// CLI entry: load config → start the gateway → print the listening line; stop on signals.
// The only module with process-wide side effects. workers > 1 hands over to gateway/cluster.ts
// (a primary that forks the workers; each worker comes back here and runs startWorker).
import './node-version'; // first: refuses an older Node before anything else loads
import './young-generation'; // next: before the rest of the gateway allocates
import './v8-tiering'; // and V8's tier-up, before the gateway's functions run
import cluster from 'node:cluster';
import { createServer } from 'node:net';
import { backendText, reportStartFailure, runPrimary, startWorker, workerRole } from './cluster';
import { type Command, ConfigError, helpText, loadCommand, unreadableFileProblems } from './config/load';
import { EXIT_REQUESTS_CUT, STOP_GRACE_MS } from './deadline';
import { listening } from './config/listen-error';
import { type CloseOutcome, type RunningGateway, startGateway } from './gateway';
import { startReferenceBackend } from './reference-backend/server';
// Compiled in (tsc copies it to dist/package.json): the container image has dist/, not the project's package.json.
import { version } from '../package.json';

async function main(): Promise<void> {
  let loaded: Command;
  try {
    loaded = loadCommand({ argv: process.argv.slice(2), env: process.env });
    // Files the configuration names, before anything starts (a cluster's workers would each fail).
    const files = loaded.run === 'gateway' && workerRole(process.env) === undefined ? unreadableFileProblems(loaded.config) : [];
    if (files.length > 0) throw new ConfigError(files);
    if (loaded.run === 'gateway' && loaded.config.workers > 1 && cluster.isWorker && workerRole(process.env) === undefined) {
      // Another cluster manager (pm2's cluster mode…) forked us: only a primary can fork.
      throw new ConfigError([`workers: ${loaded.config.workers} needs tensorgate to be the primary process, but it runs as a node:cluster worker of another manager; use workers: 1 there`]);
    }
  } catch (err) {
    if (err instanceof ConfigError) {
      printProblems(err);
      process.exitCode = 2;
      return;
    }
    throw err;
  }
  if (loaded.run === 'help') {
    process.stdout.write(helpText() + '\n');
    return;
  }
  if (loaded.run === 'version') {
    process.stdout.write(`tensorgate ${version}\n`);
    return;
  }
  if (loaded.run === 'demo-backend') {
    await runDemoBackend(loaded.host, loaded.port);
    return;
  }
  const role = workerRole(process.env);
  if (role !== undefined) {
    stopOnSignals(await startWorker(loaded.config, role), loaded.config.server);
    return;
  }
  if (loaded.config.workers > 1) {
    await runPrimary(loaded.config);
    return;
  }
  const gateway = await startGateway(loaded.config);
  // Before the listening line: a supervisor may signal as soon as it reads it (observed: a
  // SIGTERM sent on the line killed the process with the default action).
  stopOnSignals(gateway, loaded.config.server);
  const grpc = gateway.grpcPort === undefined ? '' : `; gRPC port ${gateway.grpcPort}`;
  process.stdout.write(`tensorgate listening on ${gateway.url} (backend ${backendText(gateway.backends, gateway.demoBackend !== undefined, loaded.config)})${grpc}\n`);
}

/** One line per problem, each naming its key; no stack (docs/configuration.md). */
function printProblems(err: ConfigError): void {
  process.stderr.write(err.problems.map((p) => `tensorgate: ${p}\n`).join(''));
}

/** `--demo-backend`: the reference backend alone (a Triton-protocol gRPC server), until SIGTERM/SIGINT. */
async function runDemoBackend(host: string, port: number): Promise<void> {
  // grpc-js reports a failed bind as "No address added" (and logs it): a plain socket tried
  // first gives the errno for the one-line message.
  const probe = createServer().listen(port, host);
  await listening(probe, 'server.port', host, port);
  await new Promise((resolve) => probe.close(resolve));
  const backend = await startReferenceBackend({ host, port });
  const stop = (): void => {
    void backend.close().then(() => process.exit(0));
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
  process.stdout.write(`tensorgate demo backend listening on ${backend.address} (Triton gRPC; try: tensorgate --backend ${backend.address} --config config/demo-openai.yaml)\n`);
}

/**
 * SIGTERM/SIGINT: /readyz goes 503 and requests are still served for server.drainGraceMs (a
 * second signal ends that early), then the drain: requests in flight get server.drainTimeoutMs
 * to finish, then they are cut and their upstream calls cancelled; upstream sessions close. The
 * exit code says how it went: 0 clean, EXIT_REQUESTS_CUT when requests were cut, 1 on an error.
 */
function stopOnSignals(gateway: RunningGateway, server: { readonly drainTimeoutMs: number; readonly drainGraceMs: number }): void {
  let stopping = false;
  const stop = (): void => {
    if (stopping) {
      void gateway.close(); // a second signal: the grace ends now, the drain keeps its deadline
      return;
    }
    stopping = true;
    // close() is bounded by the deadline step by step; this is the net under it, should one hang.
    setTimeout(() => {
      process.stderr.write(`tensorgate: not stopped ${STOP_GRACE_MS} ms after server.drainGraceMs + server.drainTimeoutMs (${server.drainGraceMs} + ${server.drainTimeoutMs} ms) passed; exiting\n`);
      process.exit(1);
    }, server.drainGraceMs + server.drainTimeoutMs + STOP_GRACE_MS).unref();
    const exit = (outcome: CloseOutcome): never => process.exit(outcome.requestsCut === 0 ? 0 : EXIT_REQUESTS_CUT);
    gateway.close(server.drainTimeoutMs, server.drainGraceMs).then(exit, (err: unknown) => {
      process.stderr.write(`tensorgate: error while stopping: ${String(err)}\n`);
      process.exit(1);
    });
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}

main().catch((err: unknown) => {
  // Found at start, past loading: a port in use, a file that changed since. A cluster worker
  // hands it to the primary, which prints it once (cluster.ts).
  if (err instanceof ConfigError) {
    if (workerRole(process.env) !== undefined) reportStartFailure(err);
    else {
      printProblems(err);
      process.exit(2);
    }
    return;
  }
  process.stderr.write(`tensorgate: ${err instanceof Error ? err.stack ?? err.message : String(err)}\n`);
  process.exit(1);
});
