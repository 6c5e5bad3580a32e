// The README's configuration table stays true: every option's key, flag and variable appear in
// one row together.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { envName, OPTIONS } from '../../../gateway/config/schema';

test('README documents every configuration option', () => {
  const rows = readFileSync(join(__dirname, '../../../README.md'), 'utf8').split('\n').filter((l) => l.startsWith('| `'));
  for (const o of OPTIONS) {
    const row = rows.find((r) => r.startsWith(`| \`${o.key}\` |`));
    expect(row).toBeDefined();
    expect(row).toContain(`\`--${o.flag}\``);
    expect(row).toContain(`\`${envName(o.key)}\``);
    expect(row).toContain(Array.isArray(o.default) ? '| — |' : `| \`${String(o.default)}\` |`);
  }
});
