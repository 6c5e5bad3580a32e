// CLI entry: load config → start the gateway → print the listening line; stop on signals.
// The only module with process-wide side effects. workers > 1 hands over to gateway/cluster.ts
// (a primary that forks the workers; each worker comes back here and runs startWorker).
import './young-generation'; // first: before the rest of the gateway allocates
import cluster from 'node:cluster';
import { runPrimary, startWorker, workerRole } from './cluster';
import { ConfigError, helpText, loadConfig } from './config/load';
import { EXIT_REQUESTS_CUT, STOP_GRACE_MS } from './deadline';
import { type CloseOutcome, type RunningGateway, startGateway } from './gateway';

async function main(): Promise<void> {
  let loaded;
  try {
    loaded = loadConfig({ argv: process.argv.slice(2), env: process.env });
    if (!loaded.help && loaded.config.workers > 1 && cluster.isWorker && workerRole(process.env) === undefined) {
      // Another cluster manager (pm2's cluster mode…) forked us: only a primary can fork.
      throw new ConfigError([`workers: ${loaded.config.workers} needs tensorgate to be the primary process, but it runs as a node:cluster worker of another manager; use workers: 1 there`]);
    }
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`tensorgate: ${err.message}\n`);
      process.exitCode = 2;
      return;
    }
    throw err;
  }
  if (loaded.help) {
    process.stdout.write(helpText() + '\n');
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
  const backendText = gateway.demoBackend ? `${gateway.backends.join(', ')}, demo reference backend` : gateway.backends.join(', ');
  process.stdout.write(`tensorgate listening on ${gateway.url} (backend ${backendText})\n`);
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
  if (err instanceof ConfigError) { // found at start, past loading: files the configuration names (upstream.tls)
    process.stderr.write(`tensorgate: ${err.message}\n`);
    process.exit(2);
  }
  process.stderr.write(`tensorgate: ${err instanceof Error ? err.stack ?? err.message : String(err)}\n`);
  process.exit(1);
});
