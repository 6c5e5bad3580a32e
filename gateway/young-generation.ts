// V8's young generation (limits.growYoungGeneration). Tensor bodies arrive as many short-lived
// 64 KiB buffers whose memory lives outside the JS heap, while few JS objects are allocated: with a
// young generation left at its initial size they are freed by frequent, cheap scavenges; grown to
// V8's usual 16+ MB they pile up until external-memory pressure forces full collections (measured:
// bench/RESULTS.md, "Young generation"). Only the growth factor can change once V8 runs, so the
// CLI imports this module first: it applies what the command line or environment says before the
// rest of the gateway loads; startGateway applies the final configuration (a YAML file included).
// Its initial size stays V8's 1 MB. We tried --min-semi-space-size=4: it avoided a state
// where 4 MB uploads at c=8 drew a full collection every 4 requests (old space filling to its
// ~28 MB first limit with what frequent scavenges promoted), but it held more upload chunks
// between scavenges: +40 MB RSS under 16 concurrent 16 MiB uploads instead of +28 MB. The
// launchers (bin/tensorgate, the Dockerfile) give --initial-heap-size=64 instead, which avoids the
// same state (0 to 0.7 full collections per 100 requests) and keeps that RSS at +28 MB
// (bench/RESULTS.md, "Issue 16: CPU per request"). Measured again once body chunks were freed as
// they are used (buffers/release.ts): 4 MB, 8 MB and growth each lost where Node's HTTP/2 hands
// over DATA as views of its reads (a 4 MiB answer, the gRPC pass-through), which only a collection
// frees (bench/RESULTS.md, "memory freed when used").

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
