// A fast-path head's fields as node:http's req.headers and req.rawHeaders (Node's lib/_http_incoming.js
// matchKnownFields: the first kept of some names when repeated, set-cookie an array, cookie joined
// with "; ", the rest with ", ").
//
// Built field by field, that object is a run of keyed stores, each adding a property and so a map
// transition, at one store site that sees every name: megamorphic, ~2.4 µs of a 64 B request's
// ~100 µs of user time (perf, 64 B binary c=8). A client sends the same names in the same order on
// every request, and an inference client's are nearly all names the parser already knows by id
// (head.ts KNOWN_NAMES, each at most once in a head it accepts). So a head whose every field is a
// known name gets its object from a function made for that sequence of ids the first time it is
// seen: one object literal, the names in the code and in the object's one map, the values read
// from the parser (~0.02 µs). The code is made from KNOWN_NAMES only, never from the bytes that
// came, and at most MAX_SHAPES sequences get one; any other head (a name the parser does not
// know, more than MAX_FIELDS fields, code made from strings refused by
// --disallow-code-generation-from-strings) is built field by field as before.
import type { IncomingHttpHeaders } from 'node:http';
import { type HeadParser, KNOWN_NAMES } from './head';

/** Sequences of known names given a function of their own, at most. */
export const MAX_SHAPES = 64;
/** Fields of a head whose sequence of ids is one number: five bits an id (KNOWN_NAMES has fewer than 32), 50 bits. */
const MAX_FIELDS = 10;
const ID_BITS = 32;
if (KNOWN_NAMES.length > ID_BITS) throw new Error(`headers.ts: ${KNOWN_NAMES.length} known names do not fit ${Math.log2(ID_BITS)} bits`);

type Shape = (p: HeadParser) => IncomingHttpHeaders;

const shapes = new Map<number, Shape>();
/** False once making one failed (code generation refused): every head is built field by field. */
let making = true;

/**
 * Header fields that node:http keeps the first of when repeated (Node's lib/_http_incoming.js
 * matchKnownFields); set-cookie is an array, cookie joined with "; ", the rest with ", ".
 */
const FIRST_ONLY = new Set(['content-type', 'content-length', 'user-agent', 'referer', 'host', 'authorization',
  'proxy-authorization', 'if-modified-since', 'if-unmodified-since', 'from', 'location', 'max-forwards', 'retry-after',
  'etag', 'last-modified', 'server', 'age', 'expires']);

/** The head's fields as node:http's req.headers; undefined for a name no plain object holds (handed off). */
export function headersOf(p: HeadParser): IncomingHttpHeaders | undefined {
  const n = p.fieldCount;
  if (n <= MAX_FIELDS && making) {
    let key = 1; // a leading 1: the sequences (1) and (1, 1)… differ from () and each other
    const known = p.known;
    for (let i = 0; i < n; i++) {
      const id = known[i]!;
      if (id === 0) {
        key = 0;
        break;
      }
      key = key * ID_BITS + id;
    }
    if (key !== 0) {
      const shape = shapes.get(key) ?? shapeOf(key, known, n);
      if (shape !== undefined) return shape(p);
    }
  }
  return fieldByField(p);
}

/**
 * The function for the sequence of the first `n` known ids (none twice: the parser hands such a
 * head off), made now; undefined past MAX_SHAPES.
 */
function shapeOf(key: number, known: Uint8Array, n: number): Shape | undefined {
  if (shapes.size >= MAX_SHAPES) return undefined;
  const props = Array.from(known.subarray(0, n), (id, i) => `${JSON.stringify(KNOWN_NAMES[id])}: p.fieldValue(${i})`);
  try {
    // eslint-disable-next-line @typescript-eslint/no-implied-eval -- code from KNOWN_NAMES only (see above)
    const shape = new Function('p', `return { ${props.join(', ')} };`) as Shape;
    shapes.set(key, shape);
    return shape;
  } catch {
    making = false;
    return undefined;
  }
}

/** The object built one field at a time: any head. */
export function fieldByField(p: HeadParser): IncomingHttpHeaders | undefined {
  const h: Record<string, string | string[]> = {};
  for (let i = 0; i < p.fieldCount; i++) {
    const name = p.name(i);
    if (name === '__proto__') return undefined;
    const value = p.fieldValue(i);
    const had = Object.hasOwn(h, name) ? h[name] : undefined; // not Object.prototype's (a field named "constructor")
    if (had === undefined) h[name] = name === 'set-cookie' ? [value] : value;
    else if (name === 'set-cookie') (had as string[]).push(value);
    else if (!FIRST_ONLY.has(name)) h[name] = `${had as string}${name === 'cookie' ? '; ' : ', '}${value}`;
  }
  return h;
}

/** node:http's req.rawHeaders: names as sent, values, in order. */
export function rawHeadersOf(p: HeadParser): string[] {
  const raw: string[] = [];
  for (let i = 0; i < p.fieldCount; i++) {
    raw.push(p.bytes.toString('latin1', p.base + p.fields[4 * i]!, p.base + p.fields[4 * i + 1]!), p.fieldValue(i));
  }
  return raw;
}

/** How many sequences have a function (tests). */
export function shapeCount(): number {
  return shapes.size;
}
