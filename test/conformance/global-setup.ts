// Starts real Triton (nvidia-pytriton, test/triton/zoo.py) once for the conformance suite.
// Ports go to the test workers through TRITON_* environment variables.
import { PYTHON } from '../support/tools';
import { startTriton } from '../support/triton';

export default async function globalSetup(): Promise<void> {
  // No Python to build Triton's venv from: every file's tests are skipped (needs-triton.ts), and
  // under CI=true failed there, one per file.
  if (PYTHON().path === undefined) return;
  // Its SageMaker frontend too (test/conformance/cloud-dialects.test.ts), /invocations calling `simple`.
  const triton = await startTriton({ sagemakerDefaultModel: 'simple' });
  process.env.TRITON_HTTP = `127.0.0.1:${triton.http}`;
  process.env.TRITON_SAGEMAKER = `127.0.0.1:${triton.sagemaker}`;
  process.env.TRITON_GRPC = `127.0.0.1:${triton.grpc}`;
  process.env.TRITON_VERSION = triton.version;
  (globalThis as { __triton?: typeof triton }).__triton = triton;
}
