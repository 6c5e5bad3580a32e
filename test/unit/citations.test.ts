// Comments cite what a maintainer has: the repository's own pages (docs/*.md, README.md) and files,
// Triton's source files (and other upstreams', named with the upstream), RFC sections. Not design
// notes kept outside the repository, nor issue numbers, here or another repository's
// (`owner/repo#123`: the issues are not in it either). Checked over the code, the tests, the
// benchmarks and the scripts; bench/RESULTS.md is a record of past runs and keeps its headings.
// And every page and heading anchor a comment cites (`docs/architecture.md#copies`) exists, as
// every file a comment names, unless the comment says whose it is (Triton's, Node's, grpc-js's…).
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

/**
 * A citation of something outside the repository: the design notes beside it, or an issue by
 * number (ours, or another repository's: `owner/repo#123`).
 */
const OUTSIDE = /\b(DESIGN|PROTOCOL|STYLE)\.md\b|\.\.\/shared\/|\bissues? #?\d|\b[\w.-]+\/[\w.-]+#\d+\b/gi;

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

/** Every file of the repository, by its path from the root (the build and the packages left out). */
function repositoryFiles(dir = ROOT): string[] {
  return readdirSync(dir).flatMap((name) => {
    const p = join(dir, name);
    if (/^(node_modules|dist|dist-bench|coverage|\.git)$/.test(name)) return [];
    return statSync(p).isDirectory() ? repositoryFiles(p) : [relative(ROOT, p)];
  });
}

/** A file name in a comment: `steps.ts`, `upstream/status.ts`, `bench/run.js`, `src/http_server.cc`. */
const FILE_NAME = /(?<![\w./@#:{,-])((?:[\w-][\w.-]*\/)*[\w-][\w-]*(?:\.[\w-]+)*\.(?:ts|js|mjs|cjs|md|py|sh|go|cc|h|proto))\b/g;

/** The upstreams whose files a comment may name, said with the name (Triton's src/http_server.cc). */
const UPSTREAM = /\b(Triton|triton-inference-server|PyTriton|tritonclient|gRPC|grpc-js|Node|rapidjson|kubernetes|Python|TorchServe|Hugging Face|vLLM|OpenSSL)\b/;

/** The comment of a line of code, or undefined (`//`, a block comment's lines; `#` in Python and shell). */
function commentOf(line: string, hash: boolean): string | undefined {
  const t = line.trim();
  if (hash) return t.startsWith('#') ? t : /\s#\s(.*)$/.exec(t)?.[1];
  if (t.startsWith('//') || t.startsWith('*') || t.startsWith('/*')) return t;
  return /(?:^|\s)\/\/\s(.*)$/.exec(t)?.[1];
}

/**
 * The file names in `file`'s comments that are not in the repository, unless the comment says
 * whose they are (on the line or the one before).
 */
function unknownFiles(file: string, known: (name: string) => boolean, text = readFileSync(file, 'utf8')): string[] {
  const hash = /\.(py|sh)$/.test(file);
  let before = '';
  return text.split('\n').flatMap((line, i) => {
    const comment = commentOf(line, hash);
    const said = `${before} ${comment ?? ''}`;
    before = comment ?? '';
    if (comment === undefined || UPSTREAM.test(said)) return [];
    return [...comment.matchAll(FILE_NAME)].filter((m) => !known(m[1]!)).map((m) => `${relative(ROOT, file)}:${i + 1}: ${m[1]}`);
  });
}

/** Whether a named file is one of ours: a path of the repository, or the end of one; a built file by its source. */
function knownIn(files: readonly string[]): (name: string) => boolean {
  const paths = new Set(files);
  const ends = new Set(files.flatMap((f) => f.split('/').map((_, i, parts) => parts.slice(i).join('/'))));
  return (name) => {
    const source = name.replace(/^(dist|dist-bench)\//, '');
    return [source, source.replace(/\.js$/, '.ts')].some((n) => paths.has(n) || ends.has(n));
  };
}

test('every file a comment names is in the repository, or is named with the upstream it belongs to', () => {
  const known = knownIn(repositoryFiles());
  expect(SOURCES.filter((f) => /\.(ts|js|mjs|cjs|py|sh|go)$/.test(f)).flatMap((f) => unknownFiles(f, known))).toEqual([]);
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
  const [design, protocol, style, issue] = ['DESIGN', 'PROTOCOL', 'STYLE', 'issue'].map((w, i) => (i < 3 ? `${w}.md` : w));
  expect([`// as ${design} §3 says`, `// (${protocol} §8)`, `// (${style}: habits)`, '// ../shared/seeds/x.md', `// found in ${issue} 13`, '// Issue 16 tried',
    `// (bench/RESULTS.md, "Buffer pools"; ${issue} 7)`, '// (declined upstream, nodejs/node#44887)'].filter((l) => !citesOutside(l))).toEqual([]);
  expect(['// RFC 9113 §8.1', '// docs/architecture.md#copies', "// Triton's src/http_server.cc", '// an issue the client sees',
    '// (bench/RESULTS.md, "Issue 16: CPU per request")'].filter(citesOutside)).toEqual([]);
  expect(anchors('## The layering rule\n### Base64, numbers\n').has('base64-numbers')).toBe(true);
  const file = join(ROOT, 'test/unit/example.ts');
  const text = ['// (see NOTES.md)', '// as steps.ts and upstream/status.ts do; bench/loadgen.js runs dist/gateway/main.js',
    "// Triton's src/http_server.cc; Node's lib/net.js", '/** grpc-js keeps it', ' * in retrying-call.ts */', 'x(); // what gone/file.ts did'];
  const unknown = unknownFiles(file, knownIn(repositoryFiles()), text.join('\n'));
  expect(unknown).toEqual(['test/unit/example.ts:1: NOTES.md', 'test/unit/example.ts:6: gone/file.ts']);
});
