// The layering rule of docs/architecture.md, read from the sources: which folder of gateway/ may import
// which. A folder is a stage; the top-level files are named by their file name. The rules are the
// one table below; a forbidden edge or an import cycle fails with the file and the import.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';

const ROOT = resolve(__dirname, '../../gateway');

/** What no decoder imports: decoding knows neither where the bytes came from nor where they go. */
const OUTSIDE_DECODE = ['upstream', 'encode', 'egress', 'ingress', 'telemetry', 'routes', 'pipeline', 'passthrough', 'gateway', 'reference-backend'];

/**
 * What each part may NOT import (anything else it may). A part is a folder of gateway/, or one of
 * the subfolders of upstream/, decode/ and ingress/ (`upstream/infer`, `decode/base64`), or a top-level
 * file by its name. A rule names a part or a folder of parts (`upstream` is every `upstream/…`);
 * `!part` allows one part that a wider rule forbids. `*` stands for every part except errors.ts,
 * which every stage may import. Routes run the stages, so they may import them all; gateway.ts, main.ts and
 * cluster.ts wire everything and are not listed.
 */
const OUTSIDE_UPSTREAM = ['ingress', 'routes', 'pipeline', 'passthrough', 'decode', 'encode', 'egress', 'telemetry', 'gateway', 'reference-backend'];
const FORBIDDEN: Readonly<Record<string, readonly string[]>> = {
  // The inference vocabulary, and its protobuf form (framing a request, splitting an answer) on grpc/wire.ts.
  infer: ['*', '!grpc'],
  buffers: ['*', '!infer'],
  // The wire vocabulary of gRPC and the JSON library are leaves: anything may use them (JSON printing: the assembler).
  grpc: ['*'],
  json: ['*', '!wasm'],
  // The WebAssembly assembler: LEB128 is protobuf's varint.
  wasm: ['*', '!grpc'],
  // decode/ itself: V2's bodies (the JSON header, JSON data, the binary extension, raw and
  // multipart bodies, generate), knowing no dialect; its subfolders by concern.
  decode: [...OUTSIDE_DECODE, 'buffers', 'decode/threads', 'decode/dialects', 'decode/control'],
  // Base64, whole or as the body arrives: a leaf under every decoder.
  'decode/base64': [...OUTSIDE_DECODE, 'buffers', 'decode'],
  // The dialects' bodies (OpenAI, V1, declarative, SageMaker's and Vertex AI's media types) on V2's decoders.
  'decode/dialects': [...OUTSIDE_DECODE, 'buffers', 'decode/threads', 'decode/control'],
  'decode/control': [...OUTSIDE_DECODE, 'buffers', 'decode'],
  // The decode threads run the decode stage off the main thread and frame its result.
  'decode/threads': [...OUTSIDE_DECODE, 'decode/dialects', 'decode/control'],
  encode: ['decode', 'upstream', 'ingress', 'egress', 'telemetry', 'routes', 'pipeline', 'passthrough', 'buffers', 'gateway', 'reference-backend'],
  // upstream/: the backend set and the connections to it serve every call; control and shared
  // memory sit on top of them, and ModelInfer does not reach into either.
  'upstream/backends': [...OUTSIDE_UPSTREAM, 'upstream/control', 'upstream/shared-memory'],
  'upstream/connections': [...OUTSIDE_UPSTREAM, 'upstream/control', 'upstream/shared-memory'],
  // The one gRPC call on node:http2 (grpc-call.ts), the pass-through's upstream side and the mirror
  // copies on it: every call made there, by the data plane (upstream/infer) and the pass-through alike.
  'upstream/call': [...OUTSIDE_UPSTREAM, 'upstream/control', 'upstream/shared-memory', 'upstream/infer'],
  'upstream/infer': [...OUTSIDE_UPSTREAM, 'upstream/control', 'upstream/shared-memory'],
  'upstream/control': [...OUTSIDE_UPSTREAM, 'upstream/infer', 'upstream/shared-memory'],
  'upstream/shared-memory': [...OUTSIDE_UPSTREAM],
  // Our own HTTP/2 client (framing, HPACK, flow control) is a leaf: node:net and nothing of ours but
  // the list through its members (linked-list.ts), itself a leaf.
  'upstream/h2': ['*', '!linked-list'],
  'linked-list': ['*'],
  ingress: ['routes', 'pipeline', 'passthrough', 'decode', 'encode', 'upstream', 'gateway', 'reference-backend'],
  // The fast path's own HTTP/1.1 (the head parser, the read loop, its request and answer): bytes in,
  // offsets out; nothing of ours but the memory its reads land in (buffers/reads.ts).
  'ingress/http1': ['*', '!buffers'],
  // egress writes what it is handed: the answer is split (infer/) and encoded (encode/) before.
  egress: ['routes', 'pipeline', 'passthrough', 'decode', 'encode', 'upstream', 'ingress', 'telemetry', 'gateway', 'reference-backend'],
  telemetry: ['routes', 'pipeline', 'passthrough', 'decode', 'encode', 'upstream', 'ingress', 'egress', 'gateway', 'reference-backend'],
  // config normalises pass-through prefixes as the requests they match are normalised (passthrough/path.ts).
  config: ['routes', 'pipeline', 'decode', 'encode', 'upstream', 'ingress', 'egress', 'telemetry', 'buffers', 'gateway', 'reference-backend'],
  'reference-backend': ['routes', 'pipeline', 'passthrough', 'decode', 'encode', 'upstream', 'ingress', 'egress', 'telemetry', 'buffers', 'gateway'],
  // The steps every inference route shares: the stages in order, never a route.
  pipeline: ['routes', 'passthrough', 'gateway', 'reference-backend'],
  // gRPC and HTTP pass-through: bytes relayed, never decoded into tensors or answered by a route.
  passthrough: ['routes', 'pipeline', 'decode', '!decode/control', 'encode', 'egress', 'gateway', 'reference-backend'],
  routes: ['gateway', 'reference-backend'],
  // Authentication sits between the router and the handlers: it sees route types and headers only.
  auth: ['routes', 'pipeline', 'passthrough', 'decode', 'encode', 'infer', 'upstream', 'egress', 'telemetry', 'buffers', 'gateway', 'reference-backend'],
  errors: ['*'],
  'api-access': ['*'],
};

