// V8's young generation (limits.growYoungGeneration). Tensor bodies arrive as many short-lived
// 64 KiB buffers whose memory lives outside the JS heap, while few JS objects are allocated: with a
// young generation left at its initial size they are freed by frequent, cheap scavenges; grown to
// V8's usual 16+ MB they pile up until external-memory pressure forces full collections (measured:
// bench/RESULTS.md, "Young generation"). Only the growth factor can change once V8 runs, so the
// CLI imports this module first: it applies what the command line or environment says before the
// rest of the gateway loads; startGateway applies the final configuration (a YAML file included).
// Its initial size is a V8 start-up flag: bin/tensorgate and the Dockerfile run node with
// --min-semi-space-size=4 (4 MB, V8's own start is 1 MB). At 1 MB, 4 MB uploads at c=8 fell,
// in about half the runs, into a full collection every 4 requests (old space filling with what
// frequent scavenges promoted), 8.5–11.6 ms CPU per request; at 4 MB there was none, 3.9–4.5 ms
// (bench/RESULTS.md, "Issue 16: CPU per request"). They also give --initial-heap-size=64: with
// V8's default first old-generation limit (~28 MB) a process could instead settle into a full
// collection every 4 requests of 4 MB (1.7 mark-compacts per 100 requests at c=8, none with it).
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
