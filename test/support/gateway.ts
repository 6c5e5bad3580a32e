// Starts the gateway in-process on 127.0.0.1:0 with a frozen config built from flags.
import { loadConfig } from '../../gateway/config/load';
import { type RunningGateway, startGateway } from '../../gateway/gateway';

export async function gatewayFor(args: string[]): Promise<RunningGateway> {
  // Free ports for both listeners; no access log in test output unless a test asks for it.
  const r = loadConfig({ argv: ['--host', '127.0.0.1', '--port', '0', '--metrics-port', '0', '--log-level', 'silent', ...args], env: {} });
  if (r.help) throw new Error('unexpected --help');
  return startGateway(r.config);
}