function sources(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const p = join(dir, name);
    return statSync(p).isDirectory() ? sources(p) : p.endsWith('.ts') ? [p] : [];
  });
}

/** Folders of gateway/ whose subfolders are parts of their own. */
const SPLIT = new Set(['upstream', 'decode', 'ingress']);

/** The part of gateway/ a file belongs to: its folder (or subfolder), or its own name for top-level files. */
function partOf(file: string): string {
  const rel = relative(ROOT, file).split('/');
  if (rel.length > 2 && SPLIT.has(rel[0]!)) return `${rel[0]}/${rel[1]}`;
  return rel.length > 1 ? rel[0]! : rel[0]!.replace(/\.ts$/, '');
}

interface Edge { readonly from: string; readonly to: string; readonly spec: string }

/** Every relative import (value or type) of a file, resolved to a file of gateway/ (others skipped). */
function importsOf(file: string, text = readFileSync(file, 'utf8')): Edge[] {
  const out: Edge[] = [];
  for (const m of text.matchAll(/(?:import|export)\s[^'"]*?from\s+'(\.[^']+)'|import\('(\.[^']+)'\)/g)) {
    const spec = (m[1] ?? m[2])!;
    const target = resolve(dirname(file), spec);
    if (!target.startsWith(ROOT + '/')) continue; // proto/, package files
    out.push({ from: file, to: target.endsWith('.json') ? target : `${target}.ts`, spec });
  }
  return out;
}

/** Whether a rule names a part: the part itself, or the folder it is in. */
const names = (rule: string, part: string): boolean => rule === part || part.startsWith(`${rule}/`);

function forbidden(from: string, to: string): boolean {
  if (from === to || to === 'errors') return false;
  const rules = FORBIDDEN[from] ?? [];
  if (rules.includes(`!${to}`)) return false;
  return rules.includes('*') || rules.some((r) => names(r, to));
}

function violations(edges: readonly Edge[]): string[] {
  return edges
    .filter((e) => forbidden(partOf(e.from), partOf(e.to)))
    .map((e) => `${relative(ROOT, e.from)} imports '${e.spec}' (${partOf(e.from)} ↛ ${partOf(e.to)})`);
}

/** Import cycles between files, each as its path of files. */
function cycles(edges: readonly Edge[]): string[] {
  const next = new Map<string, string[]>();
  for (const e of edges) next.set(e.from, [...(next.get(e.from) ?? []), e.to]);
  const state = new Map<string, 'open' | 'done'>();
  const found: string[] = [];
  const visit = (f: string, path: string[]): void => {
    if (state.get(f) === 'done') return;
    if (state.get(f) === 'open') {
      found.push([...path.slice(path.indexOf(f)), f].map((p) => relative(ROOT, p)).join(' → '));
      return;
    }
    state.set(f, 'open');
    for (const t of next.get(f) ?? []) visit(t, [...path, f]);
    state.set(f, 'done');
  };
  for (const f of next.keys()) visit(f, []);
  return found;
}

const files = sources(ROOT);
const edges = files.flatMap((f) => importsOf(f));

test('every import resolves to a file of gateway/', () => {
  const files = new Set(sources(ROOT));
  expect(edges.filter((e) => !e.to.endsWith('.json') && !files.has(e.to)).map((e) => `${relative(ROOT, e.from)}: ${e.spec}`)).toEqual([]);
});

test('no forbidden edge between the parts of gateway/', () => {
  expect(violations(edges)).toEqual([]);
});

test('no import cycles', () => {
  expect(cycles(edges)).toEqual([]);
});

test('the rule check itself finds a forbidden import and a cycle', () => {
  const decoder = join(ROOT, 'decode/example.ts');
  const bad = importsOf(decoder, "import { H2DataPlane } from '../upstream/infer/h2-plane';\nimport type { Ledger } from '../telemetry/metrics';\n");
  expect(violations(bad)).toEqual([
    "decode/example.ts imports '../upstream/infer/h2-plane' (decode ↛ upstream/infer)",
    "decode/example.ts imports '../telemetry/metrics' (decode ↛ telemetry)",
  ]);
  const a = join(ROOT, 'infer/a.ts');
  const b = join(ROOT, 'infer/b.ts');
  expect(cycles([{ from: a, to: b, spec: './b' }, { from: b, to: a, spec: './a' }])).toEqual(['infer/a.ts → infer/b.ts → infer/a.ts']);
  // errors.ts is every stage's; infer imports nothing else of ours.
  expect(violations(importsOf(join(ROOT, 'infer/x.ts'), "import { ERRORS } from '../errors';"))).toEqual([]);
  expect(violations(importsOf(join(ROOT, 'infer/x.ts'), "import type { Body } from '../ingress/body';"))).toHaveLength(1);
});
