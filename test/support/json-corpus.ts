// A seeded corpus of JSON documents, well-formed and broken, for the reader's differential test
// (test/unit/json/reader.test.ts): V2 request bodies and tensor `data` arrays in many
// spellings, then byte-level mutations of them (deletions, insertions, replacements, truncations),
// which reach every error of rapidjson's grammar at many offsets.
import type { JsonNode } from '../../gateway/json/reader';
import { seeded } from './random';

/** One corpus entry: the bytes, and the end of the JSON within them (bytes after it are not JSON). */
export interface CorpusDoc {
  readonly bytes: Buffer;
  readonly end: number;
}

function numberText(rnd: () => number): string {
  const digits = (n: number): string => Array.from({ length: n }, () => String(Math.floor(rnd() * 10))).join('');
  const r = rnd();
  if (r < 0.3) return JSON.stringify(Math.fround((rnd() * 2 - 1) * 10 ** Math.floor(rnd() * 6 - 3)));
  if (r < 0.4) return String(Math.floor(rnd() * 1000) - 500);
  if (r < 0.45) return ['NaN', '-NaN', 'Infinity', '-Infinity', 'Inf', '-Inf'][Math.floor(rnd() * 6)]!;
  if (r < 0.5) return digits(16 + Math.floor(rnd() * 10)).replace(/^0+(?=\d)/, '1');
  const int = rnd() < 0.4 ? '0' : String(1 + Math.floor(rnd() * 9)) + digits(Math.floor(rnd() * 5));
  let t = (rnd() < 0.3 ? '-' : '') + int;
  if (rnd() < 0.8) t += `.${digits(1 + Math.floor(rnd() * 19))}`;
  if (rnd() < 0.2) t += `${rnd() < 0.5 ? 'e' : 'E'}${['', '+', '-'][Math.floor(rnd() * 3)]}${Math.floor(rnd() * (rnd() < 0.9 ? 30 : 999))}`;
  return t;
}

function numbersArray(rnd: () => number, n: number, sep: string): string {
  return `[${Array.from({ length: n }, () => numberText(rnd)).join(sep)}]`;
}

function bases(rnd: () => number): string[] {
  const seps = [',', ', ', ' ,', ',\n  ', '\t,\r\n'];
  const out: string[] = [
    '{"inputs":[{"name":"I","datatype":"FP32","shape":[2,3],"data":[1.5,-2,3e5,0.000123,-0.0,7]}]}',
    '{"inputs":[{"name":"I","datatype":"INT32","shape":[2,3],"data":[[1,2,3],[4,5,6]]}],"outputs":[{"name":"O"}]}',
    '{ "inputs" : [ { "name" : "I" , "data" : [ [ 1 , 2 ] , [ 3 , 4 ] ] , "shape" : [ 2 , 2 ] } ] }',
    '[1,"a",true,null,{"b64":"AA=="},[2],NaN,-Infinity,Inf,1e308,123456789012345678901234,false]',
    '[[[]],[],[[1],[2,[3,4]]],[-0,0,-0.0]]',
    '{"data":[1,2,"x"],"more":[3,[4,"y"],5],"deep":[[[[1.25]]]]}',
    '["\\u00e9\\"\\\\",1,"\\ud83d\\ude00",2]',
    '{"a":-1e-400,"b":[1e-400,-1E+2,0.5e-3]}',
  ];
  for (let i = 0; i < 24; i++) {
    const sep = seps[Math.floor(rnd() * seps.length)]!;
    const data = rnd() < 0.7
      ? numbersArray(rnd, 1 + Math.floor(rnd() * 12), sep)
      : `[${Array.from({ length: 1 + Math.floor(rnd() * 4) }, () => numbersArray(rnd, 1 + Math.floor(rnd() * 5), sep)).join(sep)}]`;
    out.push(rnd() < 0.5 ? data : `{"inputs":[{"name":"x","datatype":"FP64","shape":[1],"data":${data}}]}`);
  }
  return out;
}

const ALPHABET = '0123456789.eE+-,[]{}":NaIfinty \n\t\u0000x';

function mutate(rnd: () => number, doc: string): string {
  let t = doc;
  const count = 1 + Math.floor(rnd() * 2);
  for (let i = 0; i < count && t.length > 0; i++) {
    const at = Math.floor(rnd() * t.length);
    const ch = ALPHABET[Math.floor(rnd() * ALPHABET.length)]!;
    const r = rnd();
    if (r < 0.3) t = t.slice(0, at) + t.slice(at + 1);
    else if (r < 0.6) t = t.slice(0, at) + ch + t.slice(at);
    else if (r < 0.85) t = t.slice(0, at) + ch + t.slice(at + 1);
    else t = t.slice(0, at);
  }
  return t;
}

/** The corpus: every base, then `perBase` mutations of each; some carry bytes after the JSON. */
export function readerCorpus(perBase = 300): CorpusDoc[] {
  const rnd = seeded(20261122);
  const docs: CorpusDoc[] = [];
  for (const base of bases(rnd)) {
    for (let i = 0; i <= perBase; i++) {
      const text = i === 0 ? base : mutate(rnd, base);
      const json = Buffer.from(text, 'latin1');
      // A binary-extension header: the JSON ends at `end`; the digits after it are not its own.
      const trailer = rnd() < 0.2 ? Buffer.from('7.5e3]') : Buffer.alloc(0);
      docs.push({ bytes: Buffer.concat([json, trailer]), end: json.length });
    }
  }
  return docs;
}

/** A compact rendering of a reader tree (offsets, kinds, integer flags; not the number values). */
export function dumpTree(node: JsonNode): string {
  switch (node.kind) {
    case 'object': return `{${node.start}:${node.members.map((m) => `${JSON.stringify(m.key)}=${dumpTree(m.value)}`).join(',')}}`;
    case 'array': return `[${node.start}-${node.end}#${node.length}:${node.containers.map(dumpTree).join(',')}]`;
    case 'string': return `s${node.start}-${node.end}${JSON.stringify(node.value)}`;
    case 'number': return `n${node.start}-${node.end}${node.integer ? 'i' : 'd'}`;
    case 'bool': return node.value ? 't' : 'f';
    case 'null': return 'z';
  }
}
