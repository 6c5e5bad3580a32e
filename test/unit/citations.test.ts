// Comments cite what a maintainer has: the repository's own pages (docs/*.md, README.md), Triton's
// source files, RFC sections. Not design notes kept outside the repository, nor issue numbers
// (the issues are not in it either). Checked over the code, the tests, the benchmarks and the
// scripts; bench/RESULTS.md is a record of past runs and keeps its headings. And every page and
// heading anchor a comment cites (`docs/architecture.md#copies`) exists.
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { anchors } from '../support/markdown';

const ROOT = join(__dirname, '../..');
const FOLDERS = ['gateway', 'test', 'bench', 'scripts'];
const KEPT = new Set(['bench/RESULTS.md', relative(ROOT, __filename)]);
const TEXT = /\.(ts|js|mjs|cjs|py|go|sh|json|ya?ml|conf|txt|md)$/;

function files(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const p = join(dir, name);
    return statSync(p).isDirectory() ? files(p) : TEXT.test(name) ? [p] : [];
  });
}

const SOURCES = FOLDERS.flatMap((f) => files(join(ROOT, f))).filter((f) => !KEPT.has(relative(ROOT, f)));

/** A citation of something outside the repository: the design notes beside it, or an issue by number. */
const OUTSIDE = /\b(DESIGN|PROTOCOL)\.md\b|\.\.\/shared\/|\bissues? #?\d/gi;

/** A section of bench/RESULTS.md named by its title, which may hold an issue number: the record's own words. */
const RESULTS_SECTION = /RESULTS\.md,? "[^"]*"/g;

/** Whether a line cites something outside the repository. */
function citesOutside(line: string): boolean {
  OUTSIDE.lastIndex = 0;
  return OUTSIDE.test(line.replace(RESULTS_SECTION, ''));
}

/** Each line of a file that cites something outside the repository, as `path:line: text`. */
function outside(file: string): string[] {
  return readFileSync(file, 'utf8').split('\n').flatMap((line, i) => (citesOutside(line) ? [`${relative(ROOT, file)}:${i + 1}: ${line.trim()}`] : []));
}

test('no file cites the design notes outside the repository or an issue number', () => {
  expect(SOURCES.flatMap(outside)).toEqual([]);
});

test('every page and heading a file cites exists', () => {
  const cache = new Map<string, Set<string> | undefined>();
  const headingsOf = (page: string): Set<string> | undefined => {
    if (!cache.has(page)) cache.set(page, existsSync(join(ROOT, page)) ? anchors(readFileSync(join(ROOT, page), 'utf8')) : undefined);
    return cache.get(page);
  };
  const broken: string[] = [];
  for (const file of SOURCES) {
    readFileSync(file, 'utf8').split('\n').forEach((line, i) => {
      for (const m of line.matchAll(/\b(README\.md|docs\/[\w-]+\.md)(?:#([\w-]+))?/g)) {
        const headings = headingsOf(m[1]!);
        if (headings === undefined || (m[2] !== undefined && !headings.has(m[2]))) broken.push(`${relative(ROOT, file)}:${i + 1}: ${m[0]}`);
      }
    });
  }
  expect(broken).toEqual([]);
});

test('every path docs/architecture.md names exists (gateway/ or the repository root)', () => {
  // Paths with a slash, in code spans: `upstream/status.ts`, `decode/threads/`. Triton's own
  // files (`src/http_server.cc`, `protobuf/…`) are not ours and are left out.
  const text = readFileSync(join(ROOT, 'docs/architecture.md'), 'utf8');
  const named = [...text.matchAll(/`([\w.-]+\/[\w./-]*)`/g)].map((m) => m[1]!)
    .filter((p) => !/^(src|protobuf)\//.test(p) && (p.endsWith('/') || /\.(ts|js|md)$/.test(p)));
  expect(named.length).toBeGreaterThan(20);
  expect(named.filter((p) => !existsSync(join(ROOT, 'gateway', p)) && !existsSync(join(ROOT, p)))).toEqual([]);
});

test('the checks find what they look for', () => {
  // Spelled in pieces, so that a grep of test/ for such citations does not find this file.
  const [design, protocol, issue] = ['DESIGN', 'PROTOCOL', 'issue'].map((w, i) => (i < 2 ? `${w}.md` : w));
  expect([`// as ${design} §3 says`, `// (${protocol} §8)`, '// ../shared/seeds/x.md', `// found in ${issue} 13`, '// Issue 16 tried',
    `// (bench/RESULTS.md, "Buffer pools"; ${issue} 7)`].filter((l) => !citesOutside(l))).toEqual([]);
  expect(['// RFC 9113 §8.1', '// docs/architecture.md#copies', "// Triton's src/http_server.cc", '// an issue the client sees',
    '// (bench/RESULTS.md, "Issue 16: CPU per request")'].filter(citesOutside)).toEqual([]);
  expect(anchors('## The layering rule\n### Base64, numbers\n').has('base64-numbers')).toBe(true);
});
