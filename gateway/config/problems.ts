// Checking a value read from YAML or JSON (the configuration, the key file, a request body): what
// counts as a mapping, and the collector that lists every problem under the key it is about
// (`routes[2].inputs.x: unknown key`), so that a start stops once, with all of them.

/** A mapping (a JSON object): never null, never a list. */
export const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** Records a problem of the key `key` below the entry ('' = the entry itself). */
export type Bad = (key: string, msg: string) => void;

/** The collector of an entry at `at` (`keys[3]`): each problem pushed as `at.key: msg`. */
export function problemsAt(problems: string[], at: string): Bad {
  return (key, msg) => { problems.push(`${at}${key === '' ? '' : '.' + key}: ${msg}`); };
}
