// The whole differential case matrix, grouped.
import { binaryCases } from './binary';
import { compressionCases } from './compression';
import { errorCases } from './errors';
import { jsonCases } from './json';
import { paramCases } from './params';
import { rawCases } from './raw';
import { routeCases } from './routes';
import type { Case, CaseGroup } from './types';

export const GROUPS: CaseGroup[] = [jsonCases, paramCases, binaryCases, rawCases, errorCases, compressionCases, routeCases];

export interface NamedCase extends Case {
  group: string;
  /** "<group>: <name>" - the test name. */
  title: string;
}

export function allCases(): NamedCase[] {
  const out: NamedCase[] = [];
  const seen = new Set<string>();
  for (const g of GROUPS) {
    for (const c of g.cases) {
      const title = `${g.group}: ${c.name}`;
      if (seen.has(title)) throw new Error(`duplicate case name: ${title}`);
      seen.add(title);
      out.push({ ...c, group: g.group, title });
    }
  }
  return out;
}
