// Seven suites: unit (pure code), fuzz (seeded property tests, test/fuzz/),
// integration (real servers on 127.0.0.1: the gateway and the reference backend), interop
// (HTTP/2 clients we did not write against them), conformance (real Triton from nvidia-pytriton,
// started once for the suite),
// faults (failures put in the backend's path: real Triton killed, restarted, slowed, and a TCP
// fault proxy; each file starts and stops its own Tritons), deploy (the container image built and
// run with podman, in front of a Triton of its own).
'use strict';
const transform = { '^.+\\.ts$': 'ts-jest' };
// dist/ (the build, with its copy of package.json) is run by tests as a child process, never imported.
const common = { testEnvironment: 'node', transform, moduleFileExtensions: ['ts', 'js', 'json'], modulePathIgnorePatterns: ['<rootDir>/dist/'] };

module.exports = {
  projects: [
    { ...common, displayName: 'unit', testMatch: ['<rootDir>/test/unit/**/*.test.ts'] },
    { ...common, displayName: 'integration', testMatch: ['<rootDir>/test/integration/**/*.test.ts'] },
    // Clients we did not write (curl, httpx, Go net/http, h2load, h2spec) against the gateway (test/interop/).
    { ...common, displayName: 'interop', testMatch: ['<rootDir>/test/interop/**/*.test.ts'] },
    // Property tests over every decoder and the HTTP path (test/fuzz/harness.ts): a seeded slice
    // here, long runs with `npm run fuzz`.
    { ...common, displayName: 'fuzz', testMatch: ['<rootDir>/test/fuzz/**/*.test.ts'] },
    {
      ...common,
      displayName: 'conformance',
      testMatch: ['<rootDir>/test/conformance/**/*.test.ts'],
      globalSetup: '<rootDir>/test/conformance/global-setup.ts',
      globalTeardown: '<rootDir>/test/conformance/global-teardown.ts',
      setupFilesAfterEnv: ['<rootDir>/test/conformance/needs-triton.ts'],
    },
    { ...common, displayName: 'faults', testMatch: ['<rootDir>/test/faults/**/*.test.ts'] },
    { ...common, displayName: 'deploy', testMatch: ['<rootDir>/test/deploy/**/*.test.ts'] },
  ],
};
