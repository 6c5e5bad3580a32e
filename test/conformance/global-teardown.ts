import type { RunningTriton } from '../support/triton';

export default async function globalTeardown(): Promise<void> {
  await (globalThis as { __triton?: RunningTriton }).__triton?.stop();
}
