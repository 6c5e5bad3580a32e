// CLI entry: load config → start the gateway → print the listening line; stop on signals.
// The only module with process-wide side effects. workers > 1 hands over to gateway/cluster.ts
// (a primary that forks the workers; each worker comes back here and runs startWorker).
import './young-generation'; // first: before the rest of the gateway allocates
import cluster from 'node:cluster';
import { runPrimary, startWorker, workerRole } from './cluster';
import { ConfigError, helpText, loadConfig } from './config/load';
import { STOP_GRACE_MS } from './deadline';
import { type RunningGateway, startGateway } from './gateway';

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
    stopOnSignals(await startWorker(loaded.config, role), loaded.config.server.drainTimeoutMs);
    return;
  }
  if (loaded.config.workers > 1) {
    await runPrimary(loaded.config);
    return;
  }
  const gateway = await startGateway(loaded.config);
  const backendText = gateway.demoBackend ? `${gateway.backends.join(', ')}, demo reference backend` : gateway.backends.join(', ');
  process.stdout.write(`tensorgate listening on ${gateway.url} (backend ${backendText})\n`);
  stopOnSignals(gateway, loaded.config.server.drainTimeoutMs);
}

/**
 * SIGTERM/SIGINT: drain (requests in flight get server.drainTimeoutMs to finish, then they are
 * cut and their upstream calls cancelled), close upstream sessions, exit 0.
 */
function stopOnSignals(gateway: RunningGateway, drainTimeoutMs: number): void {
  let stopping = false;
  const stop = (): void => {
    if (stopping) return;
    stopping = true;
    // close() is bounded by the deadline step by step; this is the net under it, should one hang.
    setTimeout(() => {
      process.stderr.write(`tensorgate: not stopped ${STOP_GRACE_MS} ms after server.drainTimeoutMs (${drainTimeoutMs} ms) passed; exiting\n`);
      process.exit(1);
    }, drainTimeoutMs + STOP_GRACE_MS).unref();
    gateway.close().then(() => process.exit(0), (err: unknown) => {
      process.stderr.write(`tensorgate: error while stopping: ${String(err)}\n`);
      process.exit(1);
    });
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}

main().catch((err: unknown) => {
  process.stderr.write(`tensorgate: ${err instanceof Error ? err.stack ?? err.message : String(err)}\n`);
  process.exit(1);
});
