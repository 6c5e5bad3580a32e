// Starts the gateway in-process on 127.0.0.1:0 with a frozen config built from flags.
import { loadConfig } from '../../gateway/config/load';
import { type RunningGateway, startGateway } from '../../gateway/gateway';

export async function gatewayFor(args: string[]): Promise<RunningGateway> {
  const r = loadConfig({ argv: ['--host', '127.0.0.1', '--port', '0', ...args], env: {} });
  if (r.help) throw new Error('unexpected --help');
  return startGateway(r.config);
}
