// CLI entry: load config → start the gateway → print the listening line; stop on signals.
// The only module with process-wide side effects.
import './young-generation'; // first: before the rest of the gateway allocates
import { ConfigError, helpText, loadConfig } from './config/load';
import { startGateway } from './gateway';

async function main(): Promise<void> {
  let loaded;
  try {
    loaded = loadConfig({ argv: process.argv.slice(2), env: process.env });
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
  const gateway = await startGateway(loaded.config);
  const backendText = gateway.demoBackend ? `${gateway.backends.join(', ')}, demo reference backend` : gateway.backends.join(', ');
  process.stdout.write(`tensorgate listening on ${gateway.url} (backend ${backendText})\n`);

  let stopping = false;
  const stop = (): void => {
    if (stopping) return;
    stopping = true;
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
