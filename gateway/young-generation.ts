// V8's young generation (limits.growYoungGeneration). Tensor bodies arrive as many short-lived
// 64 KiB buffers whose memory lives outside the JS heap, while few JS objects are allocated: with a
// young generation left at its initial size they are freed by frequent, cheap scavenges; grown to
// V8's usual 16+ MB they pile up until external-memory pressure forces full collections
// (bench/RESULTS.md, "Cut-through and the young generation"). The initial size stays V8's 1 MB too: a larger one holds
// more upload chunks between scavenges, and what frequent scavenges promote is given room by the
// launchers' --initial-heap-size=64 instead (bin/tensorgate; the sizes compared: bench/RESULTS.md,
// "The young generation's size and unhook's promotions"). Only the growth factor can change once
// V8 runs, so the CLI imports this module first: it applies what the command line or environment
// says before the rest of the gateway loads; startGateway applies the final configuration (a YAML
// file included).

import { setFlagsFromString } from 'node:v8';

export function growYoungGeneration(grow: boolean): void {
  setFlagsFromString(`--semi-space-growth-factor=${grow ? 2 : 1}`);
}

/** The config's reading of a bool (config/schema.ts): true, 1 or empty. Invalid values are reported there. */
const isTrue = (v: string): boolean => v === 'true' || v === '1' || v === '';

function earlyChoice(argv: readonly string[], env: NodeJS.ProcessEnv): boolean {
  const fromEnv = env.TENSORGATE_LIMITS_GROW_YOUNG_GENERATION;
  let grow = fromEnv !== undefined && isTrue(fromEnv);
  for (const a of argv) {
    if (a === '--grow-young-generation') grow = true;
    else if (a.startsWith('--grow-young-generation=')) grow = isTrue(a.slice('--grow-young-generation='.length));
  }
  return grow;
}

growYoungGeneration(earlyChoice(process.argv.slice(2), process.env));
