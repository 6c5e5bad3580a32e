// gateway/ stays readable by folder: no folder holds more than 15 files (a fuller one is split by
// concern, as decode/ is), and a route file only routes, its steps living in pipeline/
// (docs/architecture.md "Route families"), so none is longer than 150 lines.
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';

const ROOT = join(__dirname, '../../gateway');
const MAX_FILES = 15;
const MAX_ROUTE_LINES = 150;

/** Every folder under gateway/ (gateway/ itself included), with its number of files. */
function folders(dir = ROOT): { folder: string; files: number }[] {
  const entries = readdirSync(dir, { withFileTypes: true });
  return [
    { folder: relative(ROOT, dir) || '.', files: entries.filter((e) => e.isFile()).length },
    ...entries.filter((e) => e.isDirectory()).flatMap((e) => folders(join(dir, e.name))),
  ];
}

test(`no folder of gateway/ holds more than ${MAX_FILES} files`, () => {
  expect(folders().filter((f) => f.files > MAX_FILES).map((f) => `${f.folder}: ${f.files} files`)).toEqual([]);
});

test(`no route file is longer than ${MAX_ROUTE_LINES} lines`, () => {
  const long = readdirSync(join(ROOT, 'routes')).filter((f) => f.endsWith('.ts'))
    .map((f) => ({ f, lines: readFileSync(join(ROOT, 'routes', f), 'utf8').trimEnd().split('\n').length }))
    .filter((r) => r.lines > MAX_ROUTE_LINES);
  expect(long.map((r) => `routes/${r.f}: ${r.lines} lines`)).toEqual([]);
});
