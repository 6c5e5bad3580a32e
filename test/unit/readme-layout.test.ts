// The README stays true to the tree: its Layout block names every folder and top-level file of
// gateway/ (and nothing that does not exist), every docs/ page is linked from it, and every relative
// link in README.md and docs/*.md points to a file (and heading) that exists. The long pages' tables
// of contents list every section, in order.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { anchors, headingAnchor, stripCode } from '../support/markdown';

const ROOT = join(__dirname, '../..');
const README = readFileSync(join(ROOT, 'README.md'), 'utf8');

function layoutBlock(): string[] {
  const m = /^## Layout\n+```\n([\s\S]*?)\n```/m.exec(README);
  if (m === null) throw new Error('README.md has no "## Layout" code block');
  return m[1]!.split('\n');
}

/** Entries of gateway/ in the Layout block: the lines indented once under `gateway/`. */
function namedInGateway(lines: readonly string[]): string[] {
  const start = lines.findIndex((l) => l.startsWith('gateway/'));
  const names: string[] = [];
  for (const line of lines.slice(start + 1)) {
    if (!line.startsWith(' ')) break;
    const m = /^ {2}(\S+)/.exec(line);
    if (m !== null) names.push(m[1]!);
  }
  return names;
}

describe('README Layout', () => {
  test('names every folder and top-level file of gateway/, and only those', () => {
    const named = namedInGateway(layoutBlock()).sort();
    const actual = readdirSync(join(ROOT, 'gateway'), { withFileTypes: true })
      .filter((e) => e.isDirectory() || e.name.endsWith('.ts'))
      .map((e) => (e.isDirectory() ? `${e.name}/` : e.name))
      .sort();
    expect({ missingFromLayout: actual.filter((a) => !named.includes(a)), notInTree: named.filter((n) => !actual.includes(n)) })
      .toEqual({ missingFromLayout: [], notInTree: [] });
  });

  test('every other path it names exists', () => {
    const paths = layoutBlock().filter((l) => /^\S/.test(l)).map((l) => l.split(/\s+/)[0]!);
    expect(paths.filter((p) => !existsSync(join(ROOT, p)))).toEqual([]);
  });
});

const DOCS = readdirSync(join(ROOT, 'docs')).filter((f) => f.endsWith('.md')).map((f) => join(ROOT, 'docs', f));

describe('links', () => {
  test('README links every docs/ page', () => {
    const linked = new Set([...README.matchAll(/\]\((docs\/[^)#\s]+)/g)].map((m) => m[1]));
    expect(DOCS.map((d) => `docs/${d.split('/').pop()}`).filter((d) => !linked.has(d))).toEqual([]);
  });

  test.each([join(ROOT, 'README.md'), ...DOCS].map((f) => [f.slice(ROOT.length + 1), f]))(
    'relative links in %s resolve', (_name, file) => {
      const text = readFileSync(file, 'utf8');
      const broken: string[] = [];
      for (const m of stripCode(text).matchAll(/\]\(([^)\s]+)\)/g)) {
        const link = m[1]!;
        if (/^[a-z][a-z0-9+.-]*:/i.test(link)) continue; // https:, mailto:
        const [path, fragment] = link.split('#') as [string, string | undefined];
        const target = path === '' ? file : resolve(dirname(file), path);
        if (!existsSync(target)) { broken.push(link); continue; }
        if (fragment !== undefined && target.endsWith('.md') && !anchors(readFileSync(target, 'utf8')).has(fragment)) broken.push(link);
      }
      expect(broken).toEqual([]);
    });
});

describe('tables of contents', () => {
  /** The `- [title](#anchor)` lines before the first section, and the ## / ### headings after, as anchors. */
  test.each(['docs/production.md', 'docs/architecture.md'])('%s lists every ## and ### heading, in order', (page) => {
    const text = readFileSync(join(ROOT, page), 'utf8');
    const firstSection = text.search(/^## /m);
    const listed = [...text.slice(0, firstSection).matchAll(/^ *- \[[^\]]+\]\(#([^)]+)\)$/gm)].map((m) => m[1]);
    const headings = [...stripCode(text.slice(firstSection)).matchAll(/^#{2,3} +(.+)$/gm)].map((m) => headingAnchor(m[1]!));
    expect(listed).toEqual(headings);
  });
});
