// Every conformance test runs against the real Triton global-setup.ts starts: without the Python it
// is built from, the file's tests are skipped, saying so (CI=true: failed; test/support/tools.ts).
import { needsFile, PYTHON } from '../support/tools';

needsFile(PYTHON());
