// The built CLI (bin/tensorgate → dist/gateway/main.js), as a user runs it. `npm test` builds first.
import { spawn, spawnSync } from 'node:child_process';
import { join } from 'node:path';

const BIN = join(__dirname, '../../bin/tensorgate');

describe('tensorgate CLI', () => {
  test('--help lists the options and exits 0', () => {
    const r = spawnSync(BIN, ['--help'], { encoding: 'utf8' });
    expect(r.status).toBe(0);
    expect(r.stdout).toMatch(/^Usage: tensorgate/);
    expect(r.stdout).toContain('--backend HOST:PORT');
    expect(r.stdout).toContain('TENSORGATE_SERVER_PORT');
  });

  test('an invalid configuration lists every problem and exits 2', () => {
    const r = spawnSync(BIN, ['--port', 'x', '--frobnicate'], { encoding: 'utf8', env: { PATH: process.env.PATH } });
    expect(r.status).toBe(2);
    expect(r.stderr).toContain('unknown flag --frobnicate');
    expect(r.stderr).toContain('--port: must be an integer in [0, 65535], got "x"');
    expect(r.stderr).toContain('at least one Triton gRPC address is required');
  });

  test('--demo prints its listening line, answers /v2/health/ready, stops on SIGTERM', async () => {
    const child = spawn(BIN, ['--demo', '--host', '127.0.0.1', '--port', '0', '--metrics-port', '0'], { stdio: ['ignore', 'pipe', 'pipe'] });
    try {
      const line = await new Promise<string>((resolve, reject) => {
        let out = '';
        child.stdout.setEncoding('utf8').on('data', (s: string) => {
          out += s;
          if (out.includes('\n')) resolve(out.split('\n')[0]!);
        });
        child.once('exit', (code) => reject(new Error(`exited ${code} before listening`)));
      });
      const m = /^tensorgate listening on (http:\/\/127\.0\.0\.1:\d+) \(backend 127\.0\.0\.1:\d+, demo reference backend\)$/.exec(line);
      expect(m).not.toBeNull();
      const r = await fetch(`${m![1]}/v2/health/ready`);
      expect(r.status).toBe(200);
      // One JSON access line per request, without the payload.
      const body = JSON.stringify({ inputs: [{ name: 'INPUT0', datatype: 'BYTES', shape: [1, 1], data: ['secret-payload'] }] });
      expect((await fetch(`${m![1]}/v2/models/identity_bytes/infer`, { method: 'POST', body })).status).toBe(200);
      const access = await new Promise<Record<string, unknown>>((resolve) => {
        let out = '';
        const onData = (s: string): void => {
          out += s;
          const l = out.split('\n').find((x) => x.includes('"route":"infer"'));
          if (l !== undefined) {
            child.stdout.off('data', onData);
            resolve(JSON.parse(l) as Record<string, unknown>);
          }
        };
        child.stdout.on('data', onData);
      });
      expect(access).toMatchObject({ msg: 'request', route: 'infer', method: 'POST', status: 200, model: 'identity_bytes', encoding_in: 'json', encoding_out: 'json' });
      expect(Object.keys(access.hops_ms as object)).toContain('decode');
      expect(Object.keys(access.hops_at_ms as object)).toEqual(Object.keys(access.hops_ms as object));
      expect(JSON.stringify(access)).not.toContain('secret-payload');
      const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
      child.kill('SIGTERM');
      expect(await exited).toBe(0);
    } finally {
      child.kill('SIGKILL');
    }
  });
});
