// docs/architecture.md stays true to the tree: its "Folders" list has one line for every folder of
// gateway/ (subfolders included) and for nothing else, its "Route families" table one row for every
// file of gateway/routes/, and the paths of the four kinds of request are there, each a numbered
// list of steps. (That the files it names exist is test/unit/citations.test.ts's check.)
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { stripCode } from '../support/markdown';

const ROOT = join(__dirname, '../..');
const GATEWAY = join(ROOT, 'gateway');
const PAGE = readFileSync(join(ROOT, 'docs/architecture.md'), 'utf8');

/** The text of the section under the heading `title` (## or ###), up to the next heading of any level. */
function section(title: string): string {
  const lines = PAGE.split('\n');
  const start = lines.findIndex((l) => /^#{2,3} /.test(l) && l.replace(/^#+ /, '') === title);
  if (start === -1) throw new Error(`docs/architecture.md has no section "${title}"`);
  const end = lines.findIndex((l, i) => i > start && /^#{1,3} /.test(l));
  return lines.slice(start + 1, end === -1 ? undefined : end).join('\n');
}

/** Every folder under gateway/, as `ingress/`, `upstream/infer/`. */
function folders(dir = GATEWAY, prefix = ''): string[] {
  return readdirSync(dir, { withFileTypes: true }).filter((e) => e.isDirectory())
    .flatMap((e) => [`${prefix}${e.name}/`, ...folders(join(dir, e.name), `${prefix}${e.name}/`)]);
}

/** The code span each list item of a section starts with: `- \`ingress/\` — …`. */
const listed = (text: string): string[] => [...text.matchAll(/^ *- `([^`]+)`/gm)].map((m) => m[1]!);

/** The code span in the first cell of each table row of a section: `| \`routes/infer.ts\` | …`. */
const tabled = (text: string): string[] => [...text.matchAll(/^\| `([^`]+)` \|/gm)].map((m) => m[1]!);

function compare(named: readonly string[], actual: readonly string[]): { missingFromPage: string[]; notInTree: string[] } {
  return { missingFromPage: actual.filter((a) => !named.includes(a)).sort(), notInTree: named.filter((n) => !actual.includes(n)).sort() };
}

describe('docs/architecture.md', () => {
  test('"Folders" has one line for every folder of gateway/, and only those', () => {
    const named = listed(section('Folders'));
    expect(compare(named, folders())).toEqual({ missingFromPage: [], notInTree: [] });
    expect(named.length).toBe(new Set(named).size);
  });

  test('"Route families" has one row for every file of gateway/routes/, and only those', () => {
    const actual = readdirSync(join(GATEWAY, 'routes')).filter((f) => f.endsWith('.ts')).map((f) => `routes/${f}`);
    const named = tabled(section('Route families'));
    expect(compare(named, actual)).toEqual({ missingFromPage: [], notInTree: [] });
    expect(named.length).toBe(new Set(named).size);
  });

  test.each([
    'V2 binary over HTTP/1.1', 'An OpenAI chat, streamed', 'A gRPC pass-through call', 'A TorchServe upload',
  ])('the path of "%s" is a numbered list of steps, each naming a file or folder', (title) => {
    const steps = section(title).split('\n').filter((l) => /^\d+\. /.test(l));
    expect(steps.length).toBeGreaterThanOrEqual(4);
    // Each step starts with the code it runs in: `ingress/server.ts`, `upstream/backends/`.
    expect(steps.filter((s) => !/^\d+\. \*\*`[\w./-]+`/.test(s))).toEqual([]);
    // Numbered 1, 2, 3, … in order.
    expect(steps.map((s) => Number(/^(\d+)\./.exec(s)![1]))).toEqual(steps.map((_s, i) => i + 1));
  });

  test('the checks find what they look for', () => {
    expect(listed('- `ingress/` — the listener\n  - `decode/control/` — bodies\ntext `json/`')).toEqual(['ingress/', 'decode/control/']);
    expect(tabled('| file | paths |\n|---|---|\n| `routes/infer.ts` | infer |')).toEqual(['routes/infer.ts']);
    expect(compare(['a/', 'c/'], ['a/', 'b/'])).toEqual({ missingFromPage: ['b/'], notInTree: ['c/'] });
    expect(stripCode('`x`')).toBe('');
  });
});
