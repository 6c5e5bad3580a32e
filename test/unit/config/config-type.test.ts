// The Config type and the option table agree: every option is a leaf of the loaded config, at the
// place its key names, and the config has no leaf the table does not declare. (The type is written
// by hand for its documentation; this test keeps it honest.)
import { loadConfig } from '../../../gateway/config/load';
import { OPTIONS } from '../../../gateway/config/schema';

const KEYS = new Set(OPTIONS.map((o) => o.key));

function leaves(o: Record<string, unknown>, prefix = ''): string[] {
  return Object.entries(o).flatMap(([k, v]) => {
    const key = prefix + k;
    // Lists, the declarative route tables and auth.limits are leaves: options hold them whole.
    return typeof v === 'object' && v !== null && !Array.isArray(v) && !KEYS.has(key) ? leaves(v as Record<string, unknown>, `${key}.`) : [key];
  });
}

test('every option is a leaf of Config, and every leaf of Config is an option', () => {
  const r = loadConfig({ argv: ['--demo'], env: {} });
  if (r.help) throw new Error('unexpected --help');
  expect(leaves(r.config as unknown as Record<string, unknown>).sort()).toEqual(OPTIONS.map((o) => o.key).sort());
});

test('the loaded config is frozen all the way down', () => {
  const r = loadConfig({ argv: ['--demo'], env: {} });
  if (r.help) throw new Error('unexpected --help');
  const walk = (o: unknown): void => {
    if (typeof o !== 'object' || o === null) return;
    expect(Object.isFrozen(o)).toBe(true);
    for (const v of Object.values(o)) walk(v);
  };
  walk(r.config);
});
