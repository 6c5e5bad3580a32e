// docs/config-options.md is generated from the option table, so it lists every option with its
// flag, variable and default as the loader knows them.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { envName, OPTIONS, renderConfigDoc } from '../../../gateway/config/schema';

test('docs/config-options.md is generated from the option table (run `npm run docs` after changing schema.ts)', () => {
  const committed = readFileSync(join(__dirname, '../../../docs/config-options.md'), 'utf8');
  expect(committed).toBe(renderConfigDoc());
});

test('every option has one row with its flag, variable and default', () => {
  const rows = renderConfigDoc().split('\n').filter((l) => l.startsWith('| `'));
  expect(rows).toHaveLength(OPTIONS.length);
  for (const o of OPTIONS) {
    const row = rows.find((r) => r.startsWith(`| \`${o.key}\` |`));
    expect(row).toContain(`| \`--${o.flag}\``);
    expect(row).toContain(`| \`${envName(o.key)}\``);
  }
  const row = (key: string): string | undefined => rows.find((r) => r.startsWith(`| \`${key}\` |`));
  expect(row('upstream.timeoutMs')).toContain('| `60000` |');
  expect(row('upstream.backends')).toContain('| — |');
  expect(row('api.disabled')).toContain('| `model-repository,shared-memory,trace,logging` |');
  expect(row('server.corsOrigin')).toContain('| `""` |');
});

test('a | inside a meaning does not split the table cell', () => {
  const routes = renderConfigDoc().split('\n').find((l) => l.startsWith('| `routes` |'));
  expect(routes).toContain('base64\\|data-uri\\|numbers\\|text');
  expect(routes?.split(/(?<!\\)\|/)).toHaveLength(7);
});
