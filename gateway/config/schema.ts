// The configuration schema: one table of options. Each option has a dotted key (its place in
// the YAML file), a type, a default, and is reachable as a flag and a TENSORGATE_* variable
// derived from the key. --help, validation and the README's configuration table come from here.

export interface Config {
  readonly server: {
    readonly host: string;
    readonly port: number;
    readonly metricsPort: number;
  };
  readonly upstream: {
    readonly backends: readonly string[];
    readonly transport: 'h2' | 'grpc-js';
    readonly timeoutMs: number;
  };
  readonly limits: {
    readonly maxInputSizeBytes: number;
    readonly maxBodyBytes: number;
  };
  readonly v1: {
    readonly statusFormat: 'tfserving' | 'kserve';
  };
  readonly demo: boolean;
}

type Kind =
  | { type: 'string' }
  | { type: 'port' }
  | { type: 'int'; min: number; max: number }
  | { type: 'bool' }
  | { type: 'enum'; values: readonly string[] }
  | { type: 'addresses' };

export interface OptionSpec {
  readonly key: string;
  readonly kind: Kind;
  readonly default: unknown;
  /** Long flag name without dashes; repeatable for lists. */
  readonly flag: string;
  readonly doc: string;
}

export const OPTIONS: readonly OptionSpec[] = [
  { key: 'server.host', kind: { type: 'string' }, default: '0.0.0.0', flag: 'host',
    doc: 'Address the HTTP server binds.' },
  { key: 'server.port', kind: { type: 'port' }, default: 8000, flag: 'port',
    doc: 'HTTP port for clients (Triton\'s HTTP default). 0 picks a free port.' },
  { key: 'server.metricsPort', kind: { type: 'port' }, default: 8002, flag: 'metrics-port',
    doc: 'Port of the metrics endpoint (Triton\'s default).' },
  { key: 'upstream.backends', kind: { type: 'addresses' }, default: [], flag: 'backend',
    doc: 'Triton gRPC addresses host:port; repeat the flag or comma-separate. Used round robin per request.' },
  { key: 'upstream.transport', kind: { type: 'enum', values: ['h2', 'grpc-js'] }, default: 'h2', flag: 'transport',
    doc: 'Data plane for inference calls: our own gRPC on node:http2, or @grpc/grpc-js.' },
  { key: 'upstream.timeoutMs', kind: { type: 'int', min: 1, max: 2 ** 31 - 1 }, default: 60_000, flag: 'upstream-timeout-ms',
    doc: 'Deadline of each upstream call, sent to Triton as grpc-timeout.' },
  { key: 'limits.maxInputSizeBytes', kind: { type: 'int', min: 1, max: 2 ** 31 - 1 }, default: 64 * 1024 * 1024, flag: 'max-input-size',
    doc: 'Byte budget for JSON headers, JSON-decoded tensors, raw and decompressed bodies (Triton\'s --http-max-input-size).' },
  { key: 'limits.maxBodyBytes', kind: { type: 'int', min: 1, max: 2 ** 31 - 1 }, default: 2 ** 31 - 1, flag: 'max-body-size',
    doc: 'Largest request body accepted at all (binary tensors included); larger bodies get 413 before they are read.' },
  { key: 'v1.statusFormat', kind: { type: 'enum', values: ['tfserving', 'kserve'] }, default: 'tfserving', flag: 'v1-status-format',
    doc: 'Body of GET /v1/models/{m}: TF-Serving\'s {"model_version_status":[…]} or KServe V1\'s {"name","ready"}.' },
  { key: 'demo', kind: { type: 'bool' }, default: false, flag: 'demo',
    doc: 'Start the reference backend in-process on a free port and use it as the only backend.' },
];

export function envName(key: string): string {
  return 'TENSORGATE_' + key.replace(/([a-z0-9])([A-Z])/g, '$1_$2').replace(/\./g, '_').toUpperCase();
}

/** Converts a raw value (from YAML, env or a flag) to the option's type, or returns a problem. */
export function coerce(spec: OptionSpec, raw: unknown): { value: unknown } | { problem: string } {
  const k = spec.kind;
  switch (k.type) {
    case 'string':
      return typeof raw === 'string' && raw.length > 0 ? { value: raw } : { problem: 'must be a non-empty string' };
    case 'bool':
      if (typeof raw === 'boolean') return { value: raw };
      if (raw === 'true' || raw === '1' || raw === '') return { value: true };
      if (raw === 'false' || raw === '0') return { value: false };
      return { problem: `must be true or false, got ${JSON.stringify(raw)}` };
    case 'enum':
      return typeof raw === 'string' && k.values.includes(raw)
        ? { value: raw }
        : { problem: `must be one of ${k.values.join(', ')}, got ${JSON.stringify(raw)}` };
    case 'port':
    case 'int': {
      const min = k.type === 'port' ? 0 : k.min;
      const max = k.type === 'port' ? 65535 : k.max;
      const n = typeof raw === 'number' ? raw : typeof raw === 'string' && /^\s*\d+\s*$/.test(raw) ? Number(raw) : NaN;
      return Number.isInteger(n) && n >= min && n <= max
        ? { value: n }
        : { problem: `must be an integer in [${min}, ${max}], got ${JSON.stringify(raw)}` };
    }
    case 'addresses': {
      const items = Array.isArray(raw) ? raw : typeof raw === 'string' ? raw.split(',') : null;
      if (items === null) return { problem: 'must be a list of host:port' };
      const out: string[] = [];
      for (const item of items) {
        const a = typeof item === 'string' ? item.trim() : '';
        if (!isAddress(a)) return { problem: `${JSON.stringify(item)} is not host:port` };
        out.push(a);
      }
      return { value: out };
    }
  }
}

function isAddress(a: string): boolean {
  const m = /^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9_.-]+):(\d{1,5})$/.exec(a);
  return m !== null && Number(m[2]) > 0 && Number(m[2]) <= 65535;
}
