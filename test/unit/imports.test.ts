// The dependency rule of DESIGN.md §2, read from the sources: which folder of gateway/ may import
// which. A folder is a stage; the top-level files are named by their file name. The rules are the
// one table below; a forbidden edge or an import cycle fails with the file and the import.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';

const ROOT = resolve(__dirname, '../../gateway');

/**
 * What each part may NOT import (anything else it may). `*` stands for every part of gateway/
 * except errors.ts, which every stage may import. Routes run the stages, so they may import them
 * all; gateway.ts, main.ts and cluster.ts wire everything and are not listed.
 */
const FORBIDDEN: Readonly<Record<string, readonly string[]>> = {
  infer: ['*'],
  buffers: ['*', '!infer'],
  decode: ['upstream', 'encode', 'egress', 'ingress', 'telemetry', 'routes', 'buffers', 'gateway', 'reference-backend'],
  encode: ['decode', 'upstream', 'ingress', 'egress', 'telemetry', 'routes', 'buffers', 'gateway', 'reference-backend'],
  upstream: ['ingress', 'routes', 'decode', 'encode', 'egress', 'telemetry', 'gateway', 'reference-backend'],
  ingress: ['routes', 'decode', 'encode', 'upstream', 'gateway', 'reference-backend'],
  egress: ['routes', 'decode', 'ingress', 'telemetry', 'gateway', 'reference-backend'],
  telemetry: ['routes', 'decode', 'encode', 'upstream', 'ingress', 'egress', 'gateway', 'reference-backend'],
  config: ['routes', 'decode', 'encode', 'upstream', 'ingress', 'egress', 'telemetry', 'buffers', 'gateway', 'reference-backend'],
  'reference-backend': ['routes', 'decode', 'encode', 'upstream', 'ingress', 'egress', 'telemetry', 'buffers', 'gateway'],
  routes: ['gateway', 'reference-backend'],
  // Authentication sits between the router and the handlers: it sees route types and headers only.
  auth: ['routes', 'decode', 'encode', 'infer', 'upstream', 'egress', 'telemetry', 'buffers', 'gateway', 'reference-backend'],
  errors: ['*'],
  'api-access': ['*'],
};

function sources(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const p = join(dir, name);
    return statSync(p).isDirectory() ? sources(p) : p.endsWith('.ts') ? [p] : [];
  });
}

/** The part of gateway/ a file belongs to: its folder, or its own name for top-level files. */
function partOf(file: string): string {
  const rel = relative(ROOT, file).split('/');
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

function forbidden(from: string, to: string): boolean {
  if (from === to || to === 'errors') return false;
  const rules = FORBIDDEN[from] ?? [];
  if (rules.includes(`!${to}`)) return false;
  return rules.includes('*') || rules.includes(to);
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

test('no forbidden edge between the parts of gateway/ (DESIGN.md §2)', () => {
  expect(violations(edges)).toEqual([]);
});

test('no import cycles', () => {
  expect(cycles(edges)).toEqual([]);
});

test('the rule check itself finds a forbidden import and a cycle', () => {
  const decoder = join(ROOT, 'decode/example.ts');
  const bad = importsOf(decoder, "import { H2DataPlane } from '../upstream/h2-call';\nimport type { Ledger } from '../telemetry/metrics';\n");
  expect(violations(bad)).toEqual([
    "decode/example.ts imports '../upstream/h2-call' (decode ↛ upstream)",
    "decode/example.ts imports '../telemetry/metrics' (decode ↛ telemetry)",
  ]);
  const a = join(ROOT, 'infer/a.ts');
  const b = join(ROOT, 'infer/b.ts');
  expect(cycles([{ from: a, to: b, spec: './b' }, { from: b, to: a, spec: './a' }])).toEqual(['infer/a.ts → infer/b.ts → infer/a.ts']);
  // errors.ts is every stage's; infer imports nothing else of ours.
  expect(violations(importsOf(join(ROOT, 'infer/x.ts'), "import { ERRORS } from '../errors';"))).toEqual([]);
  expect(violations(importsOf(join(ROOT, 'infer/x.ts'), "import type { Body } from '../ingress/body';"))).toHaveLength(1);
});
