// GET /v2/models/{m}/config as Triton writes it (docs/architecture.md#model-config): protobuf's JSON printer with
// field names as declared, fields in declaration order, default-valued scalars and empty
// repeated/map fields printed, unset messages and oneof members omitted, enums by name — and
// every 64-bit integer as a JSON number (Triton rewrites protobuf's quoted int64s). The walk is
// driven by the generated descriptor of our model_config.proto.
import type Long from 'long';
import descriptorJson from '../../proto/generated/model-config.json';
import { formatTritonFp32, formatTritonFp64 } from '../json/number-print';

interface FieldDesc { type: string; id: number; rule?: string; keyType?: string }
interface TypeDesc {
  fields?: Record<string, FieldDesc>; oneofs?: Record<string, { oneof: string[] }>; values?: Record<string, number>; nested?: Record<string, TypeDesc>;
}

const root = (descriptorJson as { nested: Record<string, TypeDesc> }).nested.inference!;

/** Resolves a type name as protobuf does: innermost scope first. */
function resolve(name: string, scope: readonly TypeDesc[]): TypeDesc {
  const parts = name.split('.');
  for (let i = scope.length - 1; i >= 0; i--) {
    let t: TypeDesc | undefined = scope[i];
    for (const p of parts) t = t?.nested?.[p];
    if (t !== undefined) return t;
  }
  throw new Error(`model_config descriptor has no type ${name}`);
}

const SCALAR = new Set(['double', 'float', 'int32', 'int64', 'uint32', 'uint64', 'sint32', 'sint64', 'fixed32', 'fixed64', 'sfixed32', 'sfixed64', 'bool', 'string', 'bytes']);

const jsonString = (s: string): string => JSON.stringify(s);

function scalarJson(type: string, v: unknown): string {
  switch (type) {
    case 'string': return jsonString(String((v as string | undefined) ?? ''));
    case 'bool': return v ? 'true' : 'false';
    case 'float': return formatFloat32(Number(v ?? 0));
    case 'double': return formatDouble(Number(v ?? 0));
    case 'bytes': return jsonString(Buffer.from((v as Uint8Array | undefined) ?? []).toString('base64'));
    default: return String((v as number | Long | undefined) ?? 0); // integers, Long included, as plain JSON numbers
  }
}

/** protobuf prints float fields with the shortest digits that round-trip as float32. */
function formatFloat32(x: number): string {
  if (!Number.isFinite(x)) return Number.isNaN(x) ? '"NaN"' : x > 0 ? '"Infinity"' : '"-Infinity"';
  for (let digits = 1; digits <= 9; digits++) {
    const s = Number(x.toPrecision(digits));
    if (Math.fround(s) === x) return String(s);
  }
  return formatTritonFp32(x);
}

function formatDouble(x: number): string {
  if (!Number.isFinite(x)) return Number.isNaN(x) ? '"NaN"' : x > 0 ? '"Infinity"' : '"-Infinity"';
  return Number.isInteger(x) ? String(x) : formatTritonFp64(x).replace(/\.0$/, '');
}

function valueJson(f: FieldDesc, v: unknown, scope: readonly TypeDesc[]): string {
  if (SCALAR.has(f.type)) return scalarJson(f.type, v);
  const t = resolve(f.type, scope);
  if (t.values !== undefined) {
    const n = Number(v ?? 0);
    const name = Object.entries(t.values).find(([, num]) => num === n)?.[0];
    return name === undefined ? String(n) : jsonString(name);
  }
  return messageJson(t, (v ?? {}) as Record<string, unknown>, [...scope, t]);
}

function messageJson(t: TypeDesc, msg: Record<string, unknown>, scope: readonly TypeDesc[]): string {
  const inOneof = new Set(Object.values(t.oneofs ?? {}).flatMap((o) => o.oneof));
  const parts: string[] = [];
  for (const [name, f] of Object.entries(t.fields ?? {})) {
    const v = msg[name];
    const present = v !== undefined && v !== null;
    if (f.keyType !== undefined) {
      const entries = Object.entries((v ?? {}) as Record<string, unknown>);
      parts.push(`${jsonString(name)}:{${entries.map(([k, x]) => `${jsonString(k)}:${valueJson(f, x, scope)}`).join(',')}}`);
    } else if (f.rule === 'repeated') {
      const items = (v ?? []) as unknown[];
      parts.push(`${jsonString(name)}:[${items.map((x) => valueJson(f, x, scope)).join(',')}]`);
    } else if (inOneof.has(name) || (!SCALAR.has(f.type) && resolve(f.type, scope).values === undefined)) {
      // Messages and oneof members have presence: printed only when set.
      if (present && Object.hasOwn(msg, name)) parts.push(`${jsonString(name)}:${valueJson(f, v, scope)}`);
    } else {
      parts.push(`${jsonString(name)}:${valueJson(f, v, scope)}`);
    }
  }
  return `{${parts.join(',')}}`;
}

/** The JSON body of GET /config for a decoded inference.ModelConfig (all-default config: empty body). */
export function encodeModelConfig(config: Record<string, unknown> | null | undefined): string {
  if (config === null || config === undefined) return '';
  const t = root.nested!.ModelConfig!;
  return messageJson(t, config, [root, t]);
}
